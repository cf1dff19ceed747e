#pragma once
/// @file
/// Area weights for a rank's own box, computed without building the global array. No MPI calls.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/field_views.hpp"

namespace gridshard {

/// Which area weights: cos(latitude) (ACE's spherical_area_weights) or the cells' spherical areas.
enum class AreaWeighting { cos_lat, cell_area };

/// "cos_lat" or "cell_area".
[[nodiscard]] std::string_view to_string(AreaWeighting weighting) noexcept;
/// Parses "cos_lat" or "cell_area"; throws ArgumentError naming the value otherwise.
[[nodiscard]] AreaWeighting parse_area_weighting(std::string_view text);

/// cos(latitude) per row of `rows`, normalised so the weights of the whole `lat_deg.size() x nlon` grid
/// sum to 1: ACE's `spherical_area_weights`. `lat_deg` holds every latitude of the grid (a 1-D array
/// every rank has). Latitudes of exactly +-90 get weight 0 (cos of the rounded radian value is 6e-17).
/// Throws ArgumentError for latitudes outside [-90, 90] or not finite. Per-row weights.
[[nodiscard]] AreaWeights cos_lat_weights(std::span<const double> lat_deg, std::int64_t nlon, const Range& rows);

/// Spherical cell areas of the cells of `box`, normalised to sum 1 over the grid, as CDO's fldmean
/// computes them: each cell is the spherical quadrilateral whose corners are its bounds' corners,
/// joined by great-circle arcs (so it differs from the latitude-band area R^2 dlon (sin n - sin s) by
/// up to 2e-4 on a 2-degree grid). Bounds are `(n, 2)` arrays in degrees. Per-row weights when every
/// cell is equally wide in longitude, else per point.
[[nodiscard]] AreaWeights cell_area_weights(std::span<const double> lat_bounds_deg,
                                            std::span<const double> lon_bounds_deg, const Box& box);

/// The area, in steradians, of the spherical quadrilateral with corners at the given latitudes and
/// longitudes (degrees) joined by great-circle arcs.
[[nodiscard]] double spherical_cell_area(double south_deg, double north_deg, double west_deg, double east_deg);

/// Cell bounds `(n, 2)` from cell centres: halfway between neighbours, the outer ones mirrored and, for
/// latitudes, clamped to +-90 (what CDO does for a file without bounds).
[[nodiscard]] std::vector<double> bounds_from_centres(std::span<const double> centres_deg, bool clamp_to_poles);

}  // namespace gridshard
