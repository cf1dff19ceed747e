// The tool's table and JSON report from an evaluation result carrying an extra registered score: whatever the
// result holds reaches every output, and the JSON is valid for any variable name. No MPI.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "report.hpp"

namespace gridshard::cli {
namespace {

// A score that is not in the registry: the writers must take it from the result.
const RegisteredScore& extra_score() {
    static const RegisteredScore extra{.report = ReportKind::pair,
                                       .key = "extra_score",
                                       .label = "extra",
                                       .source = &score_definition(EvaluatorScore::rmse),
                                       .table_width = 10,
                                       .table_digits = 3,
                                       .table_order = 100};
    return extra;
}

// A pair's result of one channel over two steps: every pair score of the registry, then the extra one.
EvaluationResult result_with_an_extra_score() {
    EvaluationResult result;
    result.report = ReportKind::pair;
    result.mesh = {1, 2, 2};
    result.grid.lat_deg = {-60, 0, 60};
    result.grid.lon_deg = {0, 90, 180, 270};
    result.layout.lead_times = 2;
    ChannelScores channel;
    channel.name = "odd \"name\"\\with\tcontrols";
    RegionScores region{"global", {}, {}};
    double k = 0.0;
    std::vector<const RegisteredScore*> scores = report_scores(ReportKind::pair, {});
    scores.push_back(&extra_score());
    for (const RegisteredScore* s : scores) {
        if (s->family == ScoreFamily::time_mean) {
            region.time_means.push_back({s, s->key == "rmse_of_time_mean" ? 0.1 : -0.2});
        } else if (s->family != ScoreFamily::zonal_mean) {
            region.per_lead.push_back({s, 1, {k + 0.5, k + 1.5}});
            k += 1.0;
        }
    }
    region.per_lead.back().values = {0.125, std::numeric_limits<double>::quiet_NaN()};
    for (const ScoreSeries& s : region.per_lead) {
        region.time_means.push_back({s.score, (s.values[0] + s.values[1]) / 2.0});
    }
    channel.regions.push_back(region);
    result.channels.push_back(channel);
    return result;
}

TEST(CliOutput, ARegisteredScoreReachesTheTableAndTheJson) {
    const EvaluationResult result = result_with_an_extra_score();
    std::ostringstream table;
    print_table(result, table);
    const std::string text = table.str();
    EXPECT_NE(text.find("     extra"), std::string::npos) << text;  // its label, in its width
    for (const RegisteredScore* s : table_scores(ReportKind::pair, {})) {
        EXPECT_NE(text.find(s->label), std::string::npos) << s->label;
    }

    std::ostringstream json_text;
    write_json(result, json_text);
    const auto document = nlohmann::ordered_json::parse(json_text.str());
    const auto& variable = document["variables"][result.channels[0].name];
    ASSERT_TRUE(variable["per_time"].contains("extra_score")) << json_text.str();
    EXPECT_EQ(variable["per_time"]["extra_score"][0].get<double>(), 0.125);
    EXPECT_TRUE(variable["per_time"]["extra_score"][1].is_null());  // NaN as null
    EXPECT_TRUE(variable["time_mean"]["extra_score"].is_null());    // the mean of a NaN step
    EXPECT_EQ(variable["time_mean"]["mean_truth"].get<double>(), 1.0);
    std::vector<std::string> keys;
    for (const auto& [key, value] : variable["per_time"].items()) {
        keys.push_back(key);
    }
    EXPECT_EQ(keys.back(), "extra_score");
    EXPECT_EQ(keys.size(), evaluation_scores().size() + 1);
}

TEST(CliOutput, JsonNumbersReadBackToTheSameDouble) {
    EvaluationResult result = result_with_an_extra_score();
    const double awkward = 0.1 + 0.2;  // not the double nearest 0.3
    result.channels[0].regions[0].time_means[0].value = awkward;
    std::ostringstream json_text;
    write_json(result, json_text);
    const auto document = nlohmann::ordered_json::parse(json_text.str());
    EXPECT_EQ(document["variables"][result.channels[0].name]["rmse_of_time_mean"].get<double>(), awkward);
    EXPECT_EQ(std::vector<std::string>(
                  {"gridshard", "mesh", "split", "weights", "summation", "policy", "grid", "ntime", "variables"}),
              [&] {
                  std::vector<std::string> keys;
                  for (const auto& [key, value] : document.items()) {
                      keys.push_back(key);
                  }
                  return keys;
              }());
}

TEST(ScoreRegistry, EveryForecastScoreHasOneKeyAndTheForecastTableItsColumns) {
    const std::vector<const RegisteredScore*> all =
        report_scores(ReportKind::forecast, {.ensemble = true, .anomaly_correlation = true});
    for (std::size_t a = 0; a < all.size(); ++a) {
        for (std::size_t b = a + 1; b < all.size(); ++b) {
            EXPECT_NE(all[a]->key, all[b]->key);
        }
        EXPECT_EQ(all[a]->family, family_of(all[a]->source)) << all[a]->key;
        EXPECT_EQ(all[a]->combination, combination_of(all[a]->source)) << all[a]->key;
    }
    std::vector<std::string> columns;
    for (const RegisteredScore* s :
         table_scores(ReportKind::forecast, {.ensemble = true, .anomaly_correlation = true})) {
        columns.push_back(s->label);
    }
    EXPECT_EQ(columns, (std::vector<std::string>{"rmse", "bias", "grad%", "rmse(tmean)", "bias(tmean)", "ens_rmse",
                                                 "ssr", "crps", "fair_crps", "acc"}));
    EXPECT_TRUE(report_scores(ReportKind::forecast, {}).size() < all.size());  // no ensemble, no acc
}

}  // namespace
}  // namespace gridshard::cli
