#include "forecast_output.hpp"

#include "output.hpp"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gridshard/core/error.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/parallel_io.hpp"

namespace gridshard::cli {
namespace {

using json = nlohmann::ordered_json;

// A channel's name as a netCDF name: "ta[2]" is "ta_2".
std::string netcdf_name(const std::string& name) {
    std::string out;
    for (const char c : name) {
        if (c == '[') {
            out += '_';
        } else if (c != ']') {
            out += c;
        }
    }
    return out;
}

// Which rows the time means count, for the table and the maps' title: "rows 1 to 4 of 5 (lead 0, the initial
// condition, left out)".
std::string time_mean_rows_text(const ForecastReport& report) {
    const TimeMeanRows& t = report.time_means;
    const std::vector<std::int64_t>& rows = t.rows;
    std::string text;
    if (!rows.empty() && rows.back() - rows.front() + 1 == static_cast<std::int64_t>(rows.size())) {
        text = "rows " + std::to_string(rows.front()) + " to " + std::to_string(rows.back());
    } else {
        for (const std::int64_t row : rows) {
            text += (text.empty() ? "rows " : ", ") + std::to_string(row);
        }
    }
    text += " of " + std::to_string(report.layout.lead_times);
    if (!t.leads_known) {
        return text + " (lead times unknown: every row)";
    }
    if (t.initial_rows == 0) {
        return text + " (every lead time > 0)";
    }
    if (!t.initial_counted) {
        return text + " (lead 0, the initial condition, left out)";
    }
    return text + (static_cast<std::int64_t>(rows.size()) == t.initial_rows
                       ? " (lead 0 only: no row at a lead time > 0)"
                       : " (lead 0 included: --include-initial-step)");
}

json region_json(const RegionForecast& r) {
    json per_step = json::object();
    for (const auto& [score, series] : r.per_step) {
        per_step[score] = series;
    }
    json time_mean = json::object();
    for (const auto& [score, value] : r.time_mean) {
        time_mean[score] = value;
    }
    return {{"per_step", per_step}, {"time_mean", time_mean}};
}

void write_json(const ForecastReport& report, std::ostream& out) {
    json variables = json::object();
    for (const ChannelForecast& c : report.variables) {
        json regions = json::object();
        for (const RegionForecast& r : c.regions) {
            regions[r.name] = region_json(r);
        }
        json entry = region_json(c.regions.front());
        entry["regions"] = regions;
        variables[c.name] = entry;
    }
    const ForecastLayout& l = report.layout;
    const LeadTimes& t = report.lead_times;
    const json forecast = {
        {"initial_conditions", l.initial_conditions},
        {"members", l.members},
        {"lead_times", l.lead_times},
        {"members_from", l.members_from},
        {"data_split", report.data_split},
        {"time_means_include_initial_step", report.time_means.initial_counted},
        {"time_means_rows", report.time_means.rows},
        {"lead_time", {{"values", t.values}, {"units", t.units}}},
        {"init_time", {{"values", t.init_times}, {"units", t.init_time_units}, {"calendar", t.calendar}}},
        {"climatology", report.climatology.empty() ? json(nullptr) : json(report.climatology)},
    };
    json document =
        json_header(report.mesh, report.split, report.weights, report.summation, report.policy, report.grid.shape());
    document["forecast"] = forecast;
    document["variables"] = variables;
    dump_json(document, out);
}

// The table's columns: time means of the scores people read first (every score is in the JSON report).
const std::vector<std::pair<std::string, std::string>>& table_columns() {
    static const std::vector<std::pair<std::string, std::string>> columns = {
        {"weighted_rmse", "rmse"},
        {"weighted_bias", "bias"},
        {"weighted_grad_mag_percent_diff", "grad%"},
        {"rmse", "rmse(tmean)"},
        {"bias", "bias(tmean)"},
        {"ensemble_mean_rmse", "ens_rmse"},
        {"spread_skill_ratio", "ssr"},
        {"crps", "crps"},
        {"fair_crps", "fair_crps"},
        {"acc", "acc"},
    };
    return columns;
}

void print_table(const ForecastReport& report, std::ostream& out) {
    const ForecastLayout& l = report.layout;
    char cell[512];
    std::snprintf(cell, sizeof cell,
                  "gridshard eval: forecast of %lld initial conditions x %lld members x %lld lead times, grid %lld "
                  "x %lld, mesh %s (data split over %s)\n",
                  static_cast<long long>(l.initial_conditions), static_cast<long long>(l.members),
                  static_cast<long long>(l.lead_times), static_cast<long long>(report.grid.shape().nlat),
                  static_cast<long long>(report.grid.shape().nlon), to_string(report.mesh).c_str(),
                  report.data_split.c_str());
    out << cell << "time means over " << time_mean_rows_text(report) << ":\n";
    if (report.variables.empty()) {
        return;
    }
    const auto value_of = [](const RegionForecast& r, const std::string& score) -> const double* {
        for (const auto& [name, value] : r.time_mean) {
            if (name == score) {
                return &value;
            }
        }
        return nullptr;
    };
    const RegionForecast& first = report.variables.front().regions.front();
    std::snprintf(cell, sizeof cell, "%-12s %-22s", "variable", "region");
    out << cell;
    for (const auto& [score, label] : table_columns()) {
        if (value_of(first, score) != nullptr) {
            std::snprintf(cell, sizeof cell, " %11s", label.c_str());
            out << cell;
        }
    }
    out << "\n";
    for (const ChannelForecast& c : report.variables) {
        for (const RegionForecast& r : c.regions) {
            std::snprintf(cell, sizeof cell, "%-12s %-22s", c.name.c_str(), r.name.c_str());
            out << cell;
            for (const auto& [score, label] : table_columns()) {
                if (const double* value = value_of(r, score)) {
                    std::snprintf(cell, sizeof cell, " %11.5g", *value);
                    out << cell;
                }
            }
            out << "\n";
        }
    }
}

io::DatasetDim forecast_step_dim(const ForecastReport& report) {
    std::vector<double> steps;
    for (std::int64_t l = 0; l < report.layout.lead_times; ++l) {
        steps.push_back(static_cast<double>(l));
    }
    return {"forecast_step", report.layout.lead_times, steps, {{"long_name", "forecast step (0: initial condition)"}}};
}

io::DatasetDim lat_dim(const ForecastReport& report) {
    return {"lat",
            report.grid.shape().nlat,
            report.grid.lat_deg,
            {{"standard_name", "latitude"}, {"units", "degrees_north"}, {"axis", "Y"}}};
}

io::Attributes global_attributes(const std::string& title) {
    return {{"title", title}, {"source", std::string("gridshard ") + GRIDSHARD_VERSION}};
}

io::Dataset mean_diagnostics(const ForecastReport& report) {
    io::Dataset d;
    d.dims.push_back(forecast_step_dim(report));
    d.global_attributes = global_attributes("gridshard forecast scores per lead time");
    // The variables and regions, so that a reader need not parse the names "SCORE-VARIABLE[-REGION]".
    std::string variables;
    for (const ChannelForecast& c : report.variables) {
        variables += (variables.empty() ? "" : " ") + netcdf_name(c.name);
    }
    std::string regions;
    if (!report.variables.empty()) {
        for (const RegionForecast& r : report.variables.front().regions) {
            regions += (regions.empty() ? "" : " ") + r.name;
        }
    }
    d.global_attributes.emplace_back("variables", variables);
    d.global_attributes.emplace_back("regions", regions);
    if (report.lead_times.values.size() == static_cast<std::size_t>(report.layout.lead_times)) {
        d.variables.push_back({"lead_time",
                               {"forecast_step"},
                               report.lead_times.values,
                               {{"long_name", "lead time"}, {"units", report.lead_times.units}}});
    }
    for (const ChannelForecast& c : report.variables) {
        for (const RegionForecast& r : c.regions) {
            for (const auto& [score, series] : r.per_step) {
                const std::string suffix = r.name == "global" ? "" : "-" + r.name;
                d.variables.push_back({score + "-" + netcdf_name(c.name) + suffix,
                                       {"forecast_step"},
                                       series,
                                       {{"long_name", score + " of " + c.name + " over " + r.name}}});
            }
        }
    }
    return d;
}

io::Dataset zonal_diagnostics(const ForecastReport& report) {
    io::Dataset d;
    d.dims = {forecast_step_dim(report), lat_dim(report)};
    d.global_attributes = global_attributes("gridshard zonal means per lead time, averaged over samples");
    for (const ChannelForecast& c : report.variables) {
        const std::string name = netcdf_name(c.name);
        d.variables.push_back({"gen-" + name,
                               {"forecast_step", "lat"},
                               c.zonal_gen,
                               {{"long_name", c.name + " zonal mean, generated"}, {"cell_methods", "lon: mean"}}});
        d.variables.push_back(
            {"error-" + name,
             {"forecast_step", "lat"},
             c.zonal_error,
             {{"long_name", c.name + " zonal-mean error (generated - target)"}, {"cell_methods", "lon: mean"}}});
    }
    return d;
}

// The maps' part each rank writes collectively: (lat, lon) start and count; none for a whole map.
struct MapPart {
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> count;
};

io::Dataset time_mean_diagnostics(const ForecastReport& report, const MapPart& part = {}) {
    io::Dataset d;
    d.dims = {lat_dim(report),
              {"lon",
               report.grid.shape().nlon,
               report.grid.lon_deg,
               {{"standard_name", "longitude"}, {"units", "degrees_east"}, {"axis", "X"}}}};
    d.global_attributes = global_attributes("gridshard time-mean maps (" + time_mean_rows_text(report) + ")");
    for (const ChannelForecast& c : report.variables) {
        const std::string name = netcdf_name(c.name);
        const auto map = [&](const std::string& prefix, const std::vector<double>& values, const std::string& what) {
            d.variables.push_back(
                {prefix + name, {"lat", "lon"}, values, {{"long_name", c.name + what}}, part.start, part.count});
        };
        map("gen_map-", c.gen_map, " time mean, generated");
        map("bias_map-", c.bias_map, " time-mean bias (generated - target)");
    }
    return d;
}

}  // namespace

std::vector<io::NamedPath> ForecastOutputPaths::named(const std::string& json) const {
    return {{"--json", json, true}, {"--diagnostics", mean}, {"--diagnostics", zonal}, {"--diagnostics", time_mean}};
}

ForecastOutputPaths forecast_output_paths(const std::string& folder) {
    if (folder.empty()) {
        return {};
    }
    const std::string base = folder.back() == '/' ? folder : folder + "/";
    return {base + "mean_diagnostics.nc", base + "zonal_mean_diagnostics.nc", base + "time_mean_diagnostics.nc"};
}

void check_diagnostics_folder(const std::string& folder) {
    if (folder.empty()) {
        return;
    }
    struct stat info {};
    if (::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
        throw ArgumentError("--diagnostics '" + folder + "' is not an existing folder");
    }
}

void write_json_report(io::AtomicOutput& output, const ForecastReport& report) {
    std::ostringstream text;
    write_json(report, text);
    output.write(text.str());
}

void write_forecast_outputs(const ForecastReport& report, const std::string& json_path,
                            const ForecastOutputPaths& paths, std::ostream& table) {
    print_table(report, table);
    std::vector<io::OutputJob> jobs;
    if (!paths.mean.empty()) {
        jobs.push_back({paths.mean, [&](io::AtomicOutput& o) { io::write_dataset(o, mean_diagnostics(report)); }});
        jobs.push_back({paths.zonal, [&](io::AtomicOutput& o) { io::write_dataset(o, zonal_diagnostics(report)); }});
        jobs.push_back(
            {paths.time_mean, [&](io::AtomicOutput& o) { io::write_dataset(o, time_mean_diagnostics(report)); }});
    }
    if (!json_path.empty()) {
        jobs.push_back({json_path, [&](io::AtomicOutput& o) { write_json_report(o, report); }});
    }
    io::write_outputs_atomically(jobs);
}

void write_forecast_outputs_collectively(const ForecastReport& report, const std::string& json_path,
                                         const ForecastOutputPaths& paths, std::ostream& table,
                                         const ShardedGrid& grid) {
    const Communicator& world = grid.mesh().world();
    if (world.rank() == 0) {
        print_table(report, table);
    }
    const Box& box = grid.box();
    const bool writes_maps = grid.mesh().coords().data == 0;
    const MapPart part{{writes_maps ? box.lat.begin : 0, writes_maps ? box.lon.begin : 0},
                       {writes_maps ? box.lat.size() : 0, writes_maps ? box.lon.size() : 0}};
    const auto collectively = [&world](const std::string& path, io::Dataset dataset) {
        return io::CollectiveOutputJob{
            path, {}, [&world, path, dataset = std::move(dataset)](const std::string& temporary) {
                io::write_dataset_collectively(temporary, path, dataset, world);
            }};
    };
    std::vector<io::CollectiveOutputJob> jobs;
    if (!paths.mean.empty()) {
        jobs.push_back(collectively(paths.mean, mean_diagnostics(report)));
        jobs.push_back(collectively(paths.zonal, zonal_diagnostics(report)));
        jobs.push_back(collectively(paths.time_mean, time_mean_diagnostics(report, part)));
    }
    if (!json_path.empty()) {
        jobs.push_back({json_path, [&](io::AtomicOutput& o) { write_json_report(o, report); }, {}});
    }
    io::write_outputs_atomically(jobs, world);
}

}  // namespace gridshard::cli
