#include "gridshard/io/zonal_writer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "gridshard/core/error.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/netcdf_reader.hpp"

namespace gridshard::io {

Dataset zonal_means_dataset(const std::string& path, const GridInfo& grid, std::int64_t ntime,
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

    // The file is a Dataset of the one dataset writer: dims time (the record dim), lat and (with bounds) bnds.
    const std::string lat_name = grid.lat_dim.empty() ? "lat" : grid.lat_dim;
    const std::string time_name = grid.time_dim.empty() ? "time" : grid.time_dim;
    Dataset d;
    Attributes time_attributes = {{"standard_name", "time"}, {"long_name", "time"}, {"axis", "T"}};
    if (!grid.time_units.empty()) {
        time_attributes.emplace_back("units", grid.time_units);
    }
    if (!grid.time_calendar.empty()) {
        time_attributes.emplace_back("calendar", grid.time_calendar);
    }
    d.dims.push_back({time_name, ntime, times, std::move(time_attributes), true});
    Attributes lat_attributes = {
        {"standard_name", "latitude"}, {"long_name", "latitude"}, {"units", "degrees_north"}, {"axis", "Y"}};
    if (!grid.lat_bounds_deg.empty()) {
        lat_attributes.emplace_back("bounds", lat_name + "_bnds");
    }
    d.dims.push_back({lat_name, nlat, grid.lat_deg, std::move(lat_attributes)});
    if (!grid.lat_bounds_deg.empty()) {
        d.dims.push_back({"bnds", 2});
        d.variables.push_back({lat_name + "_bnds", {lat_name, "bnds"}, grid.lat_bounds_deg, {}, {}, {}, false});
    }
    for (const ZonalVariable& v : variables) {
        Attributes described;
        if (!v.long_name.empty()) {
            described.emplace_back("long_name", v.long_name);
        }
        if (!v.units.empty()) {
            described.emplace_back("units", v.units);
        }
        described.emplace_back("cell_methods", "longitude: mean");
        d.variables.push_back({v.name, {time_name, lat_name}, v.values, std::move(described)});
    }
    d.global_attributes = {{"title", attributes.title}, {"history", attributes.history}};
    return d;
}

void write_zonal_means(AtomicOutput& output, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes,
                       const std::optional<std::vector<double>>& time_values) {
    write_dataset(output, zonal_means_dataset(output.path(), grid, ntime, variables, attributes, time_values));
}

void write_zonal_means(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes,
                       const std::optional<std::vector<double>>& time_values) {
    AtomicOutput output(path);
    write_zonal_means(output, grid, ntime, variables, attributes, time_values);
    output.commit();
}

}  // namespace gridshard::io
