// The weighted metrics (docs/design.md §3): sums, means, the NaN-aware mean, std, bias, rmse, regional means.

#include "gridshard/metrics/metrics.hpp"

#include <cmath>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

template <class T>
std::vector<double> weighted_sum(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const PartialSums sums = weighted_sums(grid, x, a, summation);
    std::vector<double> result(static_cast<std::size_t>(x.channels));
    for (std::int64_t c = 0; c < x.channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.value(slot(c, 0, 1));
    }
    return result;
}

template <class T>
std::vector<double> weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return means_of(weighted_sums(grid, x, a, summation), x.channels);
}

template <class T>
std::vector<double> regional_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                           std::span<const double> region, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    std::string error = weights.error();
    if (error.empty() && static_cast<std::int64_t>(region.size()) != box.area()) {
        error = "region has " + std::to_string(region.size()) + " values but this rank's box has " +
                std::to_string(box.area()) + " points";
    }
    for (std::size_t k = 0; error.empty() && k < region.size(); ++k) {
        if (!std::isfinite(region[k]) || region[k] < 0.0) {
            error = "region values must be finite and non-negative, got " + std::to_string(region[k]);
        }
    }
    std::vector<double> combined;
    if (error.empty()) {
        combined.resize(region.size());
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            for (std::int64_t j = 0; j < box.lon.size(); ++j) {
                const double w = weights.per_point() ? weights.points(i)[j] : weights.row(i);
                const auto k = static_cast<std::size_t>(i * box.lon.size() + j);
                combined[k] = w * region[k];
            }
        }
    } else {
        combined.assign(static_cast<std::size_t>(box.area()), 0.0);  // unused: the check below raises
    }
    return means_of(weighted_sums(grid, x, Weights{combined, true}, summation, error), x.channels);
}

template <class T>
std::vector<double> weighted_nanmean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums = start_weighted(grid, weights, detail::shard_error(x, box, "x"), x.channels, 2, summation);
    {
        Scratch scratch(box.lon.size());
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            detail::add_valid_row(sums, slot(c, 0, 2), slot(c, 1, 2), row_of(x, box, c, i), box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    return nan_means_of(sums, x.channels);
}

template <class T>
std::vector<double> weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums = start_weighted(grid, weights, detail::shard_error(x, box, "x"), x.channels, 2, summation);
    {
        Scratch scratch(box.lon.size());
        const std::int64_t cols = box.lon.size();
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            const T* row = row_of(x, box, c, i);
            double* squares = scratch[0];
            for (std::int64_t j = 0; j < cols; ++j) {
                squares[j] = static_cast<double>(row[j]) * static_cast<double>(row[j]);
            }
            detail::add_weighted_row(sums, slot(c, 0, 2), row, cols, weights, i, scratch[1]);
            detail::add_weighted_row(sums, slot(c, 1, 2), squares, cols, weights, i, scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    const DoubleDouble total = sums.value_dd(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(x.channels));
    for (std::int64_t c = 0; c < x.channels; ++c) {
        result[static_cast<std::size_t>(c)] =
            dd::population_std(total, sums.value_dd(slot(c, 0, 2)), sums.value_dd(slot(c, 1, 2)));
    }
    return result;
}

template <class T>
std::vector<double> bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums = start_weighted(grid, weights, pair_error(truth, prediction, box), channels, 2, summation);
    {
        Scratch scratch(box.lon.size(), 1);
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            detail::add_weighted_row(sums, slot(c, 0, 2), row_of(truth, box, c, i), box.lon.size(), weights, i,
                                     scratch[0]);
            detail::add_weighted_row(sums, slot(c, 1, 2), row_of(prediction, box, c, i), box.lon.size(), weights, i,
                                     scratch[0]);
        });
    }
    merge_weighted(sums, grid);
    const double total = sums.value(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.difference(slot(c, 1, 2), slot(c, 0, 2)) / total;
    }
    return result;
}

template <class T>
std::vector<double> rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums = start_weighted(grid, weights, pair_error(truth, prediction, box), channels, 1, summation);
    {
        Scratch scratch(box.lon.size());
        const std::int64_t cols = box.lon.size();
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            const T* t = row_of(truth, box, c, i);
            const T* p = row_of(prediction, box, c, i);
            double* squares = scratch[0];
            for (std::int64_t j = 0; j < cols; ++j) {
                const double d = static_cast<double>(p[j]) - static_cast<double>(t[j]);
                squares[j] = d * d;
            }
            detail::add_weighted_row(sums, slot(c, 0, 1), squares, cols, weights, i, scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    const DoubleDouble total = sums.value_dd(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = std::sqrt(dd::divide(sums.value_dd(slot(c, 0, 1)), total).hi);
    }
    return result;
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                \
    template std::vector<double> weighted_sum<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);        \
    template std::vector<double> weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);       \
    template std::vector<double> weighted_nanmean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);    \
    template std::vector<double> weighted_std<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);        \
    template std::vector<double> bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation); \
    template std::vector<double> rmse<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation); \
    template std::vector<double> regional_weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights,          \
                                                           std::span<const double>, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
