#include "report.hpp"

#include "diagnostics_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

using json = nlohmann::ordered_json;

// The scores whose validity rule is not --policy's in this result, with their rule; none under the default policy,
// whose rule (truth and prediction finite) theirs extends to every member and the climatology.
std::vector<const RegisteredScore*> fixed_policy_scores(const EvaluationResult& result) {
    std::vector<const RegisteredScore*> out;
    if (result.policy == ValidityPolicy::skip_invalid_pairs || result.channels.empty()) {
        return out;
    }
    for (const ScoreSeries& s : result.channels.front().regions.front().per_lead) {
        const bool own_differs = own_gradient_policy(result.policy) != result.policy;  // under propagate
        if (s.score->policy != PolicyRule::follows_option &&
            (s.score->policy != PolicyRule::own_gradient || own_differs)) {
            out.push_back(s.score);
        }
    }
    return out;
}

// One region's scores: a forecast's per-lead series and every time mean; a pair's per-step series, the means over
// the steps of each, and its cell statistics under their own keys beside them.
json region_json(const EvaluationResult& result, const RegionScores& r) {
    const bool pair = result.report == ReportKind::pair;
    json per_lead = json::object();
    for (const ScoreSeries& s : r.per_lead) {
        per_lead[s.score->key] = s.values;
    }
    json time_mean = json::object();
    json statistics = json::object();
    json spectrum = json::object();
    for (const ScoreValue& v : r.time_means) {
        if (v.score->family == ScoreFamily::power_spectrum) {
            spectrum[v.score->key] = v.value;
            continue;
        }
        (pair && v.score->family == ScoreFamily::time_mean ? statistics : time_mean)[v.score->key] = v.value;
    }
    json out = {{pair ? "per_time" : "per_step", per_lead}, {"time_mean", time_mean}};
    out.update(statistics);
    if (!spectrum.empty()) {
        out["power_spectrum"] = spectrum;
    }
    return out;
}

nlohmann::ordered_json json_header(const EvaluationResult& result) {
    return {
        {"gridshard", GRIDSHARD_VERSION},
        {"mesh", {{"data", result.mesh.data}, {"lat", result.mesh.lat}, {"lon", result.mesh.lon}}},
        {"split", std::string(to_string(result.split))},
        {"weights", std::string(to_string(result.weights))},
        {"summation", std::string(to_string(result.summation))},
        {"policy", std::string(to_string(result.policy))},
        {"grid", {{"nlat", result.grid.shape().nlat}, {"nlon", result.grid.shape().nlon}}},
    };
}

// Writes `document` compactly with a newline; bytes of a name that are not UTF-8 (a netCDF name is bytes) are
// replaced rather than failing the report.
void dump_json(const nlohmann::ordered_json& document, std::ostream& out) {
    out << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

// How the power spectra were formed: the transform, the fill, the rows averaged.
json spectrum_json(const EvaluationResult& result) {
    const PowerSpectrumOptions& o = *result.spectrum;
    const SpectrumSize size = spectrum_size(o.spec, result.grid.shape());
    json fill = nullptr;
    if (o.fill) {
        fill = {{"method", "smooth_flood_fill"},
                {"num_steps", o.fill->num_steps},
                {"blur_kernel_size", o.fill->blur_kernel_size},
                {"blur_sigma", o.fill->blur_sigma}};
    }
    return {{"grid", std::string(to_string(o.spec.grid))},
            {"truncation", std::string(to_string(o.spec.truncation))},
            {"lmax", size.lmax},
            {"mmax", size.mmax},
            {"convention", std::string(to_string(o.spec.convention))},
            {"fill", fill},
            {"rows", result.time_means.rows},
            {"latitude_offset_from_nodes_deg", result.spectrum_latitude_offset_deg}};
}

json forecast_json(const EvaluationResult& result) {
    const io::ForecastLayout& l = result.layout;
    const io::LeadTimes& t = result.lead_times;
    json forecast = {
        {"initial_conditions", l.initial_conditions},
        {"members", l.members},
        {"lead_times", l.lead_times},
        {"members_from", l.members_from},
        {"data_split", std::string(to_string(result.data_split))},
        {"time_means_include_initial_step", result.time_means.initial_counted},
        {"time_means_rows", result.time_means.rows},
        {"lead_time", {{"values", t.values}, {"units", t.units}}},
        {"init_time", {{"values", t.init_times}, {"units", t.init_time_units}, {"calendar", t.calendar}}},
        {"climatology", result.climatology.empty() ? json(nullptr) : json(result.climatology)},
    };
    json policies = json::object();
    for (const RegisteredScore* s : fixed_policy_scores(result)) {
        policies[s->key] = std::string(to_string(s->policy));
    }
    if (!policies.empty()) {
        forecast["score_policies"] = policies;
    }
    return forecast;
}

// The scores on the normalised fields under ACE's keys: per channel its per-lead series (mean_norm/KEY/NAME, one
// value per lead time) and its time-mean RMSE (time_mean_norm/rmse/NAME), then their channel mean.
json normalized_json(const EvaluationResult& result) {
    json scores = json::object();
    for (const ChannelScores& c : result.normalized) {
        const RegionScores& global = c.regions.front();
        for (const ScoreSeries& s : global.per_lead) {
            if (s.score->ace_normalized) {
                scores[ace_key_of(*s.score, c.name, true)] = s.values;
            }
        }
        for (const ScoreValue& v : global.time_means) {
            if (v.score->ace_normalized && v.score->family == ScoreFamily::time_mean) {
                scores[ace_key_of(*v.score, c.name, true)] = v.value;
            }
        }
    }
    for (const RegisteredScore* s : report_scores(ReportKind::forecast, {})) {
        if (s->ace_normalized && s->family == ScoreFamily::time_mean) {
            scores[ace_key_of(*s, "channel_mean", true)] = result.normalized_rmse_channel_mean;
        }
    }
    return {{"means", result.normalize_means}, {"stds", result.normalize_stds}, {"ace_keys", scores}};
}

// The table's columns: the scores of the first channel's first region that have a label, in table order.
std::vector<const RegisteredScore*> table_columns(const EvaluationResult& result) {
    std::vector<const RegisteredScore*> columns;
    if (result.channels.empty()) {
        return columns;
    }
    for (const ChannelScores& c : result.channels) {  // a family of some variables only (near-zero fractions) too
        for (const ScoreValue& v : c.regions.front().time_means) {
            if (!v.score->label.empty() && std::find(columns.begin(), columns.end(), v.score) == columns.end()) {
                columns.push_back(v.score);
            }
        }
    }
    std::stable_sort(columns.begin(), columns.end(), [](const RegisteredScore* a, const RegisteredScore* b) {
        return a->table_order < b->table_order;
    });
    return columns;
}

const double* time_mean_of(const RegionScores& r, const RegisteredScore* score) {
    for (const ScoreValue& v : r.time_means) {
        if (v.score == score) {
            return &v.value;
        }
    }
    return nullptr;
}

}  // namespace

