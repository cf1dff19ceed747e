// The evaluation layer's streaming aggregator on every mesh and data split: several initial conditions, an
// ensemble, a region, a climatology and NaN masks, fed pair by pair as each rank's share says, against the same
// aggregator on one rank (a 1x1x1 mesh over MPI_COMM_SELF) fed every pair, bit for bit; and the pair report (one
// initial condition, one member) against the fused evaluation called step by step.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/regions.hpp"
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

/// The time of (initial condition, lead) in the trend's tests: seconds since 2000-01-01, initial conditions 10 days
/// apart from 2023-02-18, leads 6 hours apart.
double pair_seconds(std::int64_t ic, std::int64_t lead) {
    return 7.3e8 + 864000.0 * static_cast<double>(ic) + 21600.0 * static_cast<double>(lead);
}

/// The valid time of (initial condition, lead) in the calendar means' tests: pair_seconds, and years and months that
/// spread the pairs over three years and every season.
ValidTime pair_time(std::int64_t ic, std::int64_t lead) {
    return {pair_seconds(ic, lead), 2000 + (ic + lead) % 3, static_cast<int>(1 + (5 * ic + 3 * lead) % 12)};
}

/// The longitudes of `grid` (degrees, from 0 eastward) and the box of the regional index in those tests.
std::vector<double> lon_of(GridShape grid) {
    std::vector<double> lon;
    for (std::int64_t j = 0; j < grid.nlon; ++j) {
        lon.push_back(360.0 * static_cast<double>(j) / static_cast<double>(grid.nlon));
    }
    return lon;
}
constexpr LatLonBox index_box{-45.0, 30.0, 100.0, 300.0, false};

/// The calendar means' timestep in those tests: 400 days, so that a year with one step is kept (more than 350 days).
constexpr double annual_timestep = 400.0 * 86400.0;

/// Every score of `k` as the aggregator gives it on `mesh` with its data ranks sharing the work as `split` says
/// (`together`: one rank fed every pair, whatever the split).
/// A reference index per (initial condition, lead) for the ENSO coefficient: a wave of each initial condition's phase,
/// initial condition 1 not covered (NaN).
std::vector<double> regression_index(const ForecastExtent& e) {
    std::vector<double> index;
    for (std::int64_t ic = 0; ic < e.initial_conditions; ++ic) {
        for (std::int64_t l = 0; l < e.lead_times; ++l) {
            index.push_back(ic == 1 ? std::nan("") : std::sin(0.9 * static_cast<double>(l) + static_cast<double>(ic)));
        }
    }
    return index;
}

/// ACE's monthly reference data of the annual R2 in those tests: 2 samples of the months of 1999 to 2003 (time t's
/// year 1999 + t / 12), its count 28 + t % 4 days, and value of (channel, sample, time, point p).
constexpr std::int64_t reference_samples = 2, reference_times = 60;
double reference_count(std::int64_t t) {
    return static_cast<double>(28 + t % 4);
}
float reference_value(std::int64_t c, std::int64_t s, std::int64_t t, std::int64_t p) {
    return static_cast<float>(280.0 + 3.0 * static_cast<double>(c) + 0.7 * std::sin(0.37 * static_cast<double>(t + s)) +
                              0.05 * static_cast<double>(p % 17));
}

/// The windows of lead times the aggregator's histograms are fed in: ACE's record_batch windows, of 2 lead times then 1
/// then the rest.
std::vector<Range> histogram_windows(std::int64_t leads) {
    std::vector<Range> out;
    for (std::int64_t first = 0, size = 2; first < leads; first += size, size = size == 2 ? 1 : leads) {
        out.push_back({first, std::min(leads, first + size)});
    }
    return out;
}

