#pragma once
// The zonal means of a pair whose scores' pass has already summed some of its rows (metrics/evaluation.cpp): those
// rows' sums are handed over instead of formed again. Internal to the metrics layer.

#include <span>
#include <vector>

#include "fixed_point_rows.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard::detail {

/// zonal_means of {truth, prediction}, bit for bit, where each (channel, row) that `handed` marks formed (one per
/// (channel, row) of this rank's box, channel-major, or empty for none) takes both rows' sums from there instead of
/// reading them. Collective over `lon`, as zonal_means.
template <class T>
[[nodiscard]] std::vector<std::vector<double>> zonal_means_with_row_sums(const ShardedGrid& grid, FieldShard<T> truth,
                                                                         FieldShard<T> prediction, Summation summation,
                                                                         std::span<const RowValueSums> handed);

}  // namespace gridshard::detail