void print_table(const EvaluationResult& result, std::ostream& out) {
    const bool pair = result.report == ReportKind::pair;
    const io::ForecastLayout& l = result.layout;
    char cell[512];
    if (pair) {
        std::snprintf(cell, sizeof cell,
                      "gridshard eval: grid %lld x %lld, %lld steps, mesh %s, split %s, weights %s, %s sums, %s\n",
                      static_cast<long long>(result.grid.shape().nlat),
                      static_cast<long long>(result.grid.shape().nlon), static_cast<long long>(l.lead_times),
                      to_string(result.mesh).c_str(), std::string(to_string(result.split)).c_str(),
                      std::string(to_string(result.weights)).c_str(), std::string(to_string(result.summation)).c_str(),
                      std::string(to_string(result.policy)).c_str());
        out << cell << "time means over the steps:\n";
    } else {
        std::snprintf(cell, sizeof cell,
                      "gridshard eval: forecast of %lld initial conditions x %lld members x %lld lead times, grid %lld "
                      "x %lld, mesh %s (data split over %s)\n",
                      static_cast<long long>(l.initial_conditions), static_cast<long long>(l.members),
                      static_cast<long long>(l.lead_times), static_cast<long long>(result.grid.shape().nlat),
                      static_cast<long long>(result.grid.shape().nlon), to_string(result.mesh).c_str(),
                      std::string(to_string(result.data_split)).c_str());
        out << cell << "time means over " << time_mean_rows_text(result) << ":\n";
        // One line per rule that is not --policy's, naming its scores.
        const std::vector<const RegisteredScore*> fixed = fixed_policy_scores(result);
        for (const PolicyRule rule : {PolicyRule::own_gradient, PolicyRule::all_finite, PolicyRule::nan_fill}) {
            std::string names;
            for (const RegisteredScore* s : fixed) {
                if (s->policy == rule) {
                    names += (names.empty() ? "" : ", ") + s->key;
                }
            }
            if (!names.empty()) {
                out << names << ": " << describe(rule) << " (" << to_string(rule) << "), not --policy "
                    << to_string(result.policy) << "\n";
            }
        }
        if (result.channels.empty()) {
            return;
        }
    }
    const std::vector<const RegisteredScore*> columns = table_columns(result);
    std::snprintf(cell, sizeof cell, pair ? "%-12s" : "%-12s %-22s", "variable", "region");
    out << cell;
    for (const RegisteredScore* s : columns) {
        std::snprintf(cell, sizeof cell, " %*s", s->table_width, s->label.c_str());
        out << cell;
    }
    out << "\n";
    for (const ChannelScores& c : result.channels) {
        for (const RegionScores& r : c.regions) {
            std::snprintf(cell, sizeof cell, pair ? "%-12s" : "%-12s %-22s", c.name.c_str(), r.name.c_str());
            out << cell;
            for (const RegisteredScore* s : columns) {
                if (const double* value = time_mean_of(r, s)) {
                    // A NaN's sign bit is not a result: which operand's NaN an addition keeps depends on how the
                    // compiler ordered it, so every NaN prints as "nan" (the JSON writes null either way).
                    const double shown = std::isnan(*value) ? std::numeric_limits<double>::quiet_NaN() : *value;
                    std::snprintf(cell, sizeof cell, " %*.*g", s->table_width, s->table_digits, shown);
                    out << cell;
                } else {  // a score of the globe only (the power spectra), on a region's row, or of other variables
                    std::snprintf(cell, sizeof cell, " %*s", s->table_width, "-");
                    out << cell;
                }
            }
            out << "\n";
        }
    }
}