VariableScores aggregate(const ProcessMesh& mesh, const ForecastCase& k, SplitRule rule, DataSplit split,
                         ReportKind report, ValidityPolicy policy, const std::vector<std::string>& keys = {},
                         std::vector<std::vector<ScoreSeries>>* lead_scores = nullptr,
                         const std::vector<std::int64_t>& cell_leads = {},
                         const std::optional<PowerSpectrumOptions>& spectrum = {}, bool trend = false) {
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
    AggregatorOptions options{
        .report = report,
        .summation = Summation::reproducible,
        .policy = policy,
        .counted_leads = {},
        .anomaly_correlation = forecast,
        .maps = forecast,
        .gather_maps = true,
        .deterministic_keys = keys,
        .ensemble_cell_leads = cell_leads,
        .ensemble_cell_maps = !cell_leads.empty(),
        .spectrum = spectrum,
        .trend = trend,
        .video = trend,
        .extended_video = trend,
        .annual = trend ? std::optional<AnnualOptions>(AnnualOptions{annual_timestep}) : std::nullopt,
        .seasonal = trend};
    if (trend) {
        options.histogram = HistogramOptions{};
        options.index_regression = IndexRegressionOptions{regression_index(k.extent)};
    }
    for (std::int64_t l = forecast ? 1 : 0; l < k.extent.lead_times; ++l) {
        options.counted_leads.push_back(l);
    }
    if (trend) {  // ACE's regional index over index_box, its weights ACE's
        options.regional_index =
            RegionalIndexOptions{ace_regional_weights(base.view(), lat, lon_of(k.grid), box, index_box), 3};
    }
    Aggregator aggregator(grid, {k.extent, k.channels, work}, regions, options);
    if (trend) {  // ACE's monthly reference data of the annual R2, this rank's box
        std::vector<float> values;
        std::vector<double> counts;
        std::vector<std::int64_t> years;
        for (std::int64_t c = 0; c < k.channels; ++c) {
            for (std::int64_t s = 0; s < reference_samples; ++s) {
                for (std::int64_t t = 0; t < reference_times; ++t) {
                    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                            values.push_back(reference_value(c, s, t, i * k.grid.nlon + j));
                        }
                    }
                }
            }
        }
        for (std::int64_t s = 0; s < reference_samples; ++s) {
            for (std::int64_t t = 0; t < reference_times; ++t) {
                counts.push_back(reference_count(t));
            }
        }
        for (std::int64_t t = 0; t < reference_times; ++t) {
            years.push_back(1999 + t / 12);
        }
        aggregator.set_annual_reference<float>(values, reference_samples, counts, years);
    }
    for (std::int64_t ic = 0; ic < k.extent.initial_conditions && trend; ++ic) {
        for (std::int64_t l = 0; l < k.extent.lead_times; ++l) {
            aggregator.record_time(ic, l, pair_time(ic, l));
        }
    }
    const auto climatology = shard_of(k.climatology, k.grid, box, k.channels);
    // ACE's windows of lead times (histogram_windows), each ended on every rank, its pairs given again while the
    // histograms ask
    for (const Range window : histogram_windows(k.extent.lead_times)) {
        const auto each_pair = [&](const auto& take) {
            for (std::int64_t ic = work.initial_conditions.begin; ic < work.initial_conditions.end; ++ic) {
                for (std::int64_t l = std::max(work.leads.begin, window.begin);
                     l < std::min(work.leads.end, window.end); ++l) {
                    const auto truth = shard_of(k.truth_at(ic, l), k.grid, box, k.channels);
                    const auto members =
                        shard_of(k.members_at(ic, l, work.members), k.grid, box, k.channels * work.members.size());
                    take(ic, l, truth, members);
                }
            }
        };
        each_pair(
            [&](std::int64_t ic, std::int64_t l, const std::vector<float>& truth, const std::vector<float>& members) {
                aggregator.record<float>(ic, l, {truth, k.channels}, members,
                                         forecast ? std::span<const float>(climatology) : std::span<const float>());
            });
        while (aggregator.end_histogram_window()) {
            each_pair([&](std::int64_t ic, std::int64_t l, const std::vector<float>& truth,
                          const std::vector<float>& members) {
                aggregator.replay_histogram<float>(ic, l, {truth, k.channels}, members);
            });
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
            ASSERT_EQ(a.at_leads.size(), b.at_leads.size()) << what;
            for (std::size_t s = 0; s < a.at_leads.size(); ++s) {
                EXPECT_EQ(a.at_leads[s].score, b.at_leads[s].score) << what;
                EXPECT_EQ(a.at_leads[s].lead, b.at_leads[s].lead) << what;
                same(a.at_leads[s].value, b.at_leads[s].value,
                     got[c].name + " " + a.name + " " + a.at_leads[s].score->key + " at lead " +
                         std::to_string(a.at_leads[s].lead));
            }
            ASSERT_EQ(a.time_means.size(), b.time_means.size()) << what;
            for (std::size_t s = 0; s < a.time_means.size(); ++s) {
                same(a.time_means[s].value, b.time_means[s].value,
                     got[c].name + " " + a.name + " time mean " + a.time_means[s].score->key);
            }
        }
        ASSERT_EQ(got[c].index_prediction.has_value(), want[c].index_prediction.has_value()) << what;
        if (got[c].index_prediction) {
            for (std::size_t i = 0; i < got[c].index_prediction->values.size(); ++i) {
                same(got[c].index_prediction->values[i], want[c].index_prediction->values[i], got[c].name + " index");
                same(got[c].index_truth->values[i], want[c].index_truth->values[i], got[c].name + " truth's index");
            }
        }
        ASSERT_EQ(got[c].annual.has_value(), want[c].annual.has_value()) << what;
        if (got[c].annual) {
            EXPECT_EQ(got[c].annual->years, want[c].annual->years) << what;
            ASSERT_EQ(got[c].annual->prediction.size(), want[c].annual->prediction.size()) << what;
            for (std::size_t i = 0; i < got[c].annual->prediction.size(); ++i) {
                same(got[c].annual->prediction[i], want[c].annual->prediction[i], got[c].name + " annual mean");
                same(got[c].annual->truth[i], want[c].annual->truth[i], got[c].name + " truth's annual mean");
                same(got[c].annual->counts[i], want[c].annual->counts[i], got[c].name + " annual counts");
            }
        }
        ASSERT_EQ(got[c].histograms.has_value(), want[c].histograms.has_value()) << what;
        if (got[c].histograms) {
            const ChannelHistograms& a = *got[c].histograms;
            const ChannelHistograms& b = *want[c].histograms;
            EXPECT_EQ(a.truth_counts, b.truth_counts) << what;
            EXPECT_EQ(a.prediction_counts, b.prediction_counts) << what;
            EXPECT_EQ(a.truth_windows_left_out, b.truth_windows_left_out) << what;
            EXPECT_EQ(a.prediction_windows_left_out, b.prediction_windows_left_out) << what;
            ASSERT_EQ(a.truth_edges.size(), b.truth_edges.size()) << what;
            ASSERT_EQ(a.prediction_edges.size(), b.prediction_edges.size()) << what;
            for (std::size_t i = 0; i < a.truth_edges.size(); ++i) {
                same(a.truth_edges[i], b.truth_edges[i], got[c].name + " truth's histogram edge");
            }
            for (std::size_t i = 0; i < a.prediction_edges.size(); ++i) {
                same(a.prediction_edges[i], b.prediction_edges[i], got[c].name + " histogram edge");
            }
        }
        ASSERT_EQ(got[c].spectra.size(), want[c].spectra.size()) << what;
        for (std::size_t p = 0; p < got[c].spectra.size(); ++p) {
            for (std::size_t i = 0; i < got[c].spectra[p].values.size(); ++i) {
                same(got[c].spectra[p].values[i], want[c].spectra[p].values[i],
                     got[c].name + " spectrum " + got[c].spectra[p].score->key);
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
            ASSERT_EQ(got[c].cell_maps.size(), want[c].cell_maps.size()) << what;
            for (std::size_t m = 0; m < got[c].cell_maps.size(); ++m) {
                ASSERT_EQ(got[c].cell_maps[m].values.size(), want[c].cell_maps[m].values.size()) << what;
                for (std::size_t i = 0; i < got[c].cell_maps[m].values.size(); ++i) {
                    same(got[c].cell_maps[m].values[i], want[c].cell_maps[m].values[i],
                         got[c].name + " map of " + got[c].cell_maps[m].score->key);
                }
            }
            for (auto [field, label] : {std::pair{&ChannelScores::video_prediction, "video"},
                                        std::pair{&ChannelScores::video_truth, "truth's video"},
                                        std::pair{&ChannelScores::video_bias, "video's bias"},
                                        std::pair{&ChannelScores::video_rmse, "video's RMSE"},
                                        std::pair{&ChannelScores::video_min_error, "video's least error"},
                                        std::pair{&ChannelScores::video_max_error, "video's greatest error"},
                                        std::pair{&ChannelScores::video_variance_ratio, "video's variance ratio"}}) {
                ASSERT_EQ((got[c].*field).size(), (want[c].*field).size()) << what << " " << label;
                for (std::size_t i = 0; i < (got[c].*field).size(); ++i) {
                    same((got[c].*field)[i], (want[c].*field)[i], got[c].name + " " + label);
                }
            }
            ASSERT_EQ(got[c].trend_prediction_map.size(), want[c].trend_prediction_map.size()) << what;
            for (std::size_t i = 0; i < got[c].trend_prediction_map.size(); ++i) {
                same(got[c].trend_prediction_map[i], want[c].trend_prediction_map[i], got[c].name + " trend map");
                same(got[c].trend_truth_map[i], want[c].trend_truth_map[i], got[c].name + " truth's trend map");
            }
            ASSERT_EQ(got[c].index_regression_prediction_map.size(), want[c].index_regression_prediction_map.size());
            for (std::size_t i = 0; i < got[c].index_regression_prediction_map.size(); ++i) {
                same(got[c].index_regression_prediction_map[i], want[c].index_regression_prediction_map[i],
                     got[c].name + " ENSO coefficient map");
                same(got[c].index_regression_truth_map[i], want[c].index_regression_truth_map[i],
                     got[c].name + " truth's ENSO coefficient map");
            }
            ASSERT_EQ(got[c].seasonal_prediction.size(), want[c].seasonal_prediction.size()) << what;
            for (std::size_t i = 0; i < got[c].seasonal_prediction.size(); ++i) {
                same(got[c].seasonal_prediction[i], want[c].seasonal_prediction[i], got[c].name + " seasonal map");
                same(got[c].seasonal_truth[i], want[c].seasonal_truth[i], got[c].name + " truth's seasonal map");
            }
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

// ACE's trend and video: at every data split the bits of one rank, and on one rank per cell the least-squares slope
// per year of the counted values against their times (a two-pass long double reference), NaN where a value is
// missing, the RMSE of the slopes' difference over the cells where both are finite, and per lead time the mean maps.
TEST(Aggregator, TrendsAreTheLeastSquaresSlopesAndTheBitsOfOneRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 2, 4});
    const VariableScores serial =
        aggregate(alone, k, SplitRule::balanced, DataSplit::initial_conditions, ReportKind::forecast,
                  ValidityPolicy::skip_invalid_pairs, {}, nullptr, {}, {}, true);
    for (DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times, DataSplit::members}) {
        const VariableScores distributed = aggregate(mesh, k, SplitRule::div_up, split, ReportKind::forecast,
                                                     ValidityPolicy::skip_invalid_pairs, {}, nullptr, {}, {}, true);
        expect_same_bits(distributed, serial, true, std::string("trend, split ") + std::string(to_string(split)));
    }
    const std::int64_t area = k.grid.nlat * k.grid.nlon;
    std::int64_t finite = 0;
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const ChannelScores& got = serial[static_cast<std::size_t>(c)];
        ASSERT_EQ(got.trend_prediction_map.size(), static_cast<std::size_t>(area));
        for (std::int64_t p = 0; p < area; ++p) {
            for (const bool prediction : {true, false}) {
                std::vector<std::pair<long double, long double>> points;  // (t, y)
                for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                    for (std::int64_t l = 1; l < k.extent.lead_times; ++l) {  // lead 0 is not counted
                        const std::vector<float> values =
                            prediction ? k.members_at(ic, l, {0, k.extent.members}) : k.truth_at(ic, l);
                        for (std::size_t m = 0; m < values.size() / static_cast<std::size_t>(k.plane()); ++m) {
                            points.emplace_back(pair_seconds(ic, l), values[m * static_cast<std::size_t>(k.plane()) +
                                                                            static_cast<std::size_t>(c * area + p)]);
                        }
                    }
                }
                long double t_mean = 0, y_mean = 0, ty = 0, tt = 0;
                for (const auto& [t, y] : points) {
                    t_mean += t / static_cast<long double>(points.size());
                    y_mean += y / static_cast<long double>(points.size());
                }
                for (const auto& [t, y] : points) {
                    ty += (t - t_mean) * (y - y_mean);
                    tt += (t - t_mean) * (t - t_mean);
                }
                const double want = static_cast<double>(ty / tt * 31557600.0L);
                const double value =
                    (prediction ? got.trend_prediction_map : got.trend_truth_map)[static_cast<std::size_t>(p)];
                if (std::isnan(want)) {
                    EXPECT_TRUE(std::isnan(value)) << c << " " << p << " " << prediction;
                } else {
                    ++finite;
                    EXPECT_NEAR(value, want, 1e-12 * std::abs(want)) << c << " " << p << " " << prediction;
                }
            }
        }
    }
    EXPECT_GT(finite, area);  // most cells have slopes; the missing ones are NaN
    // The video: per lead time and cell the mean over every sample (the truth once per initial condition); NaN at
    // lead 0, which is not counted.
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const ChannelScores& got = serial[static_cast<std::size_t>(c)];
        ASSERT_EQ(got.video_prediction.size(), static_cast<std::size_t>(k.extent.lead_times * area));
        for (std::int64_t l = 0; l < k.extent.lead_times; ++l) {
            for (std::int64_t p = 0; p < area; ++p) {
                long double prediction = 0, truth = 0;
                for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                    truth += k.truth_at(ic, l)[static_cast<std::size_t>(c * area + p)];
                    const std::vector<float> members = k.members_at(ic, l, {0, k.extent.members});
                    for (std::int64_t m = 0; m < k.extent.members; ++m) {
                        prediction += members[static_cast<std::size_t>(m * k.plane() + c * area + p)];
                    }
                }
                const auto at = static_cast<std::size_t>(l * area + p);
                const double want_prediction = static_cast<double>(
                    prediction / static_cast<long double>(k.extent.initial_conditions * k.extent.members));
                const double want_truth =
                    static_cast<double>(truth / static_cast<long double>(k.extent.initial_conditions));
                for (const auto& [value, want] : {std::pair{got.video_prediction[at], want_prediction},
                                                  std::pair{got.video_truth[at], want_truth}}) {
                    if (l == 0 || std::isnan(want)) {
                        EXPECT_TRUE(std::isnan(value)) << c << " " << l << " " << p;
                    } else {
                        EXPECT_NEAR(value, want, 1e-15 * std::abs(want)) << c << " " << l << " " << p;
                    }
                }
                // The extended video: the bias of the means, the RMSE, the least and greatest error over every sample
                // and the ratio of the variances E[x^2] - E[x]^2 (the truth once per initial condition).
                long double squared_error = 0, prediction_square = 0, truth_square = 0;
                long double least = INFINITY, greatest = -INFINITY;
                for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                    const long double t = k.truth_at(ic, l)[static_cast<std::size_t>(c * area + p)];
                    truth_square += t * t;
                    const std::vector<float> members = k.members_at(ic, l, {0, k.extent.members});
                    for (std::int64_t m = 0; m < k.extent.members; ++m) {
                        const long double x = members[static_cast<std::size_t>(m * k.plane() + c * area + p)];
                        const long double error = static_cast<double>(x) - static_cast<double>(t);
                        squared_error += error * error;
                        prediction_square += x * x;
                        least = std::isnan(error) ? error : std::min(least, error);
                        greatest = std::isnan(error) ? error : std::max(greatest, error);
                    }
                }
                const auto samples = static_cast<long double>(k.extent.initial_conditions * k.extent.members);
                const auto ics = static_cast<long double>(k.extent.initial_conditions);
                const long double mean_p = prediction / samples, mean_t = truth / ics;
                const double want_ratio = static_cast<double>((prediction_square / samples - mean_p * mean_p) /
                                                              (truth_square / ics - mean_t * mean_t));
                const double want_rmse = static_cast<double>(std::sqrt(squared_error / samples));
                EXPECT_EQ(got.video_bias.size(), got.video_prediction.size());
                if (l == 0) {  // not counted: the empty minimum and maximum, NaN elsewhere
                    EXPECT_EQ(got.video_min_error[at], INFINITY);
                    EXPECT_EQ(got.video_max_error[at], -INFINITY);
                }
                if (l == 0 || std::isnan(want_rmse)) {
                    for (const double value : {got.video_rmse[at], got.video_bias[at], got.video_variance_ratio[at]}) {
                        EXPECT_TRUE(std::isnan(value)) << c << " " << l << " " << p;
                    }
                    if (l != 0) {
                        EXPECT_TRUE(std::isnan(got.video_min_error[at]) && std::isnan(got.video_max_error[at]));
                    }
                    continue;
                }
                EXPECT_NEAR(got.video_bias[at], want_prediction - want_truth, 1e-14) << c << " " << l << " " << p;
                EXPECT_NEAR(got.video_rmse[at], want_rmse, 1e-15 * want_rmse) << c << " " << l << " " << p;
                EXPECT_EQ(got.video_min_error[at], static_cast<double>(least)) << c << " " << l << " " << p;
                EXPECT_EQ(got.video_max_error[at], static_cast<double>(greatest)) << c << " " << l << " " << p;
                // E[x^2] - E[x]^2 of exact means rounded to double loses about 2^-52 E[x^2] / var of each variance
                const long double var_p = prediction_square / samples - mean_p * mean_p;
                const long double var_t = truth_square / ics - mean_t * mean_t;
                const double cancellation =
                    static_cast<double>(prediction_square / samples / var_p + truth_square / ics / var_t);
                EXPECT_NEAR(got.video_variance_ratio[at], want_ratio, 8e-16 * cancellation * std::abs(want_ratio))
                    << c << " " << l << " " << p;
            }
        }
    }
    // The RMSE: the area-weighted mean of the squared differences over the cells where both slopes are finite.
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const ChannelScores& got = serial[static_cast<std::size_t>(c)];
        long double sum = 0, weight = 0;
        for (std::int64_t p = 0; p < area; ++p) {
            const double d = got.trend_prediction_map[static_cast<std::size_t>(p)] -
                             got.trend_truth_map[static_cast<std::size_t>(p)];
            const double lat =
                -80.0 + 160.0 * static_cast<double>(p / k.grid.nlon) / static_cast<double>(k.grid.nlat - 1);
            if (std::isfinite(d)) {
                sum += std::cos(lat * M_PI / 180.0) * static_cast<long double>(d) * d;
                weight += std::cos(lat * M_PI / 180.0);
            }
        }
        const double* rmse = nullptr;
        for (const ScoreValue& v : got.regions.front().time_means) {
            if (v.score->key == "trend_rmse") {
                rmse = &v.value;
            }
        }
        ASSERT_NE(rmse, nullptr);
        EXPECT_NEAR(*rmse, std::sqrt(static_cast<double>(sum / weight)), 1e-12 * *rmse) << c;
    }
}

