// The evaluation layer's streaming aggregator on every mesh and data split: several initial conditions, an
// ensemble, a region, a climatology and NaN masks, fed pair by pair as each rank's share says, against the same
// aggregator on one rank (a 1x1x1 mesh over MPI_COMM_SELF) fed every pair, bit for bit; and the pair report (one
// initial condition, one member) against the fused evaluation called step by step.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::shard_of;

/// A forecast in float: truth (ic, lead, channels, nlat, nlon), members (ic, member, lead, channels, nlat, nlon),
/// a climatology (channels, nlat, nlon), NaN over a mask of the truth and at one member's point per sample.
struct ForecastCase {
    GridShape grid;
    ForecastExtent extent;
    std::int64_t channels = 2;
    std::vector<float> truth, members, climatology;
    std::vector<double> region_mask;  // (nlat, nlon): 1 inside the region

    [[nodiscard]] std::int64_t plane() const { return channels * grid.nlat * grid.nlon; }
    [[nodiscard]] std::vector<float> truth_at(std::int64_t ic, std::int64_t lead) const {
        const auto first = truth.begin() + (ic * extent.lead_times + lead) * plane();
        return {first, first + plane()};
    }
    /// Members [m0, m1) of (ic, lead), member slowest.
    [[nodiscard]] std::vector<float> members_at(std::int64_t ic, std::int64_t lead, Range m) const {
        std::vector<float> out;
        for (std::int64_t e = m.begin; e < m.end; ++e) {
            const auto first = members.begin() + ((ic * extent.members + e) * extent.lead_times + lead) * plane();
            out.insert(out.end(), first, first + plane());
        }
        return out;
    }
};

ForecastCase make_case(GridShape grid, ForecastExtent extent) {
    ForecastCase k{grid, extent, 2, {}, {}, {}, {}};
    std::mt19937_64 random(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    const std::int64_t plane = k.plane();
    for (std::int64_t p = 0; p < plane; ++p) {
        k.climatology.push_back(static_cast<float>(280.0 + 4.0 * std::sin(0.2 * static_cast<double>(p))));
    }
    for (std::int64_t ic = 0; ic < extent.initial_conditions; ++ic) {
        for (std::int64_t l = 0; l < extent.lead_times; ++l) {
            for (std::int64_t p = 0; p < plane; ++p) {
                const bool land = (p % grid.nlon) * 3 % 7 == 1 && p >= grid.nlat * grid.nlon;  // channel 1 only
                k.truth.push_back(
                    land ? std::nanf("")
                         : static_cast<float>(k.climatology[static_cast<std::size_t>(p)] + normal(random)));
            }
        }
    }
    for (std::int64_t ic = 0; ic < extent.initial_conditions; ++ic) {
        for (std::int64_t m = 0; m < extent.members; ++m) {
            for (std::int64_t l = 0; l < extent.lead_times; ++l) {
                const auto t = k.truth_at(ic, l);
                for (std::int64_t p = 0; p < plane; ++p) {
                    const double error = 0.2 + std::sqrt(static_cast<double>(l)) * normal(random);
                    k.members.push_back(static_cast<float>(t[static_cast<std::size_t>(p)] + error));
                }
                k.members.back() = std::nanf("");  // one member NaN at the last point
            }
        }
    }
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            k.region_mask.push_back(i < grid.nlat / 2 && j % 3 != 0 ? 1.0 : 0.0);
        }
    }
    return k;
}

/// Every score of `k` as the aggregator gives it on `mesh` with its data ranks sharing the work as `split` says
/// (`together`: one rank fed every pair, whatever the split).
VariableScores aggregate(const ProcessMesh& mesh, const ForecastCase& k, SplitRule rule, DataSplit split,
                         ReportKind report, ValidityPolicy policy, const std::vector<std::string>& keys = {},
                         std::vector<std::vector<ScoreSeries>>* lead_scores = nullptr) {
    const ShardedGrid grid(mesh, k.grid, rule);
    const Box& box = grid.box();
    std::vector<double> lat;
    for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
        lat.push_back(-80.0 + 160.0 * static_cast<double>(i) / static_cast<double>(k.grid.nlat - 1));
    }
    const AreaWeights base = cos_lat_weights(lat, k.grid.nlon, box.lat);
    AreaWeights inside{shard_of(k.region_mask, k.grid, box, 1), true};
    for (std::size_t p = 0; p < inside.values.size(); ++p) {
        inside.values[p] *= base.values[static_cast<std::size_t>(p) / static_cast<std::size_t>(box.lon.size())];
    }
    std::vector<RegionWeights> regions = {{"global", base}};
    const bool forecast = report == ReportKind::forecast;
    if (forecast) {
        regions.push_back({"north", inside});
    }
    const WorkShare work = share_work(split, k.extent, mesh.shape().data, mesh.coords().data);
    AggregatorOptions options{.report = report,
                              .summation = Summation::reproducible,
                              .policy = policy,
                              .counted_leads = {},
                              .anomaly_correlation = forecast,
                              .maps = forecast,
                              .gather_maps = true,
                              .deterministic_keys = keys};
    for (std::int64_t l = forecast ? 1 : 0; l < k.extent.lead_times; ++l) {
        options.counted_leads.push_back(l);
    }
    Aggregator aggregator(grid, {k.extent, k.channels, work}, regions, options);
    const auto climatology = shard_of(k.climatology, k.grid, box, k.channels);
    for (std::int64_t ic = work.initial_conditions.begin; ic < work.initial_conditions.end; ++ic) {
        for (std::int64_t l = work.leads.begin; l < work.leads.end; ++l) {
            const auto truth = shard_of(k.truth_at(ic, l), k.grid, box, k.channels);
            const auto members =
                shard_of(k.members_at(ic, l, work.members), k.grid, box, k.channels * work.members.size());
            aggregator.record<float>(ic, l, {truth, k.channels}, members,
                                     forecast ? std::span<const float>(climatology) : std::span<const float>());
        }
    }
    if (lead_scores != nullptr) {
        *lead_scores = aggregator.lead_scores({0, k.extent.lead_times});  // collective over data
    }
    return aggregator.finish("v");
}

