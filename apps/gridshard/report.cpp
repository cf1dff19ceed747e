#include "report.hpp"

#include "diagnostics_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "gridshard/core/error.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/parallel_io.hpp"
#include "gridshard/io/zonal_writer.hpp"

namespace gridshard::cli {

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
std::string time_mean_rows_text(const EvaluationResult& result) {
    const io::TimeMeanRows& t = result.time_means;
    const std::vector<std::int64_t>& rows = t.rows;
    std::string text;
    if (!rows.empty() && rows.back() - rows.front() + 1 == static_cast<std::int64_t>(rows.size())) {
        text = "rows " + std::to_string(rows.front()) + " to " + std::to_string(rows.back());
    } else {
        for (const std::int64_t row : rows) {
            text += (text.empty() ? "rows " : ", ") + std::to_string(row);
        }
    }
    text += " of " + std::to_string(result.layout.lead_times);
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

io::Attributes global_attributes(const std::string& title) {
    return {{"title", title}, {"source", std::string("gridshard ") + GRIDSHARD_VERSION}};
}

namespace {

io::DatasetDim forecast_step_dim(const EvaluationResult& result) {
    std::vector<double> steps;
    for (std::int64_t l = 0; l < result.layout.lead_times; ++l) {
        steps.push_back(static_cast<double>(l));
    }
    return {"forecast_step", result.layout.lead_times, steps, {{"long_name", "forecast step (0: initial condition)"}}};
}

io::DatasetDim lat_dim(const EvaluationResult& result) {
    return {"lat",
            result.grid.shape().nlat,
            result.grid.lat_deg,
            {{"standard_name", "latitude"}, {"units", "degrees_north"}, {"axis", "Y"}}};
}

io::Dataset mean_diagnostics(const EvaluationResult& result) {
    io::Dataset d;
    d.dims.push_back(forecast_step_dim(result));
    d.global_attributes = global_attributes("gridshard forecast scores per lead time");
    // The variables and regions, so that a reader need not parse the names "SCORE-VARIABLE[-REGION]".
    std::string variables;
    for (const ChannelScores& c : result.channels) {
        variables += (variables.empty() ? "" : " ") + netcdf_name(c.name);
    }
    std::string regions;
    if (!result.channels.empty()) {
        for (const RegionScores& r : result.channels.front().regions) {
            regions += (regions.empty() ? "" : " ") + r.name;
        }
    }
    d.global_attributes.emplace_back("variables", variables);
    d.global_attributes.emplace_back("regions", regions);
    if (result.lead_times.values.size() == static_cast<std::size_t>(result.layout.lead_times)) {
        d.variables.push_back({"lead_time",
                               {"forecast_step"},
                               result.lead_times.values,
                               {{"long_name", "lead time"}, {"units", result.lead_times.units}}});
    }
    for (const ChannelScores& c : result.channels) {
        for (const RegionScores& r : c.regions) {
            for (const ScoreSeries& s : r.per_lead) {
                const std::string& score = s.score->key;
                const std::vector<double>& series = s.values;
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

io::Dataset zonal_diagnostics(const EvaluationResult& result) {
    io::Dataset d;
    d.dims = {forecast_step_dim(result), lat_dim(result)};
    d.global_attributes = global_attributes("gridshard zonal means per lead time, averaged over samples");
    for (const ChannelScores& c : result.channels) {
        const std::string name = netcdf_name(c.name);
        d.variables.push_back({"gen-" + name,
                               {"forecast_step", "lat"},
                               c.profile("gen")->values,
                               {{"long_name", c.name + " zonal mean, generated"}, {"cell_methods", "lon: mean"}}});
        d.variables.push_back(
            {"error-" + name,
             {"forecast_step", "lat"},
             c.profile("error")->values,
             {{"long_name", c.name + " zonal-mean error (generated - target)"}, {"cell_methods", "lon: mean"}}});
    }
    return d;
}

// The maps' part each rank writes collectively: (lat, lon) start and count; none for a whole map.
struct MapPart {
    std::vector<std::int64_t> start;
    std::vector<std::int64_t> count;
};

io::Dataset lat_lon_dataset(const EvaluationResult& result, const std::string& title) {
    io::Dataset d;
    d.dims = {lat_dim(result),
              {"lon",
               result.grid.shape().nlon,
               result.grid.lon_deg,
               {{"standard_name", "longitude"}, {"units", "degrees_east"}, {"axis", "X"}}}};
    d.global_attributes = global_attributes(title);
    return d;
}

io::Dataset time_mean_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    io::Dataset d = lat_lon_dataset(result, "gridshard time-mean maps (" + time_mean_rows_text(result) + ")");
    for (const ChannelScores& c : result.channels) {
        const std::string name = netcdf_name(c.name);
        const auto map = [&](const std::string& prefix, const std::vector<double>& values, const std::string& what) {
            d.variables.push_back(
                {prefix + name, {"lat", "lon"}, values, {{"long_name", c.name + what}}, part.start, part.count});
        };
        map("gen_map-", c.prediction_map, " time mean, generated");
        map("bias_map-", c.bias_map, " time-mean bias (generated - target)");
    }
    return d;
}

// ACE's near_zero_fraction_diagnostics.nc (fme's NearZeroFractionAggregator.get_dataset): per variable with
// near-zero fractions, the per-cell fractions of the prediction and of the truth at or below its eps, and their
// difference.
io::Dataset near_zero_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    io::Dataset d = lat_lon_dataset(
        result, "gridshard near-zero fractions per cell (" + time_mean_rows_text(result) + ", every sample)");
    for (const ChannelScores& c : result.channels) {
        const std::vector<ScoreValue>& means = c.regions.front().time_means;
        if (std::none_of(means.begin(), means.end(),
                         [](const ScoreValue& v) { return v.score->family == ScoreFamily::near_zero_fraction; })) {
            continue;  // a variable without near-zero fractions
        }
        std::vector<double> error(c.near_zero_prediction_map.size());
        for (std::size_t k = 0; k < error.size(); ++k) {
            error[k] = c.near_zero_prediction_map[k] - c.near_zero_truth_map[k];
        }
        const std::string name = netcdf_name(c.name);
        const auto map = [&](const std::string& prefix, const std::vector<double>& values, const std::string& what) {
            d.variables.push_back({prefix + name,
                                   {"lat", "lon"},
                                   values,
                                   {{"long_name", "fraction of " + c.name + what + " at or below eps"}},
                                   part.start,
                                   part.count});
        };
        map("gen_map-", c.near_zero_prediction_map, ", generated,");
        map("target_map-", c.near_zero_truth_map, ", target,");
        map("error_map-", error, " (generated - target)");
    }
    return d;
}

// Per variable with scores of `family` its maps of the truth and of the prediction over (source = target, prediction;
// lat, lon), ACE's layout of its trend and ENSO coefficient files, with `attributes` of each.
io::Dataset source_maps(const EvaluationResult& result, const std::string& title, ScoreFamily family,
                        std::vector<double> ChannelScores::*truth, std::vector<double> ChannelScores::*prediction,
                        const std::function<io::Attributes(const ChannelScores&)>& attributes, const MapPart& part) {
    io::Dataset d = lat_lon_dataset(result, title);
    d.dims.insert(d.dims.begin(), {"source", 2, {}, {}, false, {"target", "prediction"}});
    for (const ChannelScores& c : result.channels) {
        const std::vector<ScoreValue>& means = c.regions.front().time_means;
        if (std::none_of(means.begin(), means.end(),
                         [family](const ScoreValue& v) { return v.score->family == family; })) {
            continue;  // a variable without the family
        }
        std::vector<double> values = c.*truth;
        values.insert(values.end(), (c.*prediction).begin(), (c.*prediction).end());
        std::vector<std::int64_t> start = part.start, count = part.count;
        if (!start.empty()) {
            start.insert(start.begin(), 0);
            count.insert(count.begin(), values.empty() ? 0 : 2);
        }
        d.variables.push_back({netcdf_name(c.name), {"source", "lat", "lon"}, values, attributes(c), start, count});
    }
    return d;
}

// ACE's trend_diagnostics.nc (fme's TrendEvaluatorAggregator.get_dataset): per variable with a trend its slope
// maps per year.
io::Dataset trend_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    return source_maps(
        result,
        "gridshard least-squares trends per year of 365.25 days (" + time_mean_rows_text(result) + ", every sample)",
        ScoreFamily::trend, &ChannelScores::trend_truth_map, &ChannelScores::trend_prediction_map,
        [](const ChannelScores& c) {
            return io::Attributes{{"long_name", c.name + " linear trend"},
                                  {"cell_methods", "time: least-squares slope"}};
        },
        part);
}

// ACE's enso_coefficient_diagnostics.nc (fme's EnsoCoefficientEvaluatorAggregator.get_dataset): per variable its
// regression coefficient maps, with ACE's attributes where it knows no units.
io::Dataset enso_coefficient_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    return source_maps(
        result, "gridshard regression coefficients with the reference index (" + time_mean_rows_text(result) + ")",
        ScoreFamily::index_regression, &ChannelScores::index_regression_truth_map,
        &ChannelScores::index_regression_prediction_map,
        [](const ChannelScores& c) {
            return io::Attributes{{"long_name", c.name + " regression coefficient with Nino3.4 index"},
                                  {"units", "unknown units / K"}};
        },
        part);
}

// gridshard's seasonal_diagnostics.nc (ACE's seasonal metric writes no file, it logs images of these maps): per
// variable with seasonal means its mean maps per season over (source = target, prediction; season = DJF, MAM, JJA, SON;
// lat, lon).
io::Dataset seasonal_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    io::Dataset d = lat_lon_dataset(result, "gridshard seasonal mean maps (" + time_mean_rows_text(result) +
                                                ", every sample, the seasons of the valid times)");
    d.dims.insert(d.dims.begin(), {"season", 4, {}, {}, false, {"DJF", "MAM", "JJA", "SON"}});
    d.dims.insert(d.dims.begin(), {"source", 2, {}, {}, false, {"target", "prediction"}});
    for (const ChannelScores& c : result.channels) {
        if (!c.has_seasonal) {
            continue;  // a variable without seasonal means
        }
        std::vector<double> values = c.seasonal_truth;
        values.insert(values.end(), c.seasonal_prediction.begin(), c.seasonal_prediction.end());
        std::vector<std::int64_t> start = part.start, count = part.count;
        if (!start.empty()) {
            start.insert(start.begin(), {0, 0});
            count.insert(count.begin(), {values.empty() ? 0 : 2, values.empty() ? 0 : 4});
        }
        d.variables.push_back(
            {netcdf_name(c.name),
             {"source", "season", "lat", "lon"},
             values,
             {{"long_name", c.name + " seasonal mean"}, {"cell_methods", "time: mean within seasons"}},
             start,
             count});
    }
    return d;
}

// One of ACE's extended video maps, `values` per lead time over (timestep, lat, lon), into `d` (this rank's `part`).
void add_video_map(io::Dataset& d, const std::string& name, const std::vector<double>& values,
                   const std::string& long_name, std::int64_t leads, const MapPart& part) {
    std::vector<std::int64_t> start = part.start, count = part.count;
    if (!start.empty()) {
        start.insert(start.begin(), 0);
        count.insert(count.begin(), values.empty() ? 0 : leads);
    }
    d.variables.push_back(
        {netcdf_name(name), {"timestep", "lat", "lon"}, values, {{"long_name", long_name}}, start, count});
}

// ACE's video_diagnostics.nc (fme's VideoAggregator.get_dataset): per variable with a video its mean maps per lead
// time over (source, timestep, lat, lon), source = prediction, target; with its extended videos, after each its bias
// and after them all its RMSE, least and greatest errors and variance ratios over (timestep, lat, lon), ACE's names
// and long names.
io::Dataset video_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    io::Dataset d = lat_lon_dataset(result, "gridshard mean maps per lead time over every sample");
    d.dims.insert(d.dims.begin(), forecast_step_dim(result));
    d.dims.front().name = "timestep";
    d.dims.insert(d.dims.begin(), {"source", 2, {}, {}, false, {"prediction", "target"}});
    const std::int64_t leads = result.layout.lead_times;
    for (const ChannelScores& c : result.channels) {
        if (!c.has_video) {
            continue;  // a variable without a video
        }
        std::vector<double> values = c.video_prediction;
        values.insert(values.end(), c.video_truth.begin(), c.video_truth.end());
        std::vector<std::int64_t> start = part.start, count = part.count;
        if (!start.empty()) {
            start.insert(start.begin(), {0, 0});
            count.insert(count.begin(), {values.empty() ? 0 : 2, values.empty() ? 0 : leads});
        }
        d.variables.push_back({netcdf_name(c.name),
                               {"source", "timestep", "lat", "lon"},
                               values,
                               {{"long_name", "ensemble mean of " + c.name}},
                               start,
                               count});
        if (c.has_extended_video) {
            add_video_map(d, "bias_" + c.name, c.video_bias, "bias of " + c.name, leads, part);
        }
    }
    using Map = std::vector<double> ChannelScores::*;
    const std::tuple<const char*, Map, const char*, const char*> extended[] = {
        {"rmse_", &ChannelScores::video_rmse, "root mean squared error of ", ""},
        {"min_err_", &ChannelScores::video_min_error, "min error of ", " across ensemble members"},
        {"max_err_", &ChannelScores::video_max_error, "max error of ", " across ensemble members"},
        {"gen_var_", &ChannelScores::video_variance_ratio, "prediction variance of ",
         " as fraction of target variance"}};
    for (const auto& [label, field, before, after] : extended) {
        for (const ChannelScores& c : result.channels) {
            if (c.has_extended_video) {
                add_video_map(d, label + c.name, c.*field, before + c.name + after, leads, part);
            }
        }
    }
    return d;
}

// ACE's power_spectrum_diagnostics.nc: per channel its mean spectra over (source, wavenumber), source = prediction,
// target (fme's PairedSphericalPowerSpectrumAggregator.get_dataset).
io::Dataset spectrum_diagnostics(const EvaluationResult& result) {
    io::Dataset d;
    const std::int64_t degrees = result.spectrum_degrees;
    std::vector<double> wavenumbers(static_cast<std::size_t>(degrees));
    for (std::int64_t l = 0; l < degrees; ++l) {
        wavenumbers[static_cast<std::size_t>(l)] = static_cast<double>(l);
    }
    d.dims = {{"source", 2, {}, {}, false, {"prediction", "target"}},
              {"wavenumber", degrees, wavenumbers, {{"long_name", "total wavenumber (spherical harmonic degree)"}}}};
    d.global_attributes =
        global_attributes("gridshard mean spherical power spectra (" + time_mean_rows_text(result) + ")");
    for (const ChannelScores& c : result.channels) {
        std::vector<double> values;
        for (const char* key : {"prediction", "target"}) {
            for (const ScoreSeries& s : c.spectra) {
                if (s.score->key == key) {
                    values.insert(values.end(), s.values.begin(), s.values.end());
                }
            }
        }
        d.variables.push_back({netcdf_name(c.name),
                               {"source", "wavenumber"},
                               values,
                               {{"long_name", "spherical power spectrum of " + c.name}, {"units", "unknown_units"}}});
    }
    return d;
}

// The --zonal file of a pair: per channel its zonal means of the truth and the prediction over (time, lat).
io::Dataset zonal_file(const std::string& path, const EvaluationResult& result) {
    std::vector<io::ZonalVariable> variables;
    for (const ChannelScores& c : result.channels) {
        for (const char* key : {"truth", "pred"}) {
            const std::string name = c.name + "_" + key;
            variables.push_back({name, c.profile(key)->values, "", "zonal mean of " + name});
        }
    }
    return io::zonal_means_dataset(path, result.grid, result.grid.ntime, variables);
}

void write_json_report(io::AtomicOutput& output, const EvaluationResult& result) {
    std::ostringstream text;
    write_json(result, text);
    output.write(text.str());
}

}  // namespace

