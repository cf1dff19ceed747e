#include "cf_grid.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <sstream>
#include <string_view>

namespace gridshard::io::detail {
namespace {

// A 1-D coordinate variable: a variable named as its only dimension.
struct Coordinate {
    int dimid = -1;
    int varid = -1;
    std::string name;
    std::string standard_name;
    std::string units;
    std::string axis;
};

std::vector<Coordinate> coordinates(const NetcdfHandle& file) {
    std::vector<Coordinate> out;
    for (const int dimid : file.dim_ids()) {
        const std::string name = file.dim_name(dimid);
        const auto varid = file.find_var(name);
        if (!varid || !is_numeric(file.var_type(*varid)) || file.var_dims(*varid) != std::vector<int>{dimid}) {
            continue;
        }
        out.push_back({dimid, *varid, name, file.text_attribute(*varid, "standard_name").value_or(""),
                       file.text_attribute(*varid, "units").value_or(""),
                       file.text_attribute(*varid, "axis").value_or("")});
    }
    return out;
}

bool one_of(const std::string& text, std::initializer_list<std::string_view> choices) {
    return std::find(choices.begin(), choices.end(), text) != choices.end();
}

struct AxisRules {
    std::string_view what;  // "latitude" or "longitude": also its standard_name
    std::initializer_list<std::string_view> units;
    std::string_view axis;
    std::initializer_list<std::string_view> names;
};

// The weaker hints (axis, name) do not count for a coordinate whose standard_name or units say it is
// something else: a rotated grid's grid_latitude, a projection's y in metres.
bool not_other(const Coordinate& c, const AxisRules& r) {
    return (c.standard_name.empty() || c.standard_name == r.what) &&
           (c.units.empty() || c.units.rfind("degree", 0) == 0);
}

// The one coordinate that `matches`, or nothing; two are an error.
template <class Match>
std::optional<Coordinate> only_match(const NetcdfHandle& file, const std::vector<Coordinate>& coords,
                                     std::string_view what, Match matches) {
    std::vector<const Coordinate*> found;
    for (const Coordinate& c : coords) {
        if (matches(c)) {
            found.push_back(&c);
        }
    }
    if (found.size() > 1) {
        fail(file.path(), "ambiguous " + std::string(what) + " coordinate: '" + found[0]->name + "' and '" +
                              found[1]->name + "' both qualify");
    }
    return found.empty() ? std::nullopt : std::optional<Coordinate>(*found.front());
}

// The coordinate the first rule that matches anything picks.
std::optional<Coordinate> find_axis(const NetcdfHandle& file, const std::vector<Coordinate>& coords,
                                    const AxisRules& rules) {
    using Rule = bool (*)(const Coordinate&, const AxisRules&);
    const Rule steps[] = {
        [](const Coordinate& c, const AxisRules& r) { return c.standard_name == r.what; },
        [](const Coordinate& c, const AxisRules& r) { return one_of(c.units, r.units); },
        [](const Coordinate& c, const AxisRules& r) { return not_other(c, r) && lower(c.axis) == lower(r.axis); },
        [](const Coordinate& c, const AxisRules& r) { return not_other(c, r) && one_of(lower(c.name), r.names); },
    };
    for (const Rule rule : steps) {
        if (auto found = only_match(file, coords, rules.what, [&](const Coordinate& c) { return rule(c, rules); })) {
            return found;
        }
    }
    return std::nullopt;
}

// The (n, 2) bounds named by the coordinate's "bounds" attribute, or nothing.
std::vector<double> read_bounds(const NetcdfHandle& file, const Coordinate& coord, std::int64_t n) {
    const auto bounds_name = file.text_attribute(coord.varid, "bounds");
    if (!bounds_name || bounds_name->empty()) {
        return {};
    }
    const auto varid = file.find_var(*bounds_name);
    if (!varid) {
        fail(file.path(), "bounds variable '" + *bounds_name + "' named by '" + coord.name + "' not found");
    }
    const auto dims = file.var_dims(*varid);
    if (dims.size() != 2 || dims[0] != coord.dimid || file.dim_length(dims[1]) != 2 ||
        !is_numeric(file.var_type(*varid))) {
        fail(file.path(), "bounds variable '" + *bounds_name + "' of '" + coord.name + "' is not a numeric (" +
                              coord.name + ", 2) array");
    }
    return file.read_all(*varid, static_cast<std::size_t>(2 * n));
}

const AxisRules latitude_rules{"latitude",
                               {"degrees_north", "degree_north", "degree_N", "degrees_N", "degreeN", "degreesN"},
                               "Y",
                               {"lat", "latitude"}};
const AxisRules longitude_rules{"longitude",
                                {"degrees_east", "degree_east", "degree_E", "degrees_E", "degreeE", "degreesE"},
                                "X",
                                {"lon", "longitude"}};

// Whether a variable says by its standard_name or units that it holds latitudes (or longitudes).
bool says_it_is(const NetcdfHandle& file, int varid, const AxisRules& rules) {
    return file.text_attribute(varid, "standard_name").value_or("") == rules.what ||
           one_of(file.text_attribute(varid, "units").value_or(""), rules.units);
}

// "'lat2d' (y, x)": a variable with its dims, for messages.
std::string with_dims(const NetcdfHandle& file, int varid) {
    std::string text = "'";
    text += file.var_name(varid);
    text += "' (";
    const auto dims = file.var_dims(varid);
    for (std::size_t k = 0; k < dims.size(); ++k) {
        text += k > 0 ? ", " : "";
        text += file.dim_name(dims[k]);
    }
    return text + ")";
}

// The first variable of two or more dims that holds latitudes or longitudes (a curvilinear grid), or none.
std::optional<int> multidimensional_coordinate(const NetcdfHandle& file) {
    const int nvars = file.nvars();
    for (int varid = 0; varid < nvars; ++varid) {
        if (file.var_dims(varid).size() >= 2 &&
            (says_it_is(file, varid, latitude_rules) || says_it_is(file, varid, longitude_rules))) {
            return varid;
        }
    }
    return std::nullopt;
}

}  // namespace

GridInfo find_grid(const NetcdfHandle& file) {
    const auto coords = coordinates(file);
    const auto lat = find_axis(file, coords, latitude_rules);
    if (!lat) {
        fail(file.path(),
             "no latitude coordinate (a 1-D variable named as its dim, with standard_name latitude, "
             "units degrees_north, axis Y, or named lat or latitude)");
    }
    const auto lon = find_axis(file, coords, longitude_rules);
    if (!lon) {
        fail(file.path(),
             "no longitude coordinate (a 1-D variable named as its dim, with standard_name longitude, "
             "units degrees_east, axis X, or named lon or longitude)");
    }
    if (lat->dimid == lon->dimid) {
        fail(file.path(), "'" + lat->name + "' qualifies as both latitude and longitude");
    }
    // Index coordinates (axis Y/X, no degrees) beside 2-D latitudes or longitudes: a curvilinear grid,
    // whose indices must not be taken for degrees.
    const auto is_strong = [](const Coordinate& c, const AxisRules& r) {
        return c.standard_name == r.what || one_of(c.units, r.units);
    };
    if (!is_strong(*lat, latitude_rules) || !is_strong(*lon, longitude_rules)) {
        if (const auto curvilinear = multidimensional_coordinate(file)) {
            fail(file.path(), "has the 2-D coordinate " + with_dims(file, *curvilinear) +
                                  ": a curvilinear grid, which is not supported (its 1-D '" + lat->name + "' and '" +
                                  lon->name + "' are not latitudes and longitudes in degrees)");
        }
    }

    GridInfo grid;
    grid.lat_dim = lat->name;
    grid.lon_dim = lon->name;
    const std::int64_t nlat = file.dim_length(lat->dimid);
    const std::int64_t nlon = file.dim_length(lon->dimid);
    if (nlat < 1 || nlon < 1) {
        fail(file.path(), "empty grid: " + lat->name + " has " + std::to_string(nlat) + " points, " + lon->name +
                              " has " + std::to_string(nlon));
    }
    grid.lat_deg = file.read_all(lat->varid, static_cast<std::size_t>(nlat));
    grid.lon_deg = file.read_all(lon->varid, static_cast<std::size_t>(nlon));
    for (std::size_t i = 0; i < grid.lat_deg.size(); ++i) {
        const double v = grid.lat_deg[i];
        if (!std::isfinite(v) || std::abs(v) > 90.0) {
            fail(file.path(), "latitude '" + lat->name + "'[" + std::to_string(i) + "] = " + std::to_string(v) +
                                  " is not in [-90, 90]");
        }
        if (i >= 2 && (v - grid.lat_deg[i - 1]) * (grid.lat_deg[i - 1] - grid.lat_deg[i - 2]) <= 0.0) {
            fail(file.path(), "latitude '" + lat->name + "' is not strictly monotonic at index " + std::to_string(i));
        }
    }
    if (nlat == 2 && grid.lat_deg[0] == grid.lat_deg[1]) {
        fail(file.path(), "latitude '" + lat->name + "' is not strictly monotonic at index 1");
    }
    for (std::size_t j = 0; j < grid.lon_deg.size(); ++j) {
        if (!std::isfinite(grid.lon_deg[j])) {
            fail(file.path(), "longitude '" + lon->name + "'[" + std::to_string(j) + "] is not finite");
        }
    }
    grid.lat_bounds_deg = read_bounds(file, *lat, nlat);
    grid.lon_bounds_deg = read_bounds(file, *lon, nlon);

    // Time: a coordinate that says so, else the unlimited dim, else a dim named time. An ensemble dim is never
    // the time: netCDF makes a dim of length 0 unlimited, so an empty sample or member dim is one too.
    std::vector<Coordinate> time_candidates;
    for (const Coordinate& c : coords) {
        if (c.dimid != lat->dimid && c.dimid != lon->dimid) {
            time_candidates.push_back(c);
        }
    }
    using Rule = bool (*)(const Coordinate&);
    const Rule time_rules[] = {
        [](const Coordinate& c) { return c.standard_name == "time"; },
        [](const Coordinate& c) { return lower(c.axis) == "t"; },
        [](const Coordinate& c) { return c.units.find(" since ") != std::string::npos; },
    };
    std::optional<Coordinate> time;
    for (const Rule rule : time_rules) {
        if ((time = only_match(file, time_candidates, "time", rule))) {
            break;
        }
    }
    std::optional<int> time_dimid;
    if (time) {
        time_dimid = time->dimid;
    } else {
        int nunlimited = 0;
        check(nc_inq_unlimdims(file.ncid(), &nunlimited, nullptr), file.path(), "listing unlimited dimensions");
        std::vector<int> unlimited(static_cast<std::size_t>(nunlimited));
        check(nc_inq_unlimdims(file.ncid(), &nunlimited, unlimited.data()), file.path(),
              "listing unlimited dimensions");
        for (const int dimid : unlimited) {
            if (dimid != lat->dimid && dimid != lon->dimid && !is_ensemble_dim_name(file.dim_name(dimid))) {
                time_dimid = dimid;
                break;
            }
        }
        if (!time_dimid) {
            for (const int dimid : file.dim_ids()) {
                if (lower(file.dim_name(dimid)) == "time" && dimid != lat->dimid && dimid != lon->dimid) {
                    time_dimid = dimid;
                }
            }
        }
        if (time_dimid) {
            for (const Coordinate& c : time_candidates) {
                if (c.dimid == *time_dimid) {
                    time = c;
                }
            }
        }
    }
    if (time_dimid) {
        grid.time_dim = file.dim_name(*time_dimid);
        grid.ntime = file.dim_length(*time_dimid);
        if (time) {
            grid.time_values = file.read_all(time->varid, static_cast<std::size_t>(grid.ntime));
            grid.time_units = time->units;
            grid.time_calendar = file.text_attribute(time->varid, "calendar").value_or("");
        }
    }
    return grid;
}

namespace {

struct DimIds {
    int lat = -1;
    int lon = -1;
    std::optional<int> time;
};

DimIds grid_dim_ids(const NetcdfHandle& file, const GridInfo& grid) {
    DimIds ids;
    check(nc_inq_dimid(file.ncid(), grid.lat_dim.c_str(), &ids.lat), file.path(), "looking up the latitude dim");
    check(nc_inq_dimid(file.ncid(), grid.lon_dim.c_str(), &ids.lon), file.path(), "looking up the longitude dim");
    if (!grid.time_dim.empty()) {
        int id = -1;
        check(nc_inq_dimid(file.ncid(), grid.time_dim.c_str(), &id), file.path(), "looking up the time dim");
        ids.time = id;
    }
    return ids;
}

}  // namespace

std::string curvilinear_coordinate(const NetcdfHandle& file, int varid) {
    std::istringstream names(file.text_attribute(varid, "coordinates").value_or(""));
    for (std::string name; names >> name;) {
        const auto other = file.find_var(name);
        if (other && file.var_dims(*other).size() >= 2 &&
            (says_it_is(file, *other, latitude_rules) || says_it_is(file, *other, longitude_rules))) {
            return with_dims(file, *other);
        }
    }
    return {};
}

std::string describe(const NetcdfHandle& file, const GridInfo& grid, int varid, VariableShape& shape) {
    const DimIds ids = grid_dim_ids(file, grid);
    shape = {};
    shape.name = file.var_name(varid);
    const auto dims = file.var_dims(varid);
    for (const int dimid : dims) {
        shape.dim_names.push_back(file.dim_name(dimid));
        shape.dim_sizes.push_back(file.dim_length(dimid));
    }
    std::string dims_text = "(";
    for (std::size_t k = 0; k < dims.size(); ++k) {
        dims_text += (k > 0 ? ", " : "") + shape.dim_names[k];
    }
    dims_text += ")";
    if (!is_numeric(file.var_type(varid))) {
        return "is not numeric";
    }
    const std::size_t n = dims.size();
    if (n < 2 || dims[n - 2] != ids.lat || dims[n - 1] != ids.lon) {
        return "has dims " + dims_text + ", which do not end in (" + grid.lat_dim + ", " + grid.lon_dim + ")";
    }
    for (std::size_t k = 0; k + 2 < n; ++k) {
        if (ids.time && dims[k] == *ids.time) {
            for (std::size_t before = 0; before < k; ++before) {
                if (!is_ensemble_dim_name(shape.dim_names[before])) {
                    return "has dims " + dims_text + ": the time dim '" + grid.time_dim +
                           "' must come first, after only ensemble dims (sample, member, ensemble, number, "
                           "realization)";
                }
            }
            shape.time_index = static_cast<int>(k);
            shape.ntime = shape.dim_sizes[k];
        } else if (__builtin_mul_overflow(shape.channels_per_step, shape.dim_sizes[k], &shape.channels_per_step)) {
            return "has dims " + dims_text + " whose product overflows 64 bits";
        }
    }
    shape.nlat = shape.dim_sizes[n - 2];
    shape.nlon = shape.dim_sizes[n - 1];
    // A netCDF-4 file may declare dims far larger than the data it holds; a step must stay countable.
    std::int64_t per_step = 0;
    if (__builtin_mul_overflow(shape.channels_per_step, shape.nlat, &per_step) ||
        __builtin_mul_overflow(per_step, shape.nlon, &per_step) || per_step > (std::int64_t{1} << 53)) {
        return "has dims " + dims_text + ": more values per step than can be read";
    }
    shape.units = file.text_attribute(varid, "units").value_or("");
    return {};
}

std::vector<std::string> auxiliary_variables(const NetcdfHandle& file) {
    std::vector<std::string> names;
    const int nvars = file.nvars();
    for (int varid = 0; varid < nvars; ++varid) {
        for (const char* attribute : {"bounds", "climatology", "cell_measures", "coordinates"}) {
            // Names listed as bounds = "lat_bnds" or cell_measures = "area: cell_area" (a word with a colon
            // is a role, not a name).
            std::istringstream words(file.text_attribute(varid, attribute).value_or(""));
            for (std::string word; words >> word;) {
                if (word.back() != ':') {
                    names.push_back(word);
                }
            }
        }
    }
    return names;
}

}  // namespace gridshard::io::detail
