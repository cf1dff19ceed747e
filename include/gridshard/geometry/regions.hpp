#pragma once
/// @file
/// Regions of the globe as weights: a latitude-longitude box (the named bands of weather-model
/// benchmarks, or a user's box that may cross the date line) or a mask, applied to a rank's area weights.
/// Scores over a region are the metrics with these weights. No MPI calls.
///
/// @code
///   // lat_deg, lon_deg: the whole grid's coordinates; box: this rank's box; weights: its area weights.
///   gridshard::AreaWeights tropics_weights(gridshard::Weights weights, std::span<const double> lat_deg,
///                                          std::span<const double> lon_deg, const gridshard::Box& box) {
///       return gridshard::region_weights(weights, lat_deg, lon_deg, box, gridshard::parse_region("tropics").box);
///   }
/// @endcode

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <array>
#include <string_view>

#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/field_views.hpp"

namespace gridshard {

/// A latitude-longitude box, bounds included, in degrees: south <= lat <= north, and longitudes from `west`
/// eastward to `east` (west > east crosses the date line: 170,-170 is 20 degrees wide). Longitudes are
/// compared modulo 360. With `whole_longitude` every longitude is in.
struct LatLonBox {
    double south = -90.0;
    double north = 90.0;
    double west = 0.0;
    double east = 360.0;
    bool whole_longitude = true;
};

/// A named region: a box, or a mask read by the caller (`mask_file:variable`).
struct Region {
    std::string name;
    LatLonBox box;
    std::string mask_file;      ///< empty for a box
    std::string mask_variable;  ///< empty for a box
};

/// The named regions: "global", "tropics" (20S-20N), "northern_extratropics" (20N-90N) and
/// "southern_extratropics" (90S-20S), as WeatherBench 2 defines them.
[[nodiscard]] const std::vector<Region>& named_regions();

/// Parses a region: a name of named_regions(); `NAME:lat0,lat1,lon0,lon1` (degrees; lat0 <= lat1 in
/// [-90, 90]; lon0 to lon1 eastward, crossing the date line when lon0 > lon1); or `NAME:FILE:VARIABLE`, a
/// mask variable on the grid (weights times the mask; NaN counts as 0). Throws ArgumentError naming the
/// text and the problem.
[[nodiscard]] Region parse_region(std::string_view text);

/// True when (lat, lon) lies in `box`.
[[nodiscard]] bool in_box(const LatLonBox& box, double lat_deg, double lon_deg) noexcept;

/// The weights of `box_of_rank` for `region`'s box: `weights` (per row or per point) times 1 inside and 0
/// outside; per-row weights stay per row when the box spans every longitude. `lat_deg` and `lon_deg` are
/// the whole grid's coordinates. For a mask region use mask_weights.
[[nodiscard]] AreaWeights region_weights(Weights weights, std::span<const double> lat_deg,
                                         std::span<const double> lon_deg, const Box& box_of_rank,
                                         const LatLonBox& region);

/// ACE's Niño 3.4 box (fme's NINO34_LAT and NINO34_LON): 5S to 5N, 190E to 240E.
inline constexpr LatLonBox nino34_box{-5.0, 5.0, 190.0, 240.0, false};

/// ACE's IPO tripole boxes (fme's TPI_REGIONS): T1 25N-45N 140E-215E, T2 10S-10N 170E-270E, T3 50S-15S 150E-200E.
inline constexpr std::array<LatLonBox, 3> ipo_tripole_boxes{LatLonBox{25.0, 45.0, 140.0, 215.0, false},
                                                            LatLonBox{-10.0, 10.0, 170.0, 270.0, false},
                                                            LatLonBox{-50.0, -15.0, 150.0, 200.0, false}};

/// The variables ACE forms its IPO index of (fme's ipo_index DEFAULT_SST_NAMES).
inline constexpr std::array<std::string_view, 1> ace_ipo_names{"sst"};

/// The variables ACE forms its Niño 3.4 index of (fme's SEA_SURFACE_TEMPERATURE_NAMES).
inline constexpr std::array<std::string_view, 3> ace_sst_names{"sst", "surface_temperature", "TS"};

/// ACE's weights of a regional index (fme's LatLonRegion.regional_weights, which its regional means multiply into the
/// area weights): region_weights of `region` times cos(lat) once more, per point.
[[nodiscard]] AreaWeights ace_regional_weights(Weights weights, std::span<const double> lat_deg,
                                               std::span<const double> lon_deg, const Box& box_of_rank,
                                               const LatLonBox& region);

/// ACE's weights of its IPO tripole boxes on `box_of_rank` (fme's LatLonRegion.regional_weights, which its IPO means
/// take alone): each box times cos(lat), no area weights.
[[nodiscard]] std::array<AreaWeights, 3> ace_tripole_weights(std::span<const double> lat_deg,
                                                             std::span<const double> lon_deg, const Box& box_of_rank);

/// `weights` times `mask` (one value per point of the rank's box; NaN as 0). Throws ArgumentError for a
/// mask of the wrong size or a negative value.
[[nodiscard]] AreaWeights mask_weights(Weights weights, const Box& box_of_rank, std::span<const double> mask);

}  // namespace gridshard