std::vector<io::NamedPath> OutputPaths::named() const {
    return {{"--json", json, true},        {"--zonal", zonal},
            {"--diagnostics", mean},       {"--diagnostics", zonal_mean},
            {"--diagnostics", time_mean},  {"--diagnostics", spectrum},
            {"--diagnostics", near_zero},  {"--diagnostics", trend},
            {"--diagnostics", video},      {"--diagnostics", annual},
            {"--diagnostics", enso_index}, {"--diagnostics", ipo_index},
            {"--diagnostics", histogram},  {"--diagnostics", enso_coefficient},
            {"--diagnostics", seasonal}};
}

OutputPaths output_paths(const std::string& json, const std::string& zonal, const std::string& folder,
                         const DiagnosticsFiles& files) {
    OutputPaths paths;
    paths.json = json;
    paths.zonal = zonal;
    if (folder.empty()) {
        return paths;
    }
    const std::string base = folder.back() == '/' ? folder : folder + "/";
    const bool forecast = files.forecast;
    const std::tuple<bool, std::string OutputPaths::*, const char*> chosen[] = {
        {forecast, &OutputPaths::mean, "mean_diagnostics.nc"},
        {forecast, &OutputPaths::zonal_mean, "zonal_mean_diagnostics.nc"},
        {forecast, &OutputPaths::time_mean, "time_mean_diagnostics.nc"},
        {files.spectrum, &OutputPaths::spectrum, "power_spectrum_diagnostics.nc"},
        {forecast && files.near_zero_maps, &OutputPaths::near_zero, "near_zero_fraction_diagnostics.nc"},
        {forecast && files.trend, &OutputPaths::trend, "trend_diagnostics.nc"},
        {forecast && files.video, &OutputPaths::video, "video_diagnostics.nc"},
        {forecast && files.annual, &OutputPaths::annual, "annual_diagnostics.nc"},
        {forecast && files.seasonal, &OutputPaths::seasonal, "seasonal_diagnostics.nc"},
        {forecast && files.enso_index, &OutputPaths::enso_index, "enso_index_diagnostics.nc"},
        {forecast && files.ipo_index, &OutputPaths::ipo_index, "ipo_index_diagnostics.nc"},
        {forecast && files.histogram, &OutputPaths::histogram, "histogram_diagnostics.nc"},
        {forecast && files.enso_coefficient, &OutputPaths::enso_coefficient, "enso_coefficient_diagnostics.nc"}};
    for (const auto& [on, path, name] : chosen) {
        if (on) {
            paths.*path = base + name;
        }
    }
    return paths;
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

void write_outputs(const EvaluationResult& result, const OutputPaths& paths, std::ostream& table) {
    print_table(result, table);
    std::vector<io::OutputJob> jobs;
    if (!paths.zonal.empty()) {
        jobs.push_back({paths.zonal, [&](io::AtomicOutput& o) { io::write_dataset(o, zonal_file(o.path(), result)); }});
    }
    if (!paths.mean.empty()) {
        jobs.push_back({paths.mean, [&](io::AtomicOutput& o) { io::write_dataset(o, mean_diagnostics(result)); }});
        jobs.push_back(
            {paths.zonal_mean, [&](io::AtomicOutput& o) { io::write_dataset(o, zonal_diagnostics(result)); }});
        jobs.push_back(
            {paths.time_mean, [&](io::AtomicOutput& o) { io::write_dataset(o, time_mean_diagnostics(result)); }});
    }
    if (!paths.spectrum.empty()) {
        jobs.push_back(
            {paths.spectrum, [&](io::AtomicOutput& o) { io::write_dataset(o, spectrum_diagnostics(result)); }});
    }
    if (!paths.near_zero.empty()) {
        jobs.push_back(
            {paths.near_zero, [&](io::AtomicOutput& o) { io::write_dataset(o, near_zero_diagnostics(result)); }});
    }
    if (!paths.trend.empty()) {
        jobs.push_back({paths.trend, [&](io::AtomicOutput& o) { io::write_dataset(o, trend_diagnostics(result)); }});
    }
    if (!paths.video.empty()) {
        jobs.push_back({paths.video, [&](io::AtomicOutput& o) { io::write_dataset(o, video_diagnostics(result)); }});
    }
    if (!paths.annual.empty()) {
        jobs.push_back({paths.annual, [&](io::AtomicOutput& o) { io::write_dataset(o, annual_diagnostics(result)); }});
    }
    if (!paths.enso_index.empty()) {
        jobs.push_back(
            {paths.enso_index, [&](io::AtomicOutput& o) { io::write_dataset(o, enso_index_diagnostics(result)); }});
    }
    if (!paths.ipo_index.empty()) {
        jobs.push_back(
            {paths.ipo_index, [&](io::AtomicOutput& o) { io::write_dataset(o, ipo_index_diagnostics(result)); }});
    }
    if (!paths.histogram.empty()) {
        jobs.push_back(
            {paths.histogram, [&](io::AtomicOutput& o) { io::write_dataset(o, histogram_diagnostics(result)); }});
    }
    if (!paths.seasonal.empty()) {
        jobs.push_back(
            {paths.seasonal, [&](io::AtomicOutput& o) { io::write_dataset(o, seasonal_diagnostics(result)); }});
    }
    if (!paths.enso_coefficient.empty()) {
        jobs.push_back({paths.enso_coefficient,
                        [&](io::AtomicOutput& o) { io::write_dataset(o, enso_coefficient_diagnostics(result)); }});
    }
    if (!paths.json.empty()) {
        jobs.push_back({paths.json, [&](io::AtomicOutput& o) { write_json_report(o, result); }});
    }
    io::write_outputs_atomically(jobs);
}

void write_outputs_collectively(const EvaluationResult& result, const OutputPaths& paths, std::ostream& table) {
    const ShardedGrid& grid = *result.sharded;
    const Communicator& world = grid.mesh().world();
    if (world.rank() == 0) {
        print_table(result, table);
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
    if (!paths.zonal.empty()) {
        jobs.push_back(collectively(paths.zonal, zonal_file(paths.zonal, result)));
    }
    if (!paths.mean.empty()) {
        jobs.push_back(collectively(paths.mean, mean_diagnostics(result)));
        jobs.push_back(collectively(paths.zonal_mean, zonal_diagnostics(result)));
        jobs.push_back(collectively(paths.time_mean, time_mean_diagnostics(result, part)));
    }
    if (!paths.spectrum.empty()) {
        jobs.push_back(collectively(paths.spectrum, spectrum_diagnostics(result)));
    }
    if (!paths.near_zero.empty()) {
        jobs.push_back(collectively(paths.near_zero, near_zero_diagnostics(result, part)));
    }
    if (!paths.trend.empty()) {
        jobs.push_back(collectively(paths.trend, trend_diagnostics(result, part)));
    }
    if (!paths.video.empty()) {
        jobs.push_back(collectively(paths.video, video_diagnostics(result, part)));
    }
    if (!paths.enso_coefficient.empty()) {
        jobs.push_back(collectively(paths.enso_coefficient, enso_coefficient_diagnostics(result, part)));
    }
    if (!paths.seasonal.empty()) {
        jobs.push_back(collectively(paths.seasonal, seasonal_diagnostics(result, part)));
    }
    if (!paths.annual.empty()) {  // every rank holds the annual means, small: written whole, as the report
        jobs.push_back(
            {paths.annual, [&](io::AtomicOutput& o) { io::write_dataset(o, annual_diagnostics(result)); }, {}});
    }
    if (!paths.enso_index.empty()) {  // every rank holds the indices, small: written whole
        jobs.push_back(
            {paths.enso_index, [&](io::AtomicOutput& o) { io::write_dataset(o, enso_index_diagnostics(result)); }, {}});
    }
    if (!paths.ipo_index.empty()) {  // every rank holds the indices, small: written whole
        jobs.push_back(
            {paths.ipo_index, [&](io::AtomicOutput& o) { io::write_dataset(o, ipo_index_diagnostics(result)); }, {}});
    }
    if (!paths.histogram.empty()) {  // every rank holds the histograms, small: written whole
        jobs.push_back(
            {paths.histogram, [&](io::AtomicOutput& o) { io::write_dataset(o, histogram_diagnostics(result)); }, {}});
    }
    if (!paths.json.empty()) {
        jobs.push_back({paths.json, [&](io::AtomicOutput& o) { write_json_report(o, result); }, {}});
    }
    io::write_outputs_atomically(jobs, world);
}

}  // namespace gridshard::cli