// ACE's annual and seasonal means on one rank against their definitions, in long double: per sample and year the
// mean of the counted steps' global means (over the points where truth and prediction are finite, the policy's), the
// years between the first and the last, ACE's RMSE of the ensemble means and fair CRPS over the years; per season and
// cell the mean of its counted steps, and the area-weighted RMSE of the seasonal means' difference. The bits of one
// rank at every data split are the trend test's.
TEST(Aggregator, HistogramsAreAcesOverItsWindows) {
    // ACE's histograms of one rank fed every pair, against DynamicHistogram fed each window's values of the whole
    // forecast: ACE's mask (the truth's NaN points at initial condition 0, lead 1), a window with a NaN member point
    // left out (channel 1's prediction: one member NaN at its last point every pair), the truth once per member.
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 2, 4});
    const VariableScores got =
        aggregate(alone, k, SplitRule::balanced, DataSplit::initial_conditions, ReportKind::forecast,
                  ValidityPolicy::skip_invalid_pairs, {}, nullptr, {}, {}, true);
    const std::int64_t area = k.grid.nlat * k.grid.nlon;
    const std::int64_t members = k.extent.members;
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const std::vector<float> first = k.truth_at(0, 1);
        DynamicHistogram truth(200), prediction(200);
        std::int64_t truth_left_out = 0, prediction_left_out = 0;
        for (const Range window : histogram_windows(k.extent.lead_times)) {
            std::vector<float> truth_values, prediction_values;
            for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                for (std::int64_t l = std::max<std::int64_t>(window.begin, 1); l < window.end; ++l) {
                    const std::vector<float> t = k.truth_at(ic, l);
                    const std::vector<float> all = k.members_at(ic, l, {0, members});
                    for (std::int64_t p = 0; p < area; ++p) {
                        if (std::isnan(first[static_cast<std::size_t>(c * area + p)])) {
                            continue;
                        }
                        truth_values.push_back(t[static_cast<std::size_t>(c * area + p)]);
                        for (std::int64_t m = 0; m < members; ++m) {
                            prediction_values.push_back(all[static_cast<std::size_t>(m * k.plane() + c * area + p)]);
                        }
                    }
                }
            }
            for (auto [values, histogram, left_out] :
                 {std::tuple{&truth_values, &truth, &truth_left_out},
                  std::tuple{&prediction_values, &prediction, &prediction_left_out}}) {
                if (std::any_of(values->begin(), values->end(), [](float x) { return !std::isfinite(x); })) {
                    ++*left_out;
                    continue;
                }
                const auto [lo, hi] = std::minmax_element(values->begin(), values->end());
                histogram->take_range(histogram_lower_bound(*lo), histogram_upper_bound(*hi));
                std::vector<std::int64_t> counts(200, 0);
                for (const float x : *values) {
                    ++counts[histogram->bin_of(x)];
                }
                histogram->add_counts(counts);
            }
        }
        truth.scale_counts(members);
        const ChannelHistograms& h = *got[static_cast<std::size_t>(c)].histograms;
        EXPECT_EQ(h.truth_edges, truth.edges()) << c;
        EXPECT_EQ(h.truth_counts, truth.counts()) << c;
        EXPECT_EQ(h.prediction_edges, prediction.edges()) << c;
        EXPECT_EQ(h.prediction_counts, prediction.counts()) << c;
        EXPECT_EQ(h.truth_windows_left_out, truth_left_out) << c;
        EXPECT_EQ(h.prediction_windows_left_out, prediction_left_out) << c;
        const double p = 99.9999 / 100.0;
        EXPECT_EQ(std::bit_cast<std::uint64_t>(h.truth_percentile),
                  std::bit_cast<std::uint64_t>(histogram_quantile(truth.edges(), truth.counts(), p)));
        if (c == 0) {  // every window counted, and every truth value once per member
            EXPECT_EQ(truth_left_out + prediction_left_out, 0);
            std::int64_t total = 0;
            for (const std::int64_t n : h.truth_counts) {
                total += n;
            }
            EXPECT_EQ(total, k.extent.initial_conditions * (k.extent.lead_times - 1) * area * members);
        } else {  // the NaN member point leaves each of the three windows out of the prediction's histogram
            EXPECT_EQ(prediction_left_out, 3);
            EXPECT_TRUE(h.prediction_edges.empty() && std::isnan(h.prediction_percentile));
        }
    }
}

