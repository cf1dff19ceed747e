// The tool's table and JSON report against a report with an extra registered score: whatever the registry
// holds reaches every output, and the JSON is valid for any variable name. No MPI.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "output.hpp"

namespace gridshard::cli {
namespace {

Report report_with_an_extra_score() {
    Report report{{1, 2, 2}, "balanced",          "cos_lat", "reproducible", "skip_invalid_pairs", {3, 4},
                  2,         evaluation_scores(), {}};
    report.scores.push_back({"extra_score", "extra", "a score for this test", 10, 3, {}, nullptr});
    VariableReport v;
    v.name = "odd \"name\"\\with\tcontrols";
    for (std::size_t k = 0; k < report.scores.size(); ++k) {
        v.per_time.push_back({static_cast<double>(k) + 0.5, static_cast<double>(k) + 1.5});
    }
    v.per_time.back() = {0.125, std::numeric_limits<double>::quiet_NaN()};
    v.rmse_of_time_mean = 0.1;
    v.time_and_global_mean_bias = -0.2;
    report.variables.push_back(v);
    return report;
}

TEST(CliOutput, ARegisteredScoreReachesTheTableAndTheJson) {
    const Report report = report_with_an_extra_score();
    std::ostringstream table;
    print_table(report, table);
    const std::string text = table.str();
    EXPECT_NE(text.find("     extra"), std::string::npos) << text;  // its label, in its width
    for (const ScoreDefinition& d : evaluation_scores()) {
        EXPECT_NE(text.find(d.label), std::string::npos) << d.label;
    }

    std::ostringstream json_text;
    write_json(report, json_text);
    const auto document = nlohmann::ordered_json::parse(json_text.str());
    const auto& variable = document["variables"][report.variables[0].name];
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
    Report report = report_with_an_extra_score();
    const double awkward = 0.1 + 0.2;  // not the double nearest 0.3
    report.variables[0].rmse_of_time_mean = awkward;
    std::ostringstream json_text;
    write_json(report, json_text);
    const auto document = nlohmann::ordered_json::parse(json_text.str());
    EXPECT_EQ(document["variables"][report.variables[0].name]["rmse_of_time_mean"].get<double>(), awkward);
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

}  // namespace
}  // namespace gridshard::cli
