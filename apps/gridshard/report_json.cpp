// The table and the JSON report of `gridshard eval` (report.hpp): both iterate the scores the result carries, which
// come from the score registry.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "diagnostics_files.hpp"
#include "gridshard/core/error.hpp"
#include "report.hpp"

namespace gridshard::cli {

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
    if (const std::optional<RegionQuantiles>& q = r.quantiles) {
        out["quantiles"] = {{"target", q->truth},
                            {"prediction", q->prediction},
                            {"target_count", q->truth_count},
                            {"prediction_count", q->prediction_count}};
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

// A value as the table prints it. A NaN's sign bit is not a result: which operand's NaN an addition keeps depends on
// how the compiler ordered it, so every NaN prints as "nan" (the JSON writes null either way).
double shown(double value) {
    return std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
}

// With --quantiles, a line per channel, region and field: its quantiles, the probabilities as the header says.
void print_quantiles(const EvaluationResult& result, std::ostream& out) {
    if (!result.quantiles) {
        return;
    }
    const bool pair = result.report == ReportKind::pair;
    out << "quantiles (numpy's " << to_string(result.quantiles->method) << ") over every point and "
        << (pair ? "step" : "counted lead time") << ", q =";
    for (const double q : result.quantiles->probabilities) {
        out << " " << q;
    }
    out << ":\n";
    char cell[512];
    for (const ChannelScores& c : result.channels) {
        for (const RegionScores& r : c.regions) {
            for (const bool truth : {true, false}) {
                const char* field = truth ? "target" : "prediction";
                if (pair) {
                    std::snprintf(cell, sizeof cell, "%-12s %-10s", c.name.c_str(), field);
                } else {
                    std::snprintf(cell, sizeof cell, "%-12s %-22s %-10s", c.name.c_str(), r.name.c_str(), field);
                }
                out << cell;
                for (const double v : truth ? r.quantiles->truth : r.quantiles->prediction) {
                    std::snprintf(cell, sizeof cell, " %12.6g", shown(v));
                    out << cell;
                }
                out << "\n";
            }
        }
    }
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
                    std::snprintf(cell, sizeof cell, " %*.*g", s->table_width, s->table_digits, shown(*value));
                    out << cell;
                } else {  // a score of the globe only (the power spectra), on a region's row, or of other variables
                    std::snprintf(cell, sizeof cell, " %*s", s->table_width, "-");
                    out << cell;
                }
            }
            out << "\n";
        }
    }
    print_quantiles(result, out);
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
    if (result.quantiles) {  // each region's values: its "quantiles", one per probability
        document["quantiles"] = {{"q", result.quantiles->probabilities},
                                 {"method", std::string(to_string(result.quantiles->method))}};
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

}  // namespace gridshard::cli
