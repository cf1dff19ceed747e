#pragma once
/// @file
/// The plain views the metrics take: a rank's shard of a field and its area weights. Pure data: no MPI,
/// nothing beyond the standard library and the geometry of boxes.

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {

/// The value types the metrics take: float and double. Anything else (an integer field, a long double)
/// fails to compile, since no FieldShard of it can be formed.
template <class T>
concept FieldValue = std::same_as<T, float> || std::same_as<T, double>;

/// A rank's shard of a field: `channels` planes of the rank's box, `(channels, rows, cols)`, longitude
/// fastest. Leading dims (batch, time, level) are flattened into channels. Non-owning.
template <FieldValue T>
struct FieldShard {
    std::span<const T> values;
    std::int64_t channels = 1;
};

/// Area weights for a rank's box, non-owning: one weight per row of the box (a field of shape
/// (nlat, 1) broadcast over longitude) or one per point `(rows, cols)`. Weights must be finite and
/// non-negative, and their total over the grid positive.
struct Weights {
    std::span<const double> values;
    bool per_point = false;
};

/// Owning area weights for a rank's box.
struct AreaWeights {
    std::vector<double> values;
    bool per_point = false;
    [[nodiscard]] Weights view() const noexcept { return {values, per_point}; }
};

/// The slice of global weights of shape (nlat) (per row) or (nlat, nlon) (per point) that `box` covers.
/// No MPI calls.
[[nodiscard]] AreaWeights slice_weights(std::span<const double> global, const GridShape& grid, const Box& box);

}  // namespace gridshard
