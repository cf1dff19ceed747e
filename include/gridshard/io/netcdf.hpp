#pragma once
/// @file
/// CF-convention netCDF input (the grid of a file and hyperslabs of its fields) and the zonal-mean
/// output file. No MPI calls anywhere here: under MPI every rank opens the file itself and reads only
/// its own box, and one rank writes the output.
///
/// @code
///   gridshard::io::NetcdfReader truth("truth.nc");
///   const gridshard::io::GridInfo& grid = truth.grid();     // lat, lon (file order), time, bounds
///   const auto shape = truth.variable("t2m");               // dims, steps, channels per step
///   std::vector<float> mine = truth.read("t2m", {0, shape.ntime}, box);  // (steps, channels, rows, cols)
/// @endcode
///
/// Not thread-safe: the netCDF C library is not. Indices are always in file order; nothing is
/// reordered (latitude may run either way, longitude may start anywhere).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/split.hpp"

namespace gridshard::io {

/// A netCDF file cannot be read or written as asked: missing or unreadable, not netCDF, no latitude or
/// longitude coordinate, a missing or misshapen variable, a failed write. The one-line message names the
/// file and the problem, and carries netCDF's own message (nc_strerror) when a netCDF call failed.
class NetcdfError : public ArgumentError {
  public:
    /// `nc_status` is the netCDF return code that caused the error, or 0 (NC_NOERR) when none did.
    explicit NetcdfError(const std::string& what, int nc_status = 0) : ArgumentError(what), nc_status_(nc_status) {}
    /// The netCDF return code (0 when the error was not a failed netCDF call).
    [[nodiscard]] int nc_status() const noexcept { return nc_status_; }

  private:
    int nc_status_;
};

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

/// The layout of a field variable: `[time,] channel dims..., lat, lon`.
struct VariableShape {
    std::string name;
    std::vector<std::string> dim_names;  ///< in file order
    std::vector<std::int64_t> dim_sizes;
    std::optional<int> time_index;       ///< the position of the time dim (always 0), or none
    std::int64_t ntime = 1;              ///< the time dim's length, or 1 without one
    std::int64_t channels_per_step = 1;  ///< product of the dims between time and lat (1 if none)
    std::int64_t nlat = 0;
    std::int64_t nlon = 0;
};

/// An open netCDF file (nc_open in read-only mode, closed by the destructor); move-only.
/// The constructor finds the grid (see grid()); the other members read on demand. No MPI calls.
class NetcdfReader {
  public:
    /// Opens `path` and finds its grid. Latitude is the 1-D coordinate variable (a variable named as its
    /// dimension) with standard_name "latitude", else one with units degrees_north (or degree_north,
    /// degree_N, degrees_N, degreeN, degreesN), else one with axis "Y", else one named lat or latitude;
    /// axis and name count only if standard_name and units do not say otherwise (a rotated grid's
    /// grid_latitude, a projection's metres). Longitude likewise with "longitude", degrees_east, "X",
    /// lon or longitude. Two candidates at the same step are an error. Time is the dim of a coordinate
    /// with standard_name "time", else axis "T", else units "... since ...", else the unlimited dim,
    /// else a dim named time. Bounds come from the coordinates' "bounds" attributes. Throws NetcdfError
    /// when the file cannot be opened, is not netCDF, or has no usable latitude or longitude coordinate.
    explicit NetcdfReader(const std::string& path);
    ~NetcdfReader();
    NetcdfReader(NetcdfReader&& other) noexcept;
    NetcdfReader& operator=(NetcdfReader&& other) noexcept;
    NetcdfReader(const NetcdfReader&) = delete;
    NetcdfReader& operator=(const NetcdfReader&) = delete;

    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const GridInfo& grid() const noexcept { return grid_; }

    /// The numeric variables, other than coordinates, bounds and cell measures, that variable()
    /// accepts (last two dims lat and lon, time first if present), in file order.
    [[nodiscard]] std::vector<std::string> field_variables() const;

    /// The layout of variable `name`. Throws NetcdfError when it is missing, not numeric, its last two
    /// dims are not (lat, lon), or it has the time dim anywhere but first.
    [[nodiscard]] VariableShape variable(const std::string& name) const;

    /// Reads time steps `steps` (must be [0, 1) when the variable has no time dim), every channel,
    /// and the latitude rows `box.lat` and longitude columns `box.lon` (file index order) of
    /// variable `name`, and nothing else: a (steps, channels_per_step, rows, cols) row-major array.
    /// Values equal to `_FillValue` or `missing_value` (or, without a `_FillValue`, to netCDF's default
    /// fill for the type, except for bytes) become NaN; then `scale_factor` and `add_offset` are applied and
    /// `_Unsigned = "true"` is honoured, so packed byte and short variables come out unpacked. Other
    /// types are converted to float. Throws NetcdfError as variable() does, and ArgumentError when
    /// `steps` or `box` do not fit the variable.
    [[nodiscard]] std::vector<float> read(const std::string& name, const Range& steps, const Box& box) const;

  private:
    std::string path_;
    int ncid_ = -1;
    GridInfo grid_;
};

/// One variable of the zonal-mean file: (ntime, nlat) values, row-major, NaN where undefined.
struct ZonalVariable {
    std::string name;
    std::vector<double> values;
    std::string units{};      ///< written when not empty
    std::string long_name{};  ///< written when not empty
};

/// The global attributes of the zonal-mean file besides Conventions.
struct ZonalFileAttributes {
    std::string title = "gridshard zonal means";
    std::string history = "written by gridshard";  ///< e.g. the command line
};

/// Writes the zonal means as a CF-1.8 netCDF file (64-bit offset classic format): dims time
/// (unlimited) and the grid's latitude dim; the latitude coordinate with the grid's values and bounds;
/// a time coordinate with `time_values` (or, when not given, the grid's time values, which must then
/// number `ntime`) and the grid's units and calendar, or no time coordinate when there are no values;
/// one float64 (time, lat) variable per entry with `_FillValue` 9.96920996838687e+36 written wherever
/// the value is NaN, and cell_methods "longitude: mean". The file is written under a temporary name in
/// the same folder and renamed to `path` only once complete; on any error the temporary is removed and
/// `path` is left as it was. Throws ArgumentError for sizes that do not match and NetcdfError when
/// netCDF or the file system fails. No MPI calls: call it on one rank.
void write_zonal_means(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes = {},
                       const std::optional<std::vector<double>>& time_values = std::nullopt);

}  // namespace gridshard::io
