// A score added through the registry alone (register_score: a test-only entry, no other change): every aggregator
// built afterwards forms it, the run reports it, and the tool's writers (the table, the JSON report) show it, on every
// mesh. Its definition is the Evaluator's rmse, so its values must be weighted_rmse's (forecast) and rmse's (pair)
// bit for bit.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gridshard/evaluation/evaluate.hpp"
#include "gridshard/evaluation/score_registry.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "mpi_test_support.hpp"
#include "report.hpp"

namespace gridshard {
namespace {

const ScoreSeries& series(const RegionScores& region, const std::string& key) {
    for (const ScoreSeries& s : region.per_lead) {
        if (s.score->key == key) {
            return s;
        }
    }
    throw std::runtime_error("no series '" + key + "'");
}

std::uint64_t bits(double value) {
    return std::bit_cast<std::uint64_t>(value);
}

// The registry's test-only entries, registered once per process (every rank alike).
void register_test_entries() {
    static const bool registered = [] {
        (void)register_score({.report = ReportKind::forecast,
                              .key = "test_only_rmse",
                              .label = "t_rmse",
                              .ace_key = "mean/test_only_rmse/{var}",
                              .source = &score_definition(EvaluatorScore::rmse),
                              .table_order = 50});
        (void)register_score({.report = ReportKind::pair,
                              .key = "test_only_rmse",
                              .label = "t_rmse",
                              .source = &score_definition(EvaluatorScore::rmse)});
        return true;
    }();
    (void)registered;
}

EvaluationResult run(ReportKind report) {
    EvaluationPlan plan;
    plan.scoring.report = report;
    plan.mesh = mpitest::mesh_shape();
    const auto source =
        report == ReportKind::forecast ? io::make_builtin_forecast(19, 36, 3, 2, 4) : io::make_builtin_pair(19, 36, 3);
    return evaluate(plan, *source, Communicator::world());
}

TEST(ScoreRegistry, ATestOnlyEntryIsFormedAndReportedEverywhere) {
    register_test_entries();
    EXPECT_THROW((void)register_score({.report = ReportKind::forecast,
                                       .key = "test_only_rmse",
                                       .source = &score_definition(EvaluatorScore::bias)}),
                 ArgumentError);
    const RegisteredScore& added = registered_scores().back();
    EXPECT_EQ(added.family, ScoreFamily::deterministic);
    EXPECT_EQ(ace_key_of(*std::prev(registered_scores().end(), 2), "t2m", true), "mean_norm/test_only_rmse/t2m");

    for (const ReportKind report : {ReportKind::forecast, ReportKind::pair}) {
        const bool forecast = report == ReportKind::forecast;
        const EvaluationResult result = run(report);
        for (const ChannelScores& channel : result.channels) {
            for (const RegionScores& region : channel.regions) {
                const ScoreSeries& mine = series(region, "test_only_rmse");
                const ScoreSeries& theirs = series(region, forecast ? "weighted_rmse" : "rmse");
                ASSERT_EQ(mine.values.size(), theirs.values.size());
                for (std::size_t l = 0; l < mine.values.size(); ++l) {
                    EXPECT_EQ(bits(mine.values[l]), bits(theirs.values[l])) << channel.name << " lead " << l;
                }
            }
        }
        std::ostringstream table;
        cli::print_table(result, table);
        EXPECT_NE(table.str().find("t_rmse"), std::string::npos) << table.str();
        std::ostringstream text;
        cli::write_json(result, text);
        const auto document = nlohmann::json::parse(text.str());
        const auto& variable = document["variables"][result.channels.front().name];
        const auto& per_lead = variable[forecast ? "per_step" : "per_time"];
        ASSERT_TRUE(per_lead.contains("test_only_rmse")) << text.str();
        EXPECT_EQ(per_lead["test_only_rmse"], per_lead[forecast ? "weighted_rmse" : "rmse"]);
        EXPECT_EQ(variable["time_mean"]["test_only_rmse"], variable["time_mean"][forecast ? "weighted_rmse" : "rmse"]);
    }
}

}  // namespace
}  // namespace gridshard
