#pragma once
// CF grid and axis discovery: which coordinates are latitude, longitude and time, and which variables are
// fields on that grid. Internal to the io layer. No MPI calls.

#include <string>
#include <vector>

#include "gridshard/io/grid_info.hpp"
#include "netcdf_handle.hpp"

namespace gridshard::io::detail {

/// The grid of `file`. Latitude is the 1-D coordinate variable (a variable named as its dimension) with
/// standard_name "latitude", else one with units degrees_north (or degree_north, degree_N, degrees_N,
/// degreeN, degreesN), else one with axis "Y", else one named lat or latitude; axis and name count only
/// if standard_name and units do not say otherwise (a rotated grid's grid_latitude, a projection's
/// metres). Longitude likewise with "longitude", degrees_east, "X", lon or longitude. Two candidates at
/// the same step are an error, and so is a coordinate found by axis or name alone in a file that has a
/// 2-D latitude or longitude variable (a curvilinear grid). Time is the dim of a coordinate with
/// standard_name "time", else axis "T", else units "... since ...", else the unlimited dim, else a dim
/// named time. Bounds come from the coordinates' "bounds" attributes. Throws NetcdfError.
[[nodiscard]] GridInfo find_grid(const NetcdfHandle& file);

/// The layout and units of variable `varid` in `shape`, and "" when it is a field on `grid`; otherwise
/// the reason it is not ("has dims (x, y), which do not end in (lat, lon)").
[[nodiscard]] std::string describe(const NetcdfHandle& file, const GridInfo& grid, int varid, VariableShape& shape);

/// The 2-D latitude or longitude that variable `varid`'s `coordinates` attribute names, as "'lat' (y, x)",
/// or "" when it names none.
[[nodiscard]] std::string curvilinear_coordinate(const NetcdfHandle& file, int varid);

/// The variables that other variables name as their bounds, climatology, cell measures or coordinates:
/// never fields themselves.
[[nodiscard]] std::vector<std::string> auxiliary_variables(const NetcdfHandle& file);

}  // namespace gridshard::io::detail