TEST(Aggregator, EnsoCoefficientIsAcesRegression) {
    // Per cell the mean over the covered initial conditions (and members) of sum_t x w / sum_t w^2 over the counted
    // lead times, against a long-double reference; initial condition 1, not covered, left out.
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 2, 4});
    const VariableScores got =
        aggregate(alone, k, SplitRule::balanced, DataSplit::initial_conditions, ReportKind::forecast,
                  ValidityPolicy::skip_invalid_pairs, {}, nullptr, {}, {}, true);
    const std::vector<double> index = regression_index(k.extent);
    const std::int64_t area = k.grid.nlat * k.grid.nlon;
    const std::int64_t members = k.extent.members;
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const ChannelScores& channel = got[static_cast<std::size_t>(c)];
        ASSERT_EQ(channel.index_regression_truth_map.size(), static_cast<std::size_t>(area));
        std::int64_t compared = 0;
        for (std::int64_t p = 0; p < area; ++p) {
            long double gen = 0, target = 0;
            std::int64_t covered = 0;
            for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                if (ic == 1) {
                    continue;
                }
                ++covered;
                long double variance = 0, truth = 0, prediction = 0;
                for (std::int64_t l = 1; l < k.extent.lead_times; ++l) {
                    const long double w = index[static_cast<std::size_t>(ic * k.extent.lead_times + l)];
                    variance += w * w;
                    truth += w * k.truth_at(ic, l)[static_cast<std::size_t>(c * area + p)];
                    const std::vector<float> all = k.members_at(ic, l, {0, members});
                    for (std::int64_t m = 0; m < members; ++m) {
                        prediction += w * all[static_cast<std::size_t>(m * k.plane() + c * area + p)];
                    }
                }
                target += truth / variance;
                gen += prediction / variance / members;
            }
            for (const auto& [value, want] :
                 {std::pair{channel.index_regression_truth_map[static_cast<std::size_t>(p)], target / covered},
                  std::pair{channel.index_regression_prediction_map[static_cast<std::size_t>(p)], gen / covered}}) {
                if (std::isnan(static_cast<double>(want))) {
                    EXPECT_TRUE(std::isnan(value)) << c << " " << p;
                } else {
                    EXPECT_NEAR(value, static_cast<double>(want), 1e-12 * std::fabs(static_cast<double>(want)) + 1e-9)
                        << c << " " << p;
                    ++compared;
                }
            }
        }
        EXPECT_GT(compared, area);  // most cells have both maps
    }
}

