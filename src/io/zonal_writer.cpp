#include "gridshard/io/zonal_writer.hpp"

#include <netcdf.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "gridshard/core/error.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "write_handle.hpp"

namespace gridshard::io {
using detail::check_write;
using detail::put_text;
using detail::WriteHandle;

void write_zonal_means(AtomicOutput& output, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes,
                       const std::optional<std::vector<double>>& time_values) {
    const std::string& path = output.path();
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

    WriteHandle file(output);
    const int ncid = file.ncid();
    const std::string lat_name = grid.lat_dim.empty() ? "lat" : grid.lat_dim;
    const std::string time_name = grid.time_dim.empty() ? "time" : grid.time_dim;
    int time_dim = -1;
    int lat_dim = -1;
    check_write(nc_def_dim(ncid, time_name.c_str(), NC_UNLIMITED, &time_dim), path, "defining dim '" + time_name + "'");
    check_write(nc_def_dim(ncid, lat_name.c_str(), static_cast<std::size_t>(nlat), &lat_dim), path,
                "defining dim '" + lat_name + "'");

    int time_var = -1;
    if (!times.empty()) {
        check_write(nc_def_var(ncid, time_name.c_str(), NC_DOUBLE, 1, &time_dim, &time_var), path,
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
    check_write(nc_def_var(ncid, lat_name.c_str(), NC_DOUBLE, 1, &lat_dim, &lat_var), path,
                "defining variable '" + lat_name + "'");
    put_text(ncid, lat_var, "standard_name", "latitude", path);
    put_text(ncid, lat_var, "long_name", "latitude", path);
    put_text(ncid, lat_var, "units", "degrees_north", path);
    put_text(ncid, lat_var, "axis", "Y", path);
    int bounds_var = -1;
    if (!grid.lat_bounds_deg.empty()) {
        const std::string bounds_name = lat_name + "_bnds";
        int nv_dim = -1;
        check_write(nc_def_dim(ncid, "bnds", 2, &nv_dim), path, "defining dim 'bnds'");
        const int dims[2] = {lat_dim, nv_dim};
        check_write(nc_def_var(ncid, bounds_name.c_str(), NC_DOUBLE, 2, dims, &bounds_var), path,
                    "defining variable '" + bounds_name + "'");
        put_text(ncid, lat_var, "bounds", bounds_name, path);
    }

    constexpr double fill_value = 9.96920996838687e+36;
    std::vector<int> var_ids;
    for (const ZonalVariable& v : variables) {
        const int dims[2] = {time_dim, lat_dim};
        int varid = -1;
        check_write(nc_def_var(ncid, v.name.c_str(), NC_DOUBLE, 2, dims, &varid), path,
                    "defining variable '" + v.name + "'");
        check_write(nc_put_att_double(ncid, varid, "_FillValue", NC_DOUBLE, 1, &fill_value), path,
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
    check_write(nc_enddef(ncid), path, "ending define mode");

    check_write(nc_put_var_double(ncid, lat_var, grid.lat_deg.data()), path, "writing '" + lat_name + "'");
    if (bounds_var >= 0) {
        check_write(nc_put_var_double(ncid, bounds_var, grid.lat_bounds_deg.data()), path, "writing latitude bounds");
    }
    if (ntime > 0) {
        const std::size_t start[2] = {0, 0};
        const std::size_t count[2] = {static_cast<std::size_t>(ntime), static_cast<std::size_t>(nlat)};
        if (time_var >= 0) {
            check_write(nc_put_vara_double(ncid, time_var, start, count, times.data()), path,
                        "writing '" + time_name + "'");
        }
        std::vector<double> filled;
        for (std::size_t k = 0; k < variables.size(); ++k) {
            filled = variables[k].values;
            std::replace_if(
                filled.begin(), filled.end(), [](double v) { return std::isnan(v); }, fill_value);
            check_write(nc_put_vara_double(ncid, var_ids[k], start, count, filled.data()), path,
                        "writing variable '" + variables[k].name + "'");
        }
    }
    file.close();
}

void write_zonal_means(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes,
                       const std::optional<std::vector<double>>& time_values) {
    AtomicOutput output(path);
    write_zonal_means(output, grid, ntime, variables, attributes, time_values);
    output.commit();
}

}  // namespace gridshard::io