void write_json(const EvaluationResult& result, std::ostream& out) {
    const bool pair = result.report == ReportKind::pair;
    json variables = json::object();
    for (const ChannelScores& c : result.channels) {
        json entry = region_json(result, c.regions.front());
        if (!pair) {
            json regions = json::object();
            for (const RegionScores& r : c.regions) {
                regions[r.name] = region_json(result, r);
            }
            entry["regions"] = regions;
        }
        variables[c.name] = entry;
    }
    json document = json_header(result);
    if (pair) {
        document["ntime"] = result.layout.lead_times;
    } else {
        document["forecast"] = forecast_json(result);
    }
    if (result.spectrum) {
        document["power_spectrum"] = spectrum_json(result);
    }
    document["variables"] = variables;
    if (!result.normalize_means.empty()) {
        document["normalized"] = normalized_json(result);
    }
    const RunTimings& timings = result.timings;
    if (!timings.names.empty()) {
        json ranks = json::array();
        const std::size_t width = timings.names.size();
        for (std::size_t r = 0; r * width < timings.per_rank.size(); ++r) {
            json one = json::object();
            for (std::size_t k = 0; k < width; ++k) {
                one[timings.names[k]] = timings.per_rank[r * width + k];
            }
            ranks.push_back(one);
        }
        document["timings"] = {{"seconds_per_rank", ranks}, {"steps_per_rank", timings.steps}};
    }
    dump_json(document, out);
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

// ACE's trend_diagnostics.nc (fme's TrendEvaluatorAggregator.get_dataset): per variable with a trend its slope
// maps per year over (source, lat, lon), source = target, prediction.
io::Dataset trend_diagnostics(const EvaluationResult& result, const MapPart& part = {}) {
    io::Dataset d = lat_lon_dataset(result, "gridshard least-squares trends per year of 365.25 days (" +
                                                time_mean_rows_text(result) + ", every sample)");
    d.dims.insert(d.dims.begin(), {"source", 2, {}, {}, false, {"target", "prediction"}});
    for (const ChannelScores& c : result.channels) {
        const std::vector<ScoreValue>& means = c.regions.front().time_means;
        if (std::none_of(means.begin(), means.end(),
                         [](const ScoreValue& v) { return v.score->family == ScoreFamily::trend; })) {
            continue;  // a variable without a trend
        }
        std::vector<double> values = c.trend_truth_map;
        values.insert(values.end(), c.trend_prediction_map.begin(), c.trend_prediction_map.end());
        std::vector<std::int64_t> start = part.start, count = part.count;
        if (!start.empty()) {
            start.insert(start.begin(), 0);
            count.insert(count.begin(), values.empty() ? 0 : 2);
        }
        d.variables.push_back({netcdf_name(c.name),
                               {"source", "lat", "lon"},
                               values,
                               {{"long_name", c.name + " linear trend"}, {"cell_methods", "time: least-squares slope"}},
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
            {"--diagnostics", histogram}};
}

OutputPaths output_paths(const std::string& json, const std::string& zonal, const std::string& folder, bool forecast,
                         bool spectrum, bool near_zero_maps, bool trend, bool video, bool annual, bool enso_index,
                         bool ipo_index, bool histogram) {
    OutputPaths paths{json, zonal, "", "", "", "", "", "", "", "", "", "", ""};
    if (!folder.empty()) {
        const std::string base = folder.back() == '/' ? folder : folder + "/";
        if (forecast) {
            paths.mean = base + "mean_diagnostics.nc";
            paths.zonal_mean = base + "zonal_mean_diagnostics.nc";
            paths.time_mean = base + "time_mean_diagnostics.nc";
        }
        if (spectrum) {
            paths.spectrum = base + "power_spectrum_diagnostics.nc";
        }
        if (forecast && near_zero_maps) {
            paths.near_zero = base + "near_zero_fraction_diagnostics.nc";
        }
        if (forecast && trend) {
            paths.trend = base + "trend_diagnostics.nc";
        }
        if (forecast && video) {
            paths.video = base + "video_diagnostics.nc";
        }
        if (forecast && annual) {
            paths.annual = base + "annual_diagnostics.nc";
        }
        if (forecast && enso_index) {
            paths.enso_index = base + "enso_index_diagnostics.nc";
        }
        if (forecast && ipo_index) {
            paths.ipo_index = base + "ipo_index_diagnostics.nc";
        }
        if (forecast && histogram) {
            paths.histogram = base + "histogram_diagnostics.nc";
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