TEST(Aggregator, AnnualAndSeasonalMeansAreAcesDefinitions) {
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 2, 4});
    const VariableScores got =
        aggregate(alone, k, SplitRule::balanced, DataSplit::initial_conditions, ReportKind::forecast,
                  ValidityPolicy::skip_invalid_pairs, {}, nullptr, {}, {}, true);
    const std::int64_t area = k.grid.nlat * k.grid.nlon;
    const std::int64_t members = k.extent.members;
    const std::int64_t samples = k.extent.initial_conditions * members;
    const auto weight = [&](std::int64_t p) {
        const double lat = -80.0 + 160.0 * static_cast<double>(p / k.grid.nlon) / static_cast<double>(k.grid.nlat - 1);
        return static_cast<long double>(std::cos(lat * M_PI / 180.0));
    };
    const auto time_mean = [&](const ChannelScores& channel, std::string_view key) {
        for (const ScoreValue& v : channel.regions.front().time_means) {
            if (v.score->key == key) {
                return v.value;
            }
        }
        ADD_FAILURE() << "no " << key;
        return 0.0;
    };
    for (std::int64_t c = 0; c < k.channels; ++c) {
        const ChannelScores& channel = got[static_cast<std::size_t>(c)];
        // Per sample and year the sums of the global means of the prediction and the truth, and their steps.
        std::map<std::int64_t, std::vector<std::array<long double, 3>>> years;
        for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
            for (std::int64_t l = 1; l < k.extent.lead_times; ++l) {
                const std::vector<float> truth = k.truth_at(ic, l);
                const std::vector<float> all = k.members_at(ic, l, {0, members});
                auto& year = years[pair_time(ic, l).year];
                year.resize(static_cast<std::size_t>(samples), {0, 0, 0});
                for (std::int64_t m = 0; m < members; ++m) {
                    long double gen = 0, target = 0, weights = 0;
                    for (std::int64_t p = 0; p < area; ++p) {
                        const float y = truth[static_cast<std::size_t>(c * area + p)];
                        const float x = all[static_cast<std::size_t>(m * k.plane() + c * area + p)];
                        if (std::isfinite(x) && std::isfinite(y)) {
                            gen += weight(p) * x;
                            target += weight(p) * y;
                            weights += weight(p);
                        }
                    }
                    auto& sums = year[static_cast<std::size_t>(ic * members + m)];
                    sums[0] += gen / weights;
                    sums[1] += target / weights;
                    sums[2] += 1;
                }
            }
        }
        ASSERT_TRUE(channel.annual.has_value());
        const AnnualMeans& annual = *channel.annual;
        const auto nyears = static_cast<std::int64_t>(years.size());
        ASSERT_EQ(annual.years.size(), years.size());  // 2000 to 2002, every one with steps
        long double squares = 0, crps = 0;
        std::vector<long double> gen_means, target_means;  // per year, for the R2
        std::int64_t y = 0;
        for (const auto& [year, sums] : years) {
            EXPECT_EQ(annual.years[static_cast<std::size_t>(y)], year);
            long double gen_mean = 0, target_mean = 0, kept = 0;
            std::vector<long double> gen(static_cast<std::size_t>(samples));
            for (std::int64_t s = 0; s < samples; ++s) {
                const auto& sum = sums[static_cast<std::size_t>(s)];
                const auto at = static_cast<std::size_t>(s * nyears + y);
                if (sum[2] == 0) {  // this sample has no step in the year
                    EXPECT_TRUE(std::isnan(annual.prediction[at]));
                    continue;
                }
                gen[static_cast<std::size_t>(s)] = sum[0] / sum[2];
                EXPECT_NEAR(annual.prediction[at], static_cast<double>(sum[0] / sum[2]), 1e-12) << c << " " << year;
                EXPECT_NEAR(annual.truth[at], static_cast<double>(sum[1] / sum[2]), 1e-12) << c << " " << year;
                EXPECT_EQ(annual.counts[at], 1.0);
                gen_mean += sum[0] / sum[2];
                target_mean += sum[1] / sum[2];
                ++kept;
            }
            ASSERT_EQ(kept, samples) << "every sample has every year in this case";
            gen_mean /= kept;
            target_mean /= kept;
            gen_means.push_back(gen_mean);
            target_means.push_back(target_mean);
            squares += (gen_mean - target_mean) * (gen_mean - target_mean);
            long double skill = 0, spread = 0;
            for (std::int64_t s = 0; s < samples; ++s) {
                skill += std::fabs(gen[static_cast<std::size_t>(s)] - target_mean) / samples;
                for (std::int64_t t = s + 1; t < samples; ++t) {
                    spread += std::fabs(gen[static_cast<std::size_t>(s)] - gen[static_cast<std::size_t>(t)]);
                }
            }
            crps += skill - spread / (samples * (samples - 1));
            ++y;
        }
        EXPECT_NEAR(time_mean(channel, "annual_rmse"), static_cast<double>(std::sqrt(squares / nyears)), 1e-12) << c;
        EXPECT_NEAR(time_mean(channel, "annual_crps"), static_cast<double>(crps / nyears), 1e-12) << c;
        // ACE's R2 against the reference: per sample and year the count-weighted mean of its global means (every
        // point's value finite), their mean over the samples, then 1 - SS(x - ref) / SS(ref - mean ref) over the years.
        std::vector<long double> reference;
        for (const auto& [year, sums] : years) {
            long double over_samples = 0;
            for (std::int64_t s = 0; s < reference_samples; ++s) {
                long double weighted = 0, total = 0;
                for (std::int64_t t = (year - 1999) * 12; t < (year - 1998) * 12; ++t) {
                    long double sum = 0, weights = 0;
                    for (std::int64_t p = 0; p < area; ++p) {
                        sum += weight(p) * reference_value(c, s, t, p);
                        weights += weight(p);
                    }
                    weighted += sum / weights * reference_count(t);
                    total += reference_count(t);
                }
                over_samples += weighted / total / reference_samples;
            }
            reference.push_back(over_samples);
        }
        for (const auto& [key, series] :
             {std::pair{"annual_r2_target", &target_means}, {"annual_r2_gen", &gen_means}}) {
            long double mean = 0, spread = 0, error = 0;
            for (const long double r : reference) {
                mean += r / static_cast<long double>(reference.size());
            }
            for (std::size_t k2 = 0; k2 < reference.size(); ++k2) {
                spread += (reference[k2] - mean) * (reference[k2] - mean);
                error += ((*series)[k2] - reference[k2]) * ((*series)[k2] - reference[k2]);
            }
            const double want = static_cast<double>(1 - error / spread);
            EXPECT_NEAR(time_mean(channel, key), want, 1e-9 * std::max(1.0, std::abs(want))) << c << " " << key;
        }
        // The seasonal means, NaN where a counted step was missing (the policy), and their RMSE.
        ASSERT_EQ(channel.seasonal_prediction.size(), static_cast<std::size_t>(4 * area));
        long double all_seasons = 0;
        for (int season = 0; season < 4; ++season) {
            long double squared = 0, weights = 0;
            for (std::int64_t p = 0; p < area; ++p) {
                long double gen = 0, target = 0, gen_steps = 0, target_steps = 0;
                for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
                    for (std::int64_t l = 1; l < k.extent.lead_times; ++l) {
                        if (season_of(pair_time(ic, l).month) != season) {
                            continue;
                        }
                        target += k.truth_at(ic, l)[static_cast<std::size_t>(c * area + p)];
                        ++target_steps;
                        const std::vector<float> all = k.members_at(ic, l, {0, members});
                        for (std::int64_t m = 0; m < members; ++m) {
                            gen += all[static_cast<std::size_t>(m * k.plane() + c * area + p)];
                            ++gen_steps;
                        }
                    }
                }
                ASSERT_GT(target_steps, 0) << "every season has steps in this case";
                const auto at = static_cast<std::size_t>(season * area + p);
                for (const auto& [value, want] : {std::pair{channel.seasonal_prediction[at], gen / gen_steps},
                                                  std::pair{channel.seasonal_truth[at], target / target_steps}}) {
                    if (std::isnan(static_cast<double>(want))) {
                        EXPECT_TRUE(std::isnan(value)) << c << " " << season << " " << p;
                    } else {
                        EXPECT_NEAR(value, static_cast<double>(want), 1e-12 * std::fabs(static_cast<double>(want)));
                    }
                }
                const long double d = gen / gen_steps - target / target_steps;
                if (std::isfinite(static_cast<double>(d))) {
                    squared += weight(p) * d * d;
                    weights += weight(p);
                }
            }
            const char* keys[] = {"seasonal_rmse_djf", "seasonal_rmse_mam", "seasonal_rmse_jja", "seasonal_rmse_son"};
            EXPECT_NEAR(time_mean(channel, keys[season]), static_cast<double>(std::sqrt(squared / weights)), 1e-12)
                << c << " " << season;
            all_seasons += squared / weights / 4;
        }
        EXPECT_NEAR(time_mean(channel, "seasonal_rmse"), static_cast<double>(std::sqrt(all_seasons)), 1e-12) << c;
        // The regional index: ACE's monthly index of each counted step's regional mean (ACE's weights: the box,
        // cos(lat) twice; a missing value under a zero weight left out).
        const std::int64_t steps = k.extent.lead_times - 1;
        std::vector<double> gen(static_cast<std::size_t>(samples * steps));
        std::vector<double> target(gen.size());
        std::vector<std::int64_t> index_years(gen.size());
        std::vector<int> index_months(gen.size());
        const std::vector<double> lon = lon_of(k.grid);
        for (std::int64_t s = 0; s < samples; ++s) {
            const std::int64_t ic = s / members;
            for (std::int64_t l = 1; l < k.extent.lead_times; ++l) {
                const std::vector<float> truth = k.truth_at(ic, l);
                const std::vector<float> all = k.members_at(ic, l, {s % members, s % members + 1});
                long double x = 0, truth_sum = 0, weights = 0;
                for (std::int64_t p = 0; p < area; ++p) {
                    const double lat =
                        -80.0 + 160.0 * static_cast<double>(p / k.grid.nlon) / static_cast<double>(k.grid.nlat - 1);
                    const long double w = in_box(index_box, lat, lon[static_cast<std::size_t>(p % k.grid.nlon)])
                                              ? weight(p) * weight(p)
                                              : 0.0L;
                    if (w != 0) {
                        x += w * all[static_cast<std::size_t>(c * area + p)];
                        truth_sum += w * truth[static_cast<std::size_t>(c * area + p)];
                        weights += w;
                    }
                }
                const auto at = static_cast<std::size_t>(s * steps + l - 1);
                gen[at] = static_cast<double>(x / weights);
                target[at] = static_cast<double>(truth_sum / weights);
                index_years[at] = pair_time(ic, l).year;
                index_months[at] = pair_time(ic, l).month;
            }
        }
        ASSERT_TRUE(channel.index_prediction.has_value());
        for (const auto& [index, series] :
             {std::pair{&*channel.index_prediction, &gen}, std::pair{&*channel.index_truth, &target}}) {
            const MonthlyIndex want = monthly_index(*series, index_years, index_months, samples, 3);
            EXPECT_EQ(index->years, want.years);
            EXPECT_EQ(index->months, want.months);
            ASSERT_EQ(index->values.size(), want.values.size());
            std::int64_t finite = 0;
            for (std::size_t i = 0; i < want.values.size(); ++i) {
                if (std::isnan(want.values[i])) {
                    EXPECT_TRUE(std::isnan(index->values[i])) << c << " " << i;
                } else {
                    ++finite;
                    EXPECT_NEAR(index->values[i], want.values[i], 1e-9) << c << " " << i;
                }
            }
            EXPECT_EQ(finite > 0, c == 0) << c;  // channel 1's truth is missing over land: NaN means, as ACE's
        }
        EXPECT_EQ(std::bit_cast<std::uint64_t>(time_mean(channel, "nino34_index_std")),
                  std::bit_cast<std::uint64_t>(index_std(*channel.index_prediction)))
            << c;
    }
}

