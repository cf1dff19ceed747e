#pragma once
// What the metric families share: the slot layout of their partial sums, the collective argument check,
// the start and merge of every weighted metric, and row access. Internal to the metrics layer.

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/field.hpp"
#include "row_kernels.hpp"

namespace gridshard::detail {

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();
inline constexpr std::int64_t total_weight_slot = 0;  // every weighted metric checks sum(a) > 0 with it

// Slot of term `term` of channel `c` when each channel has `terms` sums after the total-weight slot.
constexpr std::int64_t slot(std::int64_t c, std::int64_t term, std::int64_t terms) {
    return 1 + c * terms + term;
}

// The first non-empty message, so a metric reports the first thing wrong with its arguments.
inline std::string first_error(std::initializer_list<std::string> errors) {
    for (const std::string& e : errors) {
        if (!e.empty()) {
            return e;
        }
    }
    return {};
}

template <class T>
std::string pair_error(const FieldShard<T>& truth, const FieldShard<T>& prediction, const Box& box) {
    if (truth.channels != prediction.channels || truth.values.size() != prediction.values.size()) {
        return "truth (" + std::to_string(truth.values.size()) + " values, " + std::to_string(truth.channels) +
               " channels) and prediction (" + std::to_string(prediction.values.size()) + " values, " +
               std::to_string(prediction.channels) + " channels) must have the same shape";
    }
    return first_error({shard_error(truth, box, "truth"), shard_error(prediction, box, "prediction")});
}

// Collective over `spatial`: raises `local_error` (or a channel count that differs between ranks) on
// every rank alike, before any partial sums are formed.
inline void check_arguments(const ShardedGrid& grid, const std::string& local_error, std::int64_t channels) {
    agree_or_throw(grid.mesh().spatial(), local_error, {channels}, "channels");
}

// The start every weighted metric shares: `error` and the weights' own error raised on every rank of
// the spatial group alike, then `terms` sums per channel after the total-weight slot, which is filled.
inline PartialSums start_weighted(const ShardedGrid& grid, const RowWeights& weights, const std::string& error,
                                  std::int64_t channels, std::int64_t terms, Summation summation) {
    check_arguments(grid, first_error({error, weights.error()}), channels);
    PartialSums sums(1 + terms * channels, summation);
    weights.add_total(sums, total_weight_slot);
    return sums;
}

// Merges `sums` over the spatial group and checks the total weight, which every rank sees alike.
inline void merge_weighted(PartialSums& sums, const ShardedGrid& grid) {
    sums.allreduce(grid.mesh().spatial());
    const double total = sums.value(total_weight_slot);
    if (!(total > 0.0)) {
        throw ArgumentError("the total weight over the grid must be > 0, got " + std::to_string(total));
    }
}

template <class T>
const T* row_of(const FieldShard<T>& x, const Box& box, std::int64_t c, std::int64_t i) {
    return x.values.data() + (c * box.lat.size() + i) * box.lon.size();
}

// Per channel: slot 0 = sum(a*x), slot 1 = sum over valid a*x... as the caller lays out; this visits
// every (channel, row) of a shard with a weights check folded into the local error.
template <class F>
void for_each_row(const Box& box, std::int64_t channels, F&& f) {
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            f(c, i);
        }
    }
}

// sum(a*x) and sum(a) per channel: the shared core of weighted_sum and weighted_mean.
template <class T>
PartialSums weighted_sums(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation,
                          const std::string& extra_error = {}) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums =
        start_weighted(grid, weights, first_error({extra_error, shard_error(x, box, "x")}), x.channels, 1, summation);
    {
        Scratch scratch(box.lon.size(), 1);
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            add_weighted_row(sums, slot(c, 0, 1), row_of(x, box, c, i), box.lon.size(), weights, i, scratch[0]);
        });
    }
    merge_weighted(sums, grid);
    return sums;
}

// sum(a*x) / sum(a) per channel from weighted_sums.
inline std::vector<double> means_of(const PartialSums& sums, std::int64_t channels) {
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.ratio(slot(c, 0, 1), total_weight_slot);
    }
    return result;
}

// sum over valid points of a*x / their weight per channel (terms 0 and 1 of two); NaN where none is valid.
inline std::vector<double> nan_means_of(const PartialSums& sums, std::int64_t channels) {
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.ratio(slot(c, 0, 2), slot(c, 1, 2));
    }
    return result;
}

}  // namespace gridshard::detail
