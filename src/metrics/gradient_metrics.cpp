// The gradient metrics: one-cell halo exchange, the torch.gradient stencil (row_kernels), and the
// weighted means of the magnitudes from the one engine.

#include "gridshard/metrics/metrics.hpp"

#include <algorithm>
#include <string>

#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

template <class T>
std::vector<double> gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, const GradientOptions& options) {
    const Box& box = grid.box();
    const std::span<const T> fields[] = {x.values};
    check_gradient_grid(grid.grid());  // the global grid: alike on every rank
    const HaloExchange& plan = grid.halo_plan(options.periodic_lon);
    auto halo = plan.make_buffers<T>(std::max<std::int64_t>(x.channels, 0));
    // One agreement for the arguments and the halo exchange's (folded in), then the exchange.
    check_arguments(grid,
                    first_error({shard_error(x, box, "x"), gradient_options_error(options, box.lat.size()),
                                 plan.argument_error<T>(fields, halo)}),
                    x.channels);
    plan.exchange_agreed<T>(fields, halo);
    std::vector<double> result(static_cast<std::size_t>(x.channels * box.area()));
    std::vector<T> row(static_cast<std::size_t>(box.lon.size()));
    const GradientRows<T> rows(grid.grid(), box, options, x.values, x.channels, halo, 0);
    for (std::int64_t c = 0; c < x.channels; ++c) {
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            rows.row(c, i, row.data());
            std::copy(row.begin(), row.end(), result.begin() + (c * box.lat.size() + i) * box.lon.size());
        }
    }
    return result;
}

template <class T>
std::vector<double> weighted_mean_gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                     const GradientOptions& options, Summation summation) {
    const ValidityPolicy policy = ValidityPolicy::skip_nan;
    const TermSums sums = accumulate_terms<T>(
        grid, x, nullptr, a, {weight_and(policy, {Term::truth_gradient}), policy, summation}, &options);
    return per_channel(sums, [&](std::int64_t c) { return sums.gradient_mean(c); });
}

template <class T>
std::vector<double> gradient_magnitude_percent_diff(const ShardedGrid& grid, FieldShard<T> truth,
                                                    FieldShard<T> prediction, Weights a, const GradientOptions& options,
                                                    Summation summation) {
    // ACE's definition: each field's magnitudes averaged over that field's own non-NaN points.
    const ValidityPolicy policy = ValidityPolicy::skip_nan;
    const TermSums sums = accumulate_terms<T>(
        grid, truth, &prediction, a,
        {weight_and(policy, {Term::truth_own_gradient, Term::prediction_own_gradient}), policy, summation}, &options);
    return per_channel(sums, [&](std::int64_t c) { return sums.gradient_percent_diff(c, GradientPoints::own); });
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                      \
    template std::vector<double> gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, const GradientOptions&);    \
    template std::vector<double> weighted_mean_gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, Weights,      \
                                                                     const GradientOptions&, Summation);              \
    template std::vector<double> gradient_magnitude_percent_diff<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, \
                                                                    Weights, const GradientOptions&, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