void expect_same_bits(const VariableScores& got, const VariableScores& want, bool maps, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    std::int64_t compared = 0;
    const auto same = [&](double a, double b, const std::string& where) {
        ++compared;
        EXPECT_EQ(std::bit_cast<std::uint64_t>(a), std::bit_cast<std::uint64_t>(b))
            << what << " " << where << ": " << a << " against one rank's " << b;
    };
    for (std::size_t c = 0; c < got.size(); ++c) {
        ASSERT_EQ(got[c].regions.size(), want[c].regions.size()) << what;
        for (std::size_t r = 0; r < got[c].regions.size(); ++r) {
            const RegionScores& a = got[c].regions[r];
            const RegionScores& b = want[c].regions[r];
            ASSERT_EQ(a.per_lead.size(), b.per_lead.size()) << what;
            for (std::size_t s = 0; s < a.per_lead.size(); ++s) {
                for (std::size_t l = 0; l < a.per_lead[s].values.size(); ++l) {
                    same(a.per_lead[s].values[l], b.per_lead[s].values[l],
                         got[c].name + " " + a.name + " " + a.per_lead[s].score->key + " lead " + std::to_string(l));
                }
            }
            ASSERT_EQ(a.time_means.size(), b.time_means.size()) << what;
            for (std::size_t s = 0; s < a.time_means.size(); ++s) {
                same(a.time_means[s].value, b.time_means[s].value,
                     got[c].name + " " + a.name + " time mean " + a.time_means[s].score->key);
            }
        }
        ASSERT_EQ(got[c].profiles.size(), want[c].profiles.size()) << what;
        for (std::size_t p = 0; p < got[c].profiles.size(); ++p) {
            for (std::size_t i = 0; i < got[c].profiles[p].values.size(); ++i) {
                same(got[c].profiles[p].values[i], want[c].profiles[p].values[i],
                     got[c].name + " zonal " + got[c].profiles[p].score->key);
            }
        }
        if (maps && Communicator::world().rank() == 0) {
            ASSERT_EQ(got[c].bias_map.size(), want[c].bias_map.size()) << what;
            for (std::size_t i = 0; i < got[c].bias_map.size(); ++i) {
                same(got[c].bias_map[i], want[c].bias_map[i], got[c].name + " bias map");
                same(got[c].prediction_map[i], want[c].prediction_map[i], got[c].name + " prediction map");
            }
        }
    }
    EXPECT_GT(compared, 0) << what;
}

TEST(Aggregator, EveryDataSplitGivesTheBitsOfOneRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 3, 4});
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (ValidityPolicy policy : {ValidityPolicy::skip_invalid_pairs, ValidityPolicy::skip_nan}) {
            const VariableScores serial =
                aggregate(alone, k, rule, DataSplit::initial_conditions, ReportKind::forecast, policy);
            for (DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times, DataSplit::members}) {
                const VariableScores distributed = aggregate(mesh, k, rule, split, ReportKind::forecast, policy);
                expect_same_bits(distributed, serial, true,
                                 std::string("split ") + std::string(to_string(split)) + " rule " +
                                     std::string(to_string(rule)) + " policy " + std::string(to_string(policy)));
            }
        }
    }
}

