// The gradient metrics: one-cell halo exchange, the torch.gradient stencil, NaN-aware weighted means.

#include "gridshard/metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// Exchanges the one-cell halos of `fields` (all shaped like the first) for the gradient stencil.
// Collective over `spatial`; a shard of the wrong size raises on every rank inside the exchange.
template <class T>
HaloBuffers<T> exchange_for_gradient(const ShardedGrid& grid, std::span<const std::span<const T>> fields,
                                     std::int64_t channels, const GradientOptions& options) {
    detail::check_gradient_grid(grid.grid());
    const HaloExchange& plan = grid.halo_plan(options.periodic_lon);
    auto halo = plan.make_buffers<T>(std::max<std::int64_t>(channels, 0) * static_cast<std::int64_t>(fields.size()));
    plan.execute(fields, halo);
    return halo;
}

std::string latitude_error(const ShardedGrid& grid, const GradientOptions& options) {
    return detail::gradient_options_error(options, grid.box().lat.size());
}

}  // namespace

template <class T>
std::vector<double> gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, const GradientOptions& options) {
    const Box& box = grid.box();
    const std::span<const T> fields[] = {x.values};
    check_arguments(grid, first_error({detail::shard_error(x, box, "x"), latitude_error(grid, options)}), x.channels);
    const auto halo = exchange_for_gradient<T>(grid, fields, x.channels, options);
    std::vector<double> result(static_cast<std::size_t>(x.channels * box.area()));
    detail::GradientRows<T> rows(grid.grid(), box, options, x.values, x.channels, halo, 0);
    for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
        rows.row(c, i, result.data() + (c * box.lat.size() + i) * box.lon.size());
    });
    return result;
}

template <class T>
std::vector<double> weighted_mean_gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                     const GradientOptions& options, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums =
        start_weighted(grid, weights, first_error({detail::shard_error(x, box, "x"), latitude_error(grid, options)}),
                       x.channels, 2, summation);
    const std::span<const T> fields[] = {x.values};
    const auto halo = exchange_for_gradient<T>(grid, fields, x.channels, options);
    {
        Scratch scratch(box.lon.size(), 3);
        detail::GradientRows<T> rows(grid.grid(), box, options, x.values, x.channels, halo, 0);
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 0, 2), slot(c, 1, 2), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    return nan_means_of(sums, x.channels);
}

template <class T>
std::vector<double> gradient_magnitude_percent_diff(const ShardedGrid& grid, FieldShard<T> truth,
                                                    FieldShard<T> prediction, Weights a, const GradientOptions& options,
                                                    Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums =
        start_weighted(grid, weights, first_error({pair_error(truth, prediction, box), latitude_error(grid, options)}),
                       channels, 4, summation);
    const std::span<const T> fields[] = {truth.values, prediction.values};
    const auto halo = exchange_for_gradient<T>(grid, fields, channels, options);  // one exchange, both fields
    {
        Scratch scratch(box.lon.size(), 3);
        detail::GradientRows<T> truth_rows(grid.grid(), box, options, truth.values, channels, halo, 0);
        detail::GradientRows<T> prediction_rows(grid.grid(), box, options, prediction.values, channels, halo, 1);
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            truth_rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 0, 4), slot(c, 1, 4), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
            prediction_rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 2, 4), slot(c, 3, 4), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        const double g_truth = sums.ratio(slot(c, 0, 4), slot(c, 1, 4));
        const double g_prediction = sums.ratio(slot(c, 2, 4), slot(c, 3, 4));
        result[static_cast<std::size_t>(c)] = 100.0 * (g_prediction - g_truth) / g_truth;
    }
    return result;
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
