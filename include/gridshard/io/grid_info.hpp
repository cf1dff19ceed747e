#pragma once
/// @file
/// What a CF netCDF file says about its grid and its fields, as plain values. No MPI calls.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"

namespace gridshard::io {

/// The type values come out in: a variable's own float or double, or the type of its `scale_factor`
/// when it is packed (CF), so nothing read is rounded.
enum class ValueType { float32, float64 };

/// "float32" or "float64".
[[nodiscard]] std::string_view to_string(ValueType type) noexcept;

/// The horizontal grid and time axis of a file, as the file stores them.
struct GridInfo {
    std::string lat_dim;  ///< the latitude dimension (and its coordinate variable)
    std::string lon_dim;  ///< the longitude dimension (and its coordinate variable)
    std::vector<double> lat_deg;
    std::vector<double> lon_deg;
    std::vector<double> lat_bounds_deg;  ///< (nlat, 2) flattened; empty when the file has none
    std::vector<double> lon_bounds_deg;  ///< (nlon, 2) flattened; empty when the file has none
    std::string time_dim;                ///< empty when the file has no time dimension
    std::int64_t ntime = 1;              ///< the time dimension's length (may be 0), or 1 without one
    std::vector<double> time_values;     ///< the time coordinate; empty when there is none
    std::string time_units;              ///< e.g. "hours since 1979-01-01"; empty when unknown
    std::string time_calendar;           ///< e.g. "proleptic_gregorian"; empty when unknown

    /// {lat_deg.size(), lon_deg.size()}.
    [[nodiscard]] GridShape shape() const noexcept {
        return {static_cast<std::int64_t>(lat_deg.size()), static_cast<std::int64_t>(lon_deg.size())};
    }
};

/// True when `a` and `b` have the same numbers of latitudes and longitudes and every coordinate value
/// agrees within `tolerance_deg` (dimension names, bounds and time are not compared). No MPI calls.
[[nodiscard]] bool same_grid(const GridInfo& a, const GridInfo& b, double tolerance_deg = 1e-9) noexcept;

/// True for the names of a dim that numbers ensemble members or forecasts (initial conditions) rather than
/// channels: sample, member, ensemble, number, realization (any case, and their plurals), ens. Such dims
/// may come before a variable's time dim. No MPI calls.
[[nodiscard]] bool is_ensemble_dim_name(std::string_view name) noexcept;

/// The layout of a field variable: `[ensemble dims..., time,] channel dims..., lat, lon`, where the
/// ensemble dims are those of is_ensemble_dim_name (a dim of that name after time is a channel dim).
struct VariableShape {
    std::string name;
    std::vector<std::string> dim_names;  ///< in file order
    std::vector<std::int64_t> dim_sizes;
    std::optional<int> time_index;       ///< the position of the time dim (after ensemble dims only), or none
    std::int64_t ntime = 1;              ///< the time dim's length, or 1 without one
    std::int64_t channels_per_step = 1;  ///< product of the dims but time, lat and lon (1 if none)
    std::int64_t nlat = 0;
    std::int64_t nlon = 0;
    std::string units;                          ///< the `units` attribute; empty when absent
    ValueType value_type = ValueType::float32;  ///< the type its values are read in (see ValueType)
};

}  // namespace gridshard::io