TEST(Aggregator, APairIsOneInitialConditionOfOneMemberWithEveryStepCounted) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({7, 10}, {1, 1, 5});
    const VariableScores serial = aggregate(alone, k, SplitRule::div_up, DataSplit::initial_conditions,
                                            ReportKind::pair, ValidityPolicy::propagate);
    const VariableScores distributed =
        aggregate(mesh, k, SplitRule::div_up, DataSplit::lead_times, ReportKind::pair, ValidityPolicy::propagate);
    expect_same_bits(distributed, serial, false, "pair");
    // The per-step scores are the fused evaluation's own, step by step, and the time means their plain means.
    const ShardedGrid grid(alone, k.grid, SplitRule::div_up);
    std::vector<double> lat;
    for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
        lat.push_back(-80.0 + 160.0 * static_cast<double>(i) / static_cast<double>(k.grid.nlat - 1));
    }
    const AreaWeights w = cos_lat_weights(lat, k.grid.nlon, grid.box().lat);
    EvaluationOptions options{.summation = Summation::reproducible, .policy = ValidityPolicy::propagate};
    Evaluator evaluator(grid, k.channels, w.view(), options);
    const RegionScores& global = serial[0].regions[0];
    for (std::int64_t l = 0; l < k.extent.lead_times; ++l) {
        const auto t = k.truth_at(0, l);
        const auto p = k.members_at(0, l, {0, 1});
        const Scores s = evaluator.evaluate(FieldShard<float>{t, k.channels}, FieldShard<float>{p, k.channels});
        for (const ScoreSeries& series : global.per_lead) {
            EXPECT_EQ(std::bit_cast<std::uint64_t>(series.values[static_cast<std::size_t>(l)]),
                      std::bit_cast<std::uint64_t>(s[series.score->source][0]))
                << series.score->key << " step " << l;
        }
    }
    for (const ScoreValue& v : global.time_means) {
        if (v.score->family == ScoreFamily::time_mean) {
            continue;
        }
        double sum = 0.0;
        for (const ScoreSeries& series : global.per_lead) {
            if (series.score == v.score) {
                for (double x : series.values) {
                    sum += x;
                }
            }
        }
        EXPECT_EQ(std::bit_cast<std::uint64_t>(v.value),
                  std::bit_cast<std::uint64_t>(sum / static_cast<double>(k.extent.lead_times)))
            << v.score->key;
    }
}

TEST(Aggregator, LeadScoresAreTheFinishedScoresAndASubsetKeepsItsBits) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ForecastCase k = make_case({9, 14}, {3, 2, 4});
    for (DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times}) {
        std::vector<std::vector<ScoreSeries>> leads;
        const VariableScores full = aggregate(mesh, k, SplitRule::div_up, split, ReportKind::forecast,
                                              ValidityPolicy::skip_invalid_pairs, {}, &leads);
        const std::vector<std::string> keys = {"weighted_rmse", "weighted_bias"};
        const VariableScores part = aggregate(mesh, k, SplitRule::div_up, split, ReportKind::forecast,
                                              ValidityPolicy::skip_invalid_pairs, keys);
        ASSERT_EQ(leads.size(), full.size());
        for (std::size_t c = 0; c < full.size(); ++c) {
            const auto& finished = full[c].regions[0].per_lead;
            std::size_t deterministic = 0;
            for (const ScoreSeries& series : finished) {
                if (series.score->family != ScoreFamily::deterministic) {
                    continue;
                }
                ASSERT_LT(deterministic, leads[c].size());
                const ScoreSeries& early = leads[c][deterministic++];
                EXPECT_EQ(early.score, series.score);
                for (std::size_t l = 0; l < series.values.size(); ++l) {
                    EXPECT_EQ(std::bit_cast<std::uint64_t>(early.values[l]),
                              std::bit_cast<std::uint64_t>(series.values[l]))
                        << series.score->key << " lead " << l;
                }
            }
            EXPECT_EQ(deterministic, leads[c].size());
            EXPECT_GT(deterministic, keys.size());
            std::vector<std::string> kept;
            for (const ScoreSeries& series : part[c].regions[0].per_lead) {
                if (series.score->family != ScoreFamily::deterministic) {
                    continue;
                }
                kept.push_back(series.score->key);
                for (const ScoreSeries& other : finished) {
                    if (other.score == series.score) {
                        EXPECT_EQ(series.values, other.values) << series.score->key;
                    }
                }
            }
            EXPECT_EQ(kept, keys);
        }
    }
    const ShardedGrid grid(mesh, k.grid, SplitRule::div_up);
    AggregatorOptions bad;
    bad.report = ReportKind::forecast;
    bad.counted_leads = {1};
    bad.deterministic_keys = {"crps"};  // an ensemble score, not a deterministic one
    const AggregatorShape shape{k.extent, k.channels, {{0, 1}, {0, 4}, {0, 2}, DataSplit::initial_conditions}};
    const std::vector<RegionWeights> regions{
        {"global", cos_lat_weights(std::vector<double>(9, 0.0), 14, grid.box().lat)}};
    const auto build = [&] { Aggregator refused(grid, shape, regions, bad); };
    EXPECT_THROW(build(), ArgumentError);
}

}  // namespace
}  // namespace gridshard
