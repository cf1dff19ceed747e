#pragma once
/// @file
/// Area weights for a rank's own box, computed without building the global array. No MPI calls.

#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// cos(latitude) per row of `rows`, normalised so the weights of the whole `lat_deg.size() x nlon` grid
/// sum to 1: ACE's `spherical_area_weights`. `lat_deg` holds every latitude of the grid (a 1-D array
/// every rank has). Latitudes of exactly +-90 get weight 0 (cos of the rounded radian value is 6e-17).
/// Throws ArgumentError for latitudes outside [-90, 90] or not finite. Per-row weights.
[[nodiscard]] AreaWeights cos_lat_weights(std::span<const double> lat_deg, std::int64_t nlon, const Range& rows);

/// Exact spherical cell areas `(sin(lat_north) - sin(lat_south)) * (lon_east - lon_west)` of the cells of
/// `box`, normalised to sum 1 over the grid: what CDO's fldmean uses. Bounds are `(n, 2)` arrays in
/// degrees. Per-row weights when every cell is equally wide in longitude, else per point.
[[nodiscard]] AreaWeights cell_area_weights(std::span<const double> lat_bounds_deg,
                                            std::span<const double> lon_bounds_deg, const Box& box);

/// Cell bounds `(n, 2)` from cell centres: halfway between neighbours, the outer ones mirrored and, for
/// latitudes, clamped to +-90 (what CDO does for a file without bounds).
[[nodiscard]] std::vector<double> bounds_from_centres(std::span<const double> centres_deg, bool clamp_to_poles);

}  // namespace gridshard
