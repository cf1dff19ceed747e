#include "gridshard/io/netcdf.hpp"

#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace gridshard::io {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem, int status = NC_NOERR) {
    std::string message = "netCDF file '" + path + "': " + problem;
    if (status != NC_NOERR) {
        message += ": ";
        message += nc_strerror(status);
    }
    throw NetcdfError(message, status);
}

// Every netCDF return code goes through here.
void check(int status, const std::string& path, std::string_view doing) {
    if (status != NC_NOERR) {
        fail(path, std::string(doing), status);
    }
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string trim(std::string text) {
    const auto not_space = [](unsigned char c) { return std::isspace(c) == 0 && c != '\0'; };
    text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
    text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
    return text;
}

bool is_numeric(nc_type type) {
    switch (type) {
        case NC_BYTE:
        case NC_UBYTE:
        case NC_SHORT:
        case NC_USHORT:
        case NC_INT:
        case NC_UINT:
        case NC_INT64:
        case NC_UINT64:
        case NC_FLOAT:
        case NC_DOUBLE:
            return true;
        default:
            return false;
    }
}

// Reads the file's structure through one open id; every message names the file.
class Inspector {
  public:
    Inspector(int ncid, const std::string& path) : ncid_(ncid), path_(path) {}

    [[nodiscard]] std::string var_name(int varid) const {
        char name[NC_MAX_NAME + 1] = {};
        check(nc_inq_varname(ncid_, varid, name), path_, "reading a variable's name");
        return name;
    }

    [[nodiscard]] std::string dim_name(int dimid) const {
        char name[NC_MAX_NAME + 1] = {};
        check(nc_inq_dimname(ncid_, dimid, name), path_, "reading a dimension's name");
        return name;
    }

    [[nodiscard]] std::int64_t dim_length(int dimid) const {
        std::size_t length = 0;
        check(nc_inq_dimlen(ncid_, dimid, &length), path_, "reading the length of dimension '" + dim_name(dimid) + "'");
        return static_cast<std::int64_t>(length);
    }

    [[nodiscard]] std::vector<int> dim_ids() const {
        int ndims = 0;
        check(nc_inq_dimids(ncid_, &ndims, nullptr, 0), path_, "listing dimensions");
        std::vector<int> ids(static_cast<std::size_t>(ndims));
        check(nc_inq_dimids(ncid_, &ndims, ids.data(), 0), path_, "listing dimensions");
        return ids;
    }

    [[nodiscard]] int nvars() const {
        int nvars = 0;
        check(nc_inq_nvars(ncid_, &nvars), path_, "counting variables");
        return nvars;
    }

    [[nodiscard]] std::optional<int> find_var(const std::string& name) const {
        int varid = -1;
        const int status = nc_inq_varid(ncid_, name.c_str(), &varid);
        if (status == NC_ENOTVAR) {
            return std::nullopt;
        }
        check(status, path_, "looking up variable '" + name + "'");
        return varid;
    }

    [[nodiscard]] nc_type var_type(int varid) const {
        nc_type type = NC_NAT;
        check(nc_inq_vartype(ncid_, varid, &type), path_, "reading the type of variable '" + var_name(varid) + "'");
        return type;
    }

    [[nodiscard]] std::vector<int> var_dims(int varid) const {
        int ndims = 0;
        check(nc_inq_varndims(ncid_, varid, &ndims), path_, "reading the dims of variable '" + var_name(varid) + "'");
        std::vector<int> dims(static_cast<std::size_t>(ndims));
        check(nc_inq_vardimid(ncid_, varid, dims.data()), path_,
              "reading the dims of variable '" + var_name(varid) + "'");
        return dims;
    }

    // A text attribute (NC_CHAR or NC_STRING), or nothing when absent or not text.
    [[nodiscard]] std::optional<std::string> text_attribute(int varid, const char* name) const {
        nc_type type = NC_NAT;
        std::size_t length = 0;
        const int status = nc_inq_att(ncid_, varid, name, &type, &length);
        if (status == NC_ENOTATT) {
            return std::nullopt;
        }
        const std::string doing = "reading attribute '" + std::string(name) + "' of '" + var_name(varid) + "'";
        check(status, path_, doing);
        if (type == NC_CHAR) {
            std::string text(length, '\0');
            check(nc_get_att_text(ncid_, varid, name, text.data()), path_, doing);
            return trim(std::move(text));
        }
        if (type == NC_STRING && length > 0) {
            std::vector<char*> strings(length, nullptr);
            check(nc_get_att_string(ncid_, varid, name, strings.data()), path_, doing);
            std::string text = strings[0] != nullptr ? strings[0] : "";
            nc_free_string(length, strings.data());
            return trim(std::move(text));
        }
        return std::nullopt;
    }

    // A numeric attribute converted to double, or nothing when absent; text is an error.
    [[nodiscard]] std::optional<std::vector<double>> numeric_attribute(int varid, const char* name) const {
        nc_type type = NC_NAT;
        std::size_t length = 0;
        const int status = nc_inq_att(ncid_, varid, name, &type, &length);
        if (status == NC_ENOTATT) {
            return std::nullopt;
        }
        const std::string doing = "reading attribute '" + std::string(name) + "' of '" + var_name(varid) + "'";
        check(status, path_, doing);
        if (!is_numeric(type)) {
            fail(path_, "attribute '" + std::string(name) + "' of '" + var_name(varid) + "' is not numeric");
        }
        std::vector<double> values(length);
        check(nc_get_att_double(ncid_, varid, name, values.data()), path_, doing);
        return values;
    }

    [[nodiscard]] std::optional<double> scalar_attribute(int varid, const char* name) const {
        const auto values = numeric_attribute(varid, name);
        if (!values) {
            return std::nullopt;
        }
        if (values->size() != 1) {
            fail(path_, "attribute '" + std::string(name) + "' of '" + var_name(varid) + "' has " +
                            std::to_string(values->size()) + " values, not 1");
        }
        return values->front();
    }

    [[nodiscard]] std::vector<double> read_all(int varid, std::size_t count) const {
        std::vector<double> values(count);
        if (count > 0) {
            check(nc_get_var_double(ncid_, varid, values.data()), path_, "reading variable '" + var_name(varid) + "'");
        }
        return values;
    }

    [[nodiscard]] int ncid() const noexcept { return ncid_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

  private:
    int ncid_;
    const std::string& path_;
};

// A 1-D coordinate variable: a variable named as its only dimension.
struct Coordinate {
    int dimid = -1;
    int varid = -1;
    std::string name;
    std::string standard_name;
    std::string units;
    std::string axis;
};

std::vector<Coordinate> coordinates(const Inspector& file) {
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
std::optional<Coordinate> only_match(const Inspector& file, const std::vector<Coordinate>& coords,
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
std::optional<Coordinate> find_axis(const Inspector& file, const std::vector<Coordinate>& coords,
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
std::vector<double> read_bounds(const Inspector& file, const Coordinate& coord, std::int64_t n) {
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

GridInfo find_grid(const Inspector& file) {
    const auto coords = coordinates(file);
    const auto lat = find_axis(file, coords,
                               {"latitude",
                                {"degrees_north", "degree_north", "degree_N", "degrees_N", "degreeN", "degreesN"},
                                "Y",
                                {"lat", "latitude"}});
    if (!lat) {
        fail(file.path(),
             "no latitude coordinate (a 1-D variable named as its dim, with standard_name latitude, "
             "units degrees_north, axis Y, or named lat or latitude)");
    }
    const auto lon = find_axis(file, coords,
                               {"longitude",
                                {"degrees_east", "degree_east", "degree_E", "degrees_E", "degreeE", "degreesE"},
                                "X",
                                {"lon", "longitude"}});
    if (!lon) {
        fail(file.path(),
             "no longitude coordinate (a 1-D variable named as its dim, with standard_name longitude, "
             "units degrees_east, axis X, or named lon or longitude)");
    }
    if (lat->dimid == lon->dimid) {
        fail(file.path(), "'" + lat->name + "' qualifies as both latitude and longitude");
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

    // Time: a coordinate that says so, else the unlimited dim, else a dim named time.
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
            if (dimid != lat->dimid && dimid != lon->dimid) {
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

struct DimIds {
    int lat = -1;
    int lon = -1;
    std::optional<int> time;
};

DimIds grid_dim_ids(const Inspector& file, const GridInfo& grid) {
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

// The layout of a variable, or the reason it is not a field on the grid.
std::string describe(const Inspector& file, const GridInfo& grid, int varid, VariableShape& shape) {
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
            if (k != 0) {
                return "has dims " + dims_text + ": the time dim '" + grid.time_dim + "' must come first";
            }
            shape.time_index = 0;
            shape.ntime = shape.dim_sizes[0];
        } else {
            shape.channels_per_step *= shape.dim_sizes[k];
        }
    }
    shape.nlat = shape.dim_sizes[n - 2];
    shape.nlon = shape.dim_sizes[n - 1];
    return {};
}

// Names listed in attributes such as bounds = "lat_bnds" or cell_measures = "area: cell_area".
void add_named_variables(const std::string& text, std::vector<std::string>& names) {
    std::istringstream words(text);
    std::string word;
    while (words >> word) {
        if (word.back() != ':') {
            names.push_back(word);
        }
    }
}

}  // namespace

bool same_grid(const GridInfo& a, const GridInfo& b, double tolerance_deg) noexcept {
    const auto close = [tolerance_deg](const std::vector<double>& x, const std::vector<double>& y) {
        if (x.size() != y.size()) {
            return false;
        }
        for (std::size_t k = 0; k < x.size(); ++k) {
            if (!(std::abs(x[k] - y[k]) <= tolerance_deg)) {
                return false;
            }
        }
        return true;
    };
    return close(a.lat_deg, b.lat_deg) && close(a.lon_deg, b.lon_deg);
}

NetcdfReader::NetcdfReader(const std::string& path) : path_(path) {
    check(nc_open(path.c_str(), NC_NOWRITE, &ncid_), path_, "cannot open");
    try {
        grid_ = find_grid(Inspector(ncid_, path_));
    } catch (...) {
        nc_close(ncid_);
        throw;
    }
}

NetcdfReader::~NetcdfReader() {
    if (ncid_ >= 0) {
        nc_close(ncid_);  // a read-only file: nothing to lose if closing fails
    }
}

NetcdfReader::NetcdfReader(NetcdfReader&& other) noexcept
    : path_(std::move(other.path_)), ncid_(std::exchange(other.ncid_, -1)), grid_(std::move(other.grid_)) {}

NetcdfReader& NetcdfReader::operator=(NetcdfReader&& other) noexcept {
    if (this != &other) {
        if (ncid_ >= 0) {
            nc_close(ncid_);
        }
        path_ = std::move(other.path_);
        ncid_ = std::exchange(other.ncid_, -1);
        grid_ = std::move(other.grid_);
    }
    return *this;
}

std::vector<std::string> NetcdfReader::field_variables() const {
    if (ncid_ < 0) {
        throw NetcdfError("netCDF reader used after it was moved from");
    }
    const Inspector file(ncid_, path_);
    std::vector<std::string> not_fields;
    const int nvars = file.nvars();
    for (int varid = 0; varid < nvars; ++varid) {
        for (const char* attribute : {"bounds", "climatology", "cell_measures", "coordinates"}) {
            add_named_variables(file.text_attribute(varid, attribute).value_or(""), not_fields);
        }
    }
    std::vector<std::string> names;
    for (int varid = 0; varid < nvars; ++varid) {
        VariableShape shape;
        if (!describe(file, grid_, varid, shape).empty()) {
            continue;
        }
        // Coordinate variables are 1-D, so never fields; bounds and cell measures can look like fields.
        if (std::find(not_fields.begin(), not_fields.end(), shape.name) == not_fields.end()) {
            names.push_back(shape.name);
        }
    }
    return names;
}

VariableShape NetcdfReader::variable(const std::string& name) const {
    if (ncid_ < 0) {
        throw NetcdfError("netCDF reader used after it was moved from");
    }
    const Inspector file(ncid_, path_);
    int varid = -1;
    check(nc_inq_varid(ncid_, name.c_str(), &varid), path_, "no variable '" + name + "'");
    VariableShape shape;
    if (const std::string problem = describe(file, grid_, varid, shape); !problem.empty()) {
        fail(path_, "variable '" + name + "' " + problem);
    }
    return shape;
}

std::vector<float> NetcdfReader::read(const std::string& name, const Range& steps, const Box& box) const {
    const VariableShape shape = variable(name);
    const auto fits = [](const Range& r, std::int64_t n) { return r.begin >= 0 && r.begin <= r.end && r.end <= n; };
    if (!fits(steps, shape.ntime)) {
        throw ArgumentError("netCDF file '" + path_ + "': steps [" + std::to_string(steps.begin) + ", " +
                            std::to_string(steps.end) + ") of variable '" + name + "' are outside [0, " +
                            std::to_string(shape.ntime) + ")" + (shape.time_index ? "" : " (it has no time dim)"));
    }
    if (!fits(box.lat, shape.nlat) || !fits(box.lon, shape.nlon)) {
        throw ArgumentError("netCDF file '" + path_ + "': box lat [" + std::to_string(box.lat.begin) + ", " +
                            std::to_string(box.lat.end) + ") lon [" + std::to_string(box.lon.begin) + ", " +
                            std::to_string(box.lon.end) + ") of variable '" + name + "' is outside its " +
                            std::to_string(shape.nlat) + " x " + std::to_string(shape.nlon) + " grid");
    }
    const std::size_t step_size =
        static_cast<std::size_t>(shape.channels_per_step) * static_cast<std::size_t>(box.area());
    std::vector<float> out(static_cast<std::size_t>(steps.size()) * step_size);
    if (out.empty()) {
        return out;
    }

    const Inspector file(ncid_, path_);
    int varid = -1;
    check(nc_inq_varid(ncid_, name.c_str(), &varid), path_, "no variable '" + name + "'");
    const nc_type type = file.var_type(varid);

    // Missing values are compared in the stored (packed) type, before unpacking, as CF says.
    std::vector<double> missing = file.numeric_attribute(varid, "missing_value").value_or(std::vector<double>{});
    if (const auto fill = file.scalar_attribute(varid, "_FillValue")) {
        missing.push_back(*fill);
    } else {
        int no_fill = 0;
        check(nc_inq_var_fill(ncid_, varid, &no_fill, nullptr), path_, "reading the fill mode of '" + name + "'");
        const double default_fill = type == NC_SHORT    ? NC_FILL_SHORT
                                    : type == NC_USHORT ? NC_FILL_USHORT
                                    : type == NC_INT    ? NC_FILL_INT
                                    : type == NC_UINT   ? NC_FILL_UINT
                                    : type == NC_INT64  ? static_cast<double>(NC_FILL_INT64)
                                    : type == NC_UINT64 ? static_cast<double>(NC_FILL_UINT64)
                                    : type == NC_FLOAT  ? NC_FILL_FLOAT
                                    : type == NC_DOUBLE ? NC_FILL_DOUBLE
                                                        : std::numeric_limits<double>::quiet_NaN();
        if (no_fill == 0 && !std::isnan(default_fill)) {  // bytes have no default fill (netCDF guide)
            missing.push_back(default_fill);
        }
    }
    const double scale = file.scalar_attribute(varid, "scale_factor").value_or(1.0);
    const double offset = file.scalar_attribute(varid, "add_offset").value_or(0.0);
    const bool is_unsigned = (type == NC_BYTE || type == NC_SHORT || type == NC_INT) &&
                             lower(file.text_attribute(varid, "_Unsigned").value_or("")) == "true";
    const double wrap = type == NC_BYTE ? 256.0 : type == NC_SHORT ? 65536.0 : 4294967296.0;
    const bool transform = scale != 1.0 || offset != 0.0 || is_unsigned;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto convert = [&](double v) {
        if (std::find(missing.begin(), missing.end(), v) != missing.end()) {
            return nan;
        }
        if (is_unsigned && v < 0.0) {
            v += wrap;
        }
        return static_cast<float>(transform ? v * scale + offset : v);
    };

    const std::size_t ndims = shape.dim_sizes.size();
    std::vector<std::size_t> start(ndims, 0);
    std::vector<std::size_t> count(ndims);
    for (std::size_t k = 0; k < ndims; ++k) {
        count[k] = static_cast<std::size_t>(shape.dim_sizes[k]);
    }
    start[ndims - 2] = static_cast<std::size_t>(box.lat.begin);
    count[ndims - 2] = static_cast<std::size_t>(box.lat.size());
    start[ndims - 1] = static_cast<std::size_t>(box.lon.begin);
    count[ndims - 1] = static_cast<std::size_t>(box.lon.size());
    if (shape.time_index) {
        start[0] = static_cast<std::size_t>(steps.begin);
        count[0] = static_cast<std::size_t>(steps.size());
    }
    const std::string doing = "reading variable '" + name + "'";

    if (type == NC_FLOAT) {
        check(nc_get_vara_float(ncid_, varid, start.data(), count.data(), out.data()), path_, doing);
        if (missing.size() <= 2 && !transform) {
            // The common case, branch-free so it vectorises: at most two missing values, no packing.
            const float first = missing.empty() ? nan : static_cast<float>(missing[0]);
            const float second = missing.size() < 2 ? first : static_cast<float>(missing[1]);
            for (float& v : out) {
                v = (v == first || v == second) ? nan : v;
            }
            return out;
        }
        for (float& v : out) {
            v = convert(static_cast<double>(v));
        }
        return out;
    }
    // Other types come through a double buffer one step at a time, to bound the extra memory.
    std::vector<double> buffer(step_size);
    if (shape.time_index) {
        count[0] = 1;
    }
    for (std::int64_t t = 0; t < steps.size(); ++t) {
        if (shape.time_index) {
            start[0] = static_cast<std::size_t>(steps.begin + t);
        }
        check(nc_get_vara_double(ncid_, varid, start.data(), count.data(), buffer.data()), path_, doing);
        std::transform(buffer.begin(), buffer.end(),
                       out.begin() + static_cast<std::ptrdiff_t>(t) * static_cast<std::ptrdiff_t>(step_size), convert);
    }
    return out;
}

namespace {

// The output under construction: a temporary file that is removed unless commit() renames it into place.
class PendingFile {
  public:
    explicit PendingFile(const std::string& path) : path_(path) {
        const std::filesystem::path target(path);
        const std::filesystem::path folder = target.parent_path();
        const auto stamp = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
        for (int attempt = 0;; ++attempt) {
            const std::string name = "." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                                     std::to_string(stamp) + "." + std::to_string(attempt);
            temp_ = (folder / name).string();
            const int status = nc_create(temp_.c_str(), NC_NOCLOBBER | NC_64BIT_OFFSET, &ncid_);
            if (status == NC_EEXIST && attempt < 100) {
                continue;
            }
            if (status != NC_NOERR) {
                ncid_ = -1;
                fail(path_, "cannot create the temporary file '" + temp_ + "'", status);
            }
            break;
        }
    }

    ~PendingFile() {
        if (ncid_ >= 0) {
            nc_abort(ncid_);
        }
        if (!committed_) {
            std::error_code ignored;
            std::filesystem::remove(temp_, ignored);
        }
    }

    PendingFile(const PendingFile&) = delete;
    PendingFile& operator=(const PendingFile&) = delete;

    [[nodiscard]] int ncid() const noexcept { return ncid_; }

    void commit() {
        const int status = nc_close(std::exchange(ncid_, -1));
        check(status, path_, "writing (closing '" + temp_ + "')");
        std::error_code error;
        std::filesystem::rename(temp_, path_, error);
        if (error) {
            fail(path_, "cannot rename '" + temp_ + "' into place: " + error.message());
        }
        committed_ = true;
    }

  private:
    std::string path_;
    std::string temp_;
    int ncid_ = -1;
    bool committed_ = false;
};

void put_text(int ncid, int varid, const char* name, const std::string& value, const std::string& path) {
    check(nc_put_att_text(ncid, varid, name, value.size(), value.c_str()), path,
          "writing attribute '" + std::string(name) + "'");
}

}  // namespace

void write_zonal_means(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes,
                       const std::optional<std::vector<double>>& time_values) {
    const auto nlat = static_cast<std::int64_t>(grid.lat_deg.size());
    const auto bad = [&path](const std::string& problem) {
        throw ArgumentError("zonal-mean file '" + path + "': " + problem);
    };
    if (ntime < 0) {
        bad("ntime = " + std::to_string(ntime) + " is negative");
    }
    if (nlat < 1) {
        bad("the grid has no latitudes");
    }
    if (!grid.lat_bounds_deg.empty() && grid.lat_bounds_deg.size() != static_cast<std::size_t>(2 * nlat)) {
        bad("the grid has " + std::to_string(grid.lat_bounds_deg.size()) + " latitude bounds for " +
            std::to_string(nlat) + " latitudes");
    }
    const std::vector<double>& times = time_values ? *time_values : grid.time_values;
    if ((time_values || !times.empty()) && times.size() != static_cast<std::size_t>(ntime)) {
        bad(std::to_string(times.size()) + " time values for ntime = " + std::to_string(ntime));
    }
    for (const ZonalVariable& v : variables) {
        if (v.values.size() != static_cast<std::size_t>(ntime * nlat)) {
            bad("variable '" + v.name + "' has " + std::to_string(v.values.size()) +
                " values, not ntime x nlat = " + std::to_string(ntime) + " x " + std::to_string(nlat));
        }
    }

    PendingFile file(path);
    const int ncid = file.ncid();
    const std::string lat_name = grid.lat_dim.empty() ? "lat" : grid.lat_dim;
    const std::string time_name = grid.time_dim.empty() ? "time" : grid.time_dim;
    int time_dim = -1;
    int lat_dim = -1;
    check(nc_def_dim(ncid, time_name.c_str(), NC_UNLIMITED, &time_dim), path, "defining dim '" + time_name + "'");
    check(nc_def_dim(ncid, lat_name.c_str(), static_cast<std::size_t>(nlat), &lat_dim), path,
          "defining dim '" + lat_name + "'");

    int time_var = -1;
    if (!times.empty()) {
        check(nc_def_var(ncid, time_name.c_str(), NC_DOUBLE, 1, &time_dim, &time_var), path,
              "defining variable '" + time_name + "'");
        put_text(ncid, time_var, "standard_name", "time", path);
        put_text(ncid, time_var, "long_name", "time", path);
        put_text(ncid, time_var, "axis", "T", path);
        if (!grid.time_units.empty()) {
            put_text(ncid, time_var, "units", grid.time_units, path);
        }
        if (!grid.time_calendar.empty()) {
            put_text(ncid, time_var, "calendar", grid.time_calendar, path);
        }
    }
    int lat_var = -1;
    check(nc_def_var(ncid, lat_name.c_str(), NC_DOUBLE, 1, &lat_dim, &lat_var), path,
          "defining variable '" + lat_name + "'");
    put_text(ncid, lat_var, "standard_name", "latitude", path);
    put_text(ncid, lat_var, "long_name", "latitude", path);
    put_text(ncid, lat_var, "units", "degrees_north", path);
    put_text(ncid, lat_var, "axis", "Y", path);
    int bounds_var = -1;
    if (!grid.lat_bounds_deg.empty()) {
        const std::string bounds_name = lat_name + "_bnds";
        int nv_dim = -1;
        check(nc_def_dim(ncid, "bnds", 2, &nv_dim), path, "defining dim 'bnds'");
        const int dims[2] = {lat_dim, nv_dim};
        check(nc_def_var(ncid, bounds_name.c_str(), NC_DOUBLE, 2, dims, &bounds_var), path,
              "defining variable '" + bounds_name + "'");
        put_text(ncid, lat_var, "bounds", bounds_name, path);
    }

    constexpr double fill_value = 9.96920996838687e+36;
    std::vector<int> var_ids;
    for (const ZonalVariable& v : variables) {
        const int dims[2] = {time_dim, lat_dim};
        int varid = -1;
        check(nc_def_var(ncid, v.name.c_str(), NC_DOUBLE, 2, dims, &varid), path, "defining variable '" + v.name + "'");
        check(nc_put_att_double(ncid, varid, "_FillValue", NC_DOUBLE, 1, &fill_value), path,
              "writing attribute '_FillValue' of '" + v.name + "'");
        if (!v.long_name.empty()) {
            put_text(ncid, varid, "long_name", v.long_name, path);
        }
        if (!v.units.empty()) {
            put_text(ncid, varid, "units", v.units, path);
        }
        put_text(ncid, varid, "cell_methods", "longitude: mean", path);
        var_ids.push_back(varid);
    }
    put_text(ncid, NC_GLOBAL, "Conventions", "CF-1.8", path);
    put_text(ncid, NC_GLOBAL, "title", attributes.title, path);
    put_text(ncid, NC_GLOBAL, "history", attributes.history, path);
    check(nc_enddef(ncid), path, "ending define mode");

    check(nc_put_var_double(ncid, lat_var, grid.lat_deg.data()), path, "writing '" + lat_name + "'");
    if (bounds_var >= 0) {
        check(nc_put_var_double(ncid, bounds_var, grid.lat_bounds_deg.data()), path, "writing latitude bounds");
    }
    if (ntime > 0) {
        const std::size_t start[2] = {0, 0};
        const std::size_t count[2] = {static_cast<std::size_t>(ntime), static_cast<std::size_t>(nlat)};
        if (time_var >= 0) {
            check(nc_put_vara_double(ncid, time_var, start, count, times.data()), path, "writing '" + time_name + "'");
        }
        std::vector<double> filled;
        for (std::size_t k = 0; k < variables.size(); ++k) {
            filled = variables[k].values;
            std::replace_if(
                filled.begin(), filled.end(), [](double v) { return std::isnan(v); }, fill_value);
            check(nc_put_vara_double(ncid, var_ids[k], start, count, filled.data()), path,
                  "writing variable '" + variables[k].name + "'");
        }
    }
    file.commit();
}

}  // namespace gridshard::io