// The power spectra: at every data split and split rule the bits of one rank, and on one rank the mean of each counted
// pair's spectrum (the fill, then the transform, of each field), with ACE's summaries of their ratio.
TEST(Aggregator, PowerSpectraAreTheMeanOfEveryPairsSpectrumAndTheBitsOfOneRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 2, 3});
    for (const bool fill : {true, false}) {
        PowerSpectrumOptions spectrum;
        if (!fill) {
            spectrum.fill.reset();
        }
        spectrum.spec.convention = fill ? SpectrumConvention::ace : SpectrumConvention::full;
        const auto run = [&](const ProcessMesh& on, SplitRule rule, DataSplit split) {
            return aggregate(on, k, rule, split, ReportKind::forecast, ValidityPolicy::skip_invalid_pairs, {}, nullptr,
                             {}, spectrum);
        };
        const VariableScores serial = run(alone, SplitRule::balanced, DataSplit::initial_conditions);
        for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
            for (DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times, DataSplit::members}) {
                expect_same_bits(run(mesh, rule, split), serial, true,
                                 std::string("spectra, fill ") + (fill ? "on" : "off") + ", split " +
                                     std::string(to_string(split)) + " rule " + std::string(to_string(rule)));
            }
        }
        // The definition on one rank: every counted (initial condition, lead) of the truth and of each member.
        const ShardedGrid one(alone, k.grid);
        const std::int64_t degrees = spectrum_size(spectrum.spec, k.grid).lmax;
        const auto spectra_of = [&](const std::vector<float>& fields, std::int64_t count) {
            if (!fill) {
                return spherical_power_spectrum(one, FieldShard<float>{fields, count}, spectrum.spec);
            }
            const auto filled = smooth_flood_fill(one, FieldShard<float>{fields, count});
            return spherical_power_spectrum(one, FieldShard<double>{filled, count}, spectrum.spec);
        };
        std::vector<long double> truth(static_cast<std::size_t>(k.channels * degrees), 0.0L);
        std::vector<long double> prediction(truth.size(), 0.0L);
        for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
            for (std::int64_t lead = 1; lead < k.extent.lead_times; ++lead) {
                const auto t = spectra_of(k.truth_at(ic, lead), k.channels);
                const auto m = spectra_of(k.members_at(ic, lead, {0, k.extent.members}), k.channels * k.extent.members);
                for (std::size_t n = 0; n < truth.size(); ++n) {
                    truth[n] += t[n];
                    for (std::int64_t e = 0; e < k.extent.members; ++e) {
                        prediction[n] += m[static_cast<std::size_t>(e) * truth.size() + n];
                    }
                }
            }
        }
        const auto counted = static_cast<long double>(k.extent.initial_conditions * (k.extent.lead_times - 1));
        for (std::int64_t c = 0; c < k.channels; ++c) {
            const ChannelScores& got = serial[static_cast<std::size_t>(c)];
            ASSERT_EQ(got.spectra.size(), 2u);
            std::vector<double> want_prediction;
            std::vector<double> want_truth;
            for (std::int64_t l = 0; l < degrees; ++l) {
                const auto n = static_cast<std::size_t>(c * degrees + l);
                want_truth.push_back(static_cast<double>(truth[n] / counted));
                want_prediction.push_back(static_cast<double>(prediction[n] / (counted * k.extent.members)));
            }
            for (const ScoreSeries& s : got.spectra) {
                const std::vector<double>& want = s.score->key == "prediction" ? want_prediction : want_truth;
                ASSERT_EQ(s.width, degrees);
                ASSERT_EQ(s.values.size(), want.size());
                for (std::size_t l = 0; l < want.size(); ++l) {
                    if (!fill && c == 1) {  // the land mask's NaN propagate without the fill
                        EXPECT_TRUE(std::isnan(s.values[l]));
                        continue;
                    }
                    EXPECT_NEAR(s.values[l], want[l], 1e-13 * std::abs(want[l])) << s.score->key << " degree " << l;
                }
            }
            const SpectrumBiases biases = spectrum_norm_biases(want_prediction, want_truth);
            int summaries = 0;
            for (const ScoreValue& v : got.regions.front().time_means) {
                if (v.score->family != ScoreFamily::power_spectrum) {
                    continue;
                }
                ++summaries;
                EXPECT_EQ(v.score->ace_key.rfind("power_spectrum/", 0), 0u);
                const std::string& key = v.score->key;
                const double want = key == "smallest_scale_norm_bias" ? biases.smallest_scale
                                    : key == "positive_norm_bias"     ? biases.positive
                                    : key == "negative_norm_bias"     ? biases.negative
                                                                      : biases.mean_abs;
                if (!fill && c == 1) {
                    continue;
                }
                EXPECT_NEAR(v.value, want, 1e-11 * std::max(1.0, std::abs(want))) << v.score->key;
            }
            EXPECT_EQ(summaries, 4);
            for (const RegionScores& r : got.regions) {  // the globe's only
                for (const ScoreValue& v : r.time_means) {
                    EXPECT_TRUE(r.name == "global" || v.score->family != ScoreFamily::power_spectrum);
                }
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
                      std::bit_cast<std::uint64_t>(s[std::get<const ScoreDefinition*>(series.score->source)->name][0]))
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
            // Every per-sample score, in report order: the deterministic ones and, with a climatology, the
            // anomaly correlation.
            std::size_t per_sample = 0;
            bool anomaly_correlation = false;
            for (const ScoreSeries& series : finished) {
                if (series.score->family != ScoreFamily::deterministic &&
                    series.score->family != ScoreFamily::anomaly_correlation) {
                    continue;
                }
                anomaly_correlation |= series.score->family == ScoreFamily::anomaly_correlation;
                ASSERT_LT(per_sample, leads[c].size());
                const ScoreSeries& early = leads[c][per_sample++];
                EXPECT_EQ(early.score, series.score);
                for (std::size_t l = 0; l < series.values.size(); ++l) {
                    EXPECT_EQ(std::bit_cast<std::uint64_t>(early.values[l]),
                              std::bit_cast<std::uint64_t>(series.values[l]))
                        << series.score->key << " lead " << l;
                }
            }
            EXPECT_EQ(per_sample, leads[c].size());
            EXPECT_GT(per_sample, keys.size() + 1);
            EXPECT_TRUE(anomaly_correlation);
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

// ACE's ensemble scores (fme's one-step ensemble aggregator) of one lead time of `k` over the whole grid, computed
// here directly in double: per cell the means over initial conditions of (xbar - y)^2, the unbiased variance and
// the almost-fair CRPS (alpha), NaN where any initial condition's truth or member is not finite; then the
// crps, sqrt(mse) and ssr_bias maps and their cos-lat means over the finite cells of `mask` (1 inside).
std::vector<double> ace_ensemble_reference(const ForecastCase& k, std::int64_t lead, std::int64_t channel, double alpha,
                                           const std::vector<double>& mask) {
    const auto nlat = static_cast<std::size_t>(k.grid.nlat);
    const auto nlon = static_cast<std::size_t>(k.grid.nlon);
    const auto m = static_cast<std::size_t>(k.extent.members);
    const auto plane = static_cast<std::size_t>(k.plane());
    const auto c = static_cast<std::size_t>(channel);
    const double members = static_cast<double>(m);
    const std::size_t cells = nlat * nlon;
    const double nan = std::nan("");
    std::vector<double> mse(cells, 0.0), var(cells, 0.0), crps(cells, 0.0);
    for (std::int64_t ic = 0; ic < k.extent.initial_conditions; ++ic) {
        const std::vector<float> truth = k.truth_at(ic, lead);
        const std::vector<float> all = k.members_at(ic, lead, {0, k.extent.members});
        for (std::size_t p = 0; p < cells; ++p) {
            const double y = truth[c * cells + p];
            std::vector<double> x;
            for (std::size_t e = 0; e < m; ++e) {
                x.push_back(all[e * plane + c * cells + p]);
            }
            double mean = 0.0, skill = 0.0, pairs = 0.0, squares = 0.0;
            bool finite = std::isfinite(y);
            for (std::size_t e = 0; e < m; ++e) {
                finite = finite && std::isfinite(x[e]);
                mean += x[e] / members;
                skill += std::abs(x[e] - y) / members;
                for (std::size_t f = e + 1; f < m; ++f) {
                    pairs += std::abs(x[e] - x[f]);
                }
            }
            for (std::size_t e = 0; e < m; ++e) {
                squares += (x[e] - mean) * (x[e] - mean);
            }
            mse[p] += finite ? (mean - y) * (mean - y) : nan;
            var[p] += finite ? squares / (members - 1.0) : nan;
            crps[p] += finite ? skill - (1.0 - (1.0 - alpha) / 2.0) * pairs / (members * (members - 1.0)) : nan;
        }
    }
    const auto ics = static_cast<double>(k.extent.initial_conditions);
    double floor = 0.0;
    for (std::size_t p = 0; p < cells; ++p) {
        mse[p] /= ics;
        var[p] /= ics;
        crps[p] /= ics;
        const double u = std::max(mse[p] - var[p] / members, 0.0);
        floor = std::isnan(u) ? floor : std::max(floor, 1e-6 * u);
    }
    double sums[3] = {0.0, 0.0, 0.0};
    double weight = 0.0;
    for (std::size_t p = 0; p < cells; ++p) {
        const double u = mse[p] - var[p] / members;
        if (std::isnan(u) || mask[p] == 0.0) {
            continue;
        }
        const double skill = std::sqrt(std::max(u, 0.0));
        const double ssr = var[p] == 0.0 && u <= floor ? 0.0 : skill > 0.0 ? std::sqrt(var[p]) / skill - 1.0 : -1.0;
        const double lat = -80.0 + 160.0 * static_cast<double>(p / nlon) / static_cast<double>(nlat - 1);
        const double w = std::cos(lat * std::acos(-1.0) / 180.0);
        sums[0] += w * crps[p];
        sums[1] += w * std::sqrt(mse[p]);
        sums[2] += w * ssr;
        weight += w;
    }
    return {sums[0] / weight, sums[1] / weight, sums[2] / weight};
}

TEST(Aggregator, AcesEnsembleScoresAreTheirDefinitionAndTheBitsOfOneRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ForecastCase k = make_case({9, 14}, {3, 4, 4});
    const std::vector<std::int64_t> cell_leads = {3, 1};
    const auto run = [&](const ProcessMesh& on, SplitRule rule, DataSplit split) {
        return aggregate(on, k, rule, split, ReportKind::forecast, ValidityPolicy::skip_invalid_pairs, {}, nullptr,
                         cell_leads);
    };
    const VariableScores serial = run(alone, SplitRule::balanced, DataSplit::initial_conditions);
    const std::vector<double> everywhere(static_cast<std::size_t>(k.grid.nlat * k.grid.nlon), 1.0);
    for (std::size_t c = 0; c < serial.size(); ++c) {
        for (std::size_t r = 0; r < 2; ++r) {
            const RegionScores& region = serial[c].regions[r];
            ASSERT_EQ(region.at_leads.size(), 6U);  // 2 leads x 3 scores, lead by lead in the order asked
            for (std::size_t l = 0; l < cell_leads.size(); ++l) {
                const std::vector<double> want = ace_ensemble_reference(k, cell_leads[l], static_cast<std::int64_t>(c),
                                                                        0.95, r == 0 ? everywhere : k.region_mask);
                const char* keys[] = {"almost_fair_crps", "cell_ensemble_mean_rmse", "ssr_bias"};
                for (std::size_t s = 0; s < 3; ++s) {
                    const ScoreAtLead& got = region.at_leads[3 * l + s];
                    EXPECT_EQ(got.score->key, keys[s]);
                    EXPECT_EQ(got.lead, cell_leads[l]);
                    EXPECT_NEAR(got.value, want[s], 1e-12 * std::max(1.0, std::abs(want[s])))
                        << keys[s] << " channel " << c << " region " << region.name << " lead " << cell_leads[l];
                }
            }
        }
        // The maps (ACE's log_mean_maps): per statistic and lead the map whose global area mean is the score.
        ASSERT_EQ(serial[c].cell_maps.size(), 6U);
        for (const ScoreMapAtLead& map : serial[c].cell_maps) {
            ASSERT_EQ(map.values.size(), static_cast<std::size_t>(k.grid.nlat * k.grid.nlon));
            long double sum = 0, weight = 0;
            for (std::int64_t p = 0; p < k.grid.nlat * k.grid.nlon; ++p) {
                const double lat =
                    -80.0 + 160.0 * static_cast<double>(p / k.grid.nlon) / static_cast<double>(k.grid.nlat - 1);
                const double v = map.values[static_cast<std::size_t>(p)];
                if (std::isfinite(v)) {
                    sum += std::cos(lat * M_PI / 180.0) * static_cast<long double>(v);
                    weight += std::cos(lat * M_PI / 180.0);
                }
            }
            const auto score =
                std::find_if(serial[c].regions[0].at_leads.begin(), serial[c].regions[0].at_leads.end(),
                             [&](const ScoreAtLead& a) { return a.score == map.score && a.lead == map.lead; });
            ASSERT_NE(score, serial[c].regions[0].at_leads.end());
            EXPECT_NEAR(score->value, static_cast<double>(sum / weight), 1e-12 * std::max(1.0, std::abs(score->value)))
                << map.score->key << " lead " << map.lead;
        }
    }
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times}) {
            expect_same_bits(run(mesh, rule, split), serial, true,
                             std::string("ACE's ensemble scores, split ") + std::string(to_string(split)) + " rule " +
                                 std::string(to_string(rule)));
        }
    }
    // Refused where they cannot be formed: members split over data ranks, one member, a lead outside the run.
    const ShardedGrid grid(mesh, k.grid, SplitRule::div_up);
    const std::vector<RegionWeights> regions{
        {"global", cos_lat_weights(std::vector<double>(9, 0.0), 14, grid.box().lat)}};
    const auto refused = [&](ForecastExtent extent, DataSplit split, std::vector<std::int64_t> leads) {
        AggregatorOptions options;
        options.report = ReportKind::forecast;
        options.counted_leads = {1};
        options.ensemble_cell_leads = std::move(leads);
        const AggregatorShape shape{extent, k.channels, {{0, 1}, {0, 4}, {0, extent.members}, split}};
        try {
            Aggregator aggregator(grid, shape, regions, options);
        } catch (const ArgumentError& error) {
            return std::string(error.what());
        }
        return std::string();
    };
    EXPECT_NE(refused({3, 4, 4}, DataSplit::members, {1}).find("ensemble_cell_leads"), std::string::npos);
    EXPECT_NE(refused({3, 1, 4}, DataSplit::initial_conditions, {1}).find("several members"), std::string::npos);
    EXPECT_NE(refused({3, 4, 4}, DataSplit::initial_conditions, {4}).find("outside 0..3"), std::string::npos);
    EXPECT_NE(refused({3, 4, 4}, DataSplit::initial_conditions, {2, 2}).find("repeated"), std::string::npos);
    EXPECT_EQ(refused({3, 4, 4}, DataSplit::initial_conditions, {2}), "");
}

}  // namespace
}  // namespace gridshard
