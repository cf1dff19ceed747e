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
GradientMagnitudeMeans gradient_magnitude_means(const ShardedGrid& grid, FieldShard<T> truth,
                                                const FieldShard<T>* prediction, Weights a,
                                                const GradientOptions& options, Summation summation) {
    // ACE's definition: each field's magnitudes averaged over that field's own non-NaN points.
    const ValidityPolicy policy = ValidityPolicy::skip_nan;
    const TermSet terms = prediction != nullptr
                              ? weight_and(policy, {Term::truth_own_gradient, Term::prediction_own_gradient})
                              : weight_and(policy, {Term::truth_gradient});
    const TermSums sums = accumulate_terms<T>(grid, truth, prediction, a, {terms, policy, summation}, &options);
    const std::int64_t fields = prediction != nullptr ? 2 : 1;
    const GradientPoints points = prediction != nullptr ? GradientPoints::own : GradientPoints::common;
    GradientMagnitudeMeans means;
    for (std::int64_t field = 0; field < fields; ++field) {
        const bool of_prediction = field == 1;
        const Term weight = prediction == nullptr ? Term::gradient_weight
                            : of_prediction       ? Term::prediction_own_gradient_weight
                                                  : Term::truth_own_gradient_weight;
        for (std::int64_t c = 0; c < sums.groups(); ++c) {
            means.mean.push_back(sums.gradient_mean(c, of_prediction, points));
            means.weight.push_back(sums.value(c, weight).hi);
        }
    }
    return means;
}

template <class T>
std::vector<double> weighted_mean_gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                     const GradientOptions& options, Summation summation) {
    return gradient_magnitude_means<T>(grid, x, nullptr, a, options, summation).mean;
}

template <class T>
std::vector<double> gradient_magnitude_percent_diff(const ShardedGrid& grid, FieldShard<T> truth,
                                                    FieldShard<T> prediction, Weights a, const GradientOptions& options,
                                                    Summation summation) {
    const GradientMagnitudeMeans means = gradient_magnitude_means<T>(grid, truth, &prediction, a, options, summation);
    const std::size_t channels = means.mean.size() / 2;
    std::vector<double> result(channels);
    for (std::size_t c = 0; c < channels; ++c) {
        result[c] = percent_difference(means.mean[c], means.mean[channels + c]);
    }
    return result;
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                      \
    template GradientMagnitudeMeans gradient_magnitude_means<T>(                                                      \
        const ShardedGrid&, FieldShard<T>, const FieldShard<T>*, Weights, const GradientOptions&, Summation);         \
    template std::vector<double> gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, const GradientOptions&);    \
    template std::vector<double> weighted_mean_gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, Weights,      \
                                                                     const GradientOptions&, Summation);              \
    template std::vector<double> gradient_magnitude_percent_diff<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, \
                                                                    Weights, const GradientOptions&, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
