#pragma once
/// @file
/// The scoring run: one typed plan, one source, one call. evaluate() agrees on the inputs over the world, lays
/// out the mesh and the work, reads every rank's box of its (initial condition, lead time) pairs variable by
/// variable through the source (the next pair read while the current one is scored), feeds one Aggregator per
/// variable and returns every score. Both of `gridshard eval`'s reports, a pair of fields and a forecast, are
/// this run; the front ends turn options into a plan, choose the source and write what comes back.
///
/// @code
///   gridshard::EvaluationPlan plan;
///   plan.scoring.report = gridshard::ReportKind::forecast;
///   plan.regions = {"tropics"};
///   const auto source = gridshard::io::make_builtin_forecast(181, 360, 4, 8, 9);
///   const gridshard::EvaluationResult result = gridshard::evaluate(plan, *source, gridshard::Communicator::world());
/// @endcode

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/forecast_inputs.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "gridshard/io/parallel_io.hpp"

namespace gridshard {

/// Everything a run needs to know, parsed: no strings left to interpret but names and paths.
struct EvaluationPlan {
    /// What each variable's Aggregator forms (the report, the summation, the validity policy, the maps, the scores
    /// kept, the ensemble statistics, the power spectra): one settings type from the front end to the aggregator.
    /// The run sets the rest from its inputs: counted_leads (the time-mean rows), anomaly_correlation (with a
    /// climatology) and gather_maps (from `access`).
    AggregatorOptions scoring{};
    std::optional<MeshShape> mesh;  ///< default: 1 x H x W, H the largest divisor of the ranks <= sqrt(ranks)
    SplitRule split = SplitRule::balanced;
    AreaWeighting weights = AreaWeighting::cos_lat;
    std::optional<DataSplit> data_split;  ///< default: share_work's choice
    bool include_initial_step = false;    ///< forecast: count lead 0 in the time means
    std::string climatology;              ///< forecast: the climatology file of the anomaly correlation, or ""
    std::vector<std::string> regions;     ///< forecast: regions beside the globe (io::make_regions)
    std::vector<std::string> variables;   ///< the variables to score, in order (empty: every one of the source)
    /// forecast: ACE's stats files (io/normalization.hpp), both or neither: the scores ACE logs on the normalised
    /// fields (the registry's ace_normalized ones) are formed beside the others.
    std::string normalize_means, normalize_stds;
    /// forecast: ACE's near_zero_fraction metric (none: not formed); the variables it names must be scored.
    std::optional<NearZeroFractionConfig> near_zero_fraction;
    /// forecast, with scoring.trend: the variables with ACE's trend (ACE's TrendMetricConfig.variables; empty: every
    /// one); each must be scored.
    std::vector<std::string> trend_variables;
    /// forecast, with scoring.video: the variables with ACE's video (ACE's VideoMetricConfig.variables; empty: every
    /// one); each must be scored.
    std::vector<std::string> video_variables;
    /// forecast, with scoring.annual (its timestep is the files' lead-time step, whatever it holds here) and
    /// scoring.seasonal: the variables with ACE's annual and seasonal means (ACE's AnnualMetricConfig.variables and
    /// SeasonalMetricConfig.variables; empty: every one); each must be scored.
    std::vector<std::string> annual_variables, seasonal_variables;
    /// forecast, with scoring.annual: ACE's monthly reference data (its reference_data; empty: none), whose yearly
    /// means the annual R² (annual_r2_target, annual_r2_gen) compares with, for the variables the file has
    /// (io/annual_reference.hpp).
    std::string annual_reference_data;
    /// forecast: ACE's enso_index metric (AggregatorOptions::regional_index) of the variables ACE forms it of (sst,
    /// surface_temperature, TS: ace_sst_names), over ACE's Niño 3.4 box; a run longer than 730 days.
    bool enso_index = false;
    /// forecast: ACE's enso_coefficient metric (AggregatorOptions::index_regression) of every variable against the
    /// reference index in this file (io/reference_index.hpp; empty: none), each sample's series formed as ACE's
    /// get_sample_index_series forms it from the files' initial times and lead times; a run longer than 1800 days.
    std::string enso_coefficient_index;
    /// forecast: ACE's ipo_index metric (AggregatorOptions::tripole_index) of the variable ACE forms it of (sst:
    /// ace_ipo_names), over ACE's tripole boxes; a run longer than 80 years of 365 days.
    bool ipo_index = false;
    /// forecast, with scoring.histogram: the variables with ACE's histograms (ACE's HistogramMetricConfig.variables;
    /// empty: every one), each scored, and the counted lead times of one of ACE's windows (its inference
    /// forward_steps_in_memory; 0: one window of every counted lead time). Each window is read again where its values
    /// move the histograms' edges (the first always).
    std::vector<std::string> histogram_variables;
    std::int64_t histogram_window = 0;
    bool timings = false;  ///< every rank's seconds per phase in the result
    /// Called on every rank after each (initial condition, lead time) it scores: the variable, the pairs this rank
    /// has scored so far and all it will score (every variable). No MPI calls may be made in it.
    std::function<void(const std::string& variable, std::int64_t done, std::int64_t total)> on_step;
    /// How the source's files were opened (the climatology and masks are opened alike); with IoMode::collective
    /// the maps stay in each data rank 0's box for a collective write.
    io::InputAccess access;
};

/// Every rank's seconds per phase, `names` values a rank in world-rank order, and the pairs each rank scored.
struct RunTimings {
    std::vector<std::string> names;
    std::vector<double> per_rank;
    std::int64_t steps = 0;
};

/// What a run gives back: its settings and every channel's scores (on every rank; the maps as
/// AggregatorOptions::maps says).
struct EvaluationResult {
    ReportKind report = ReportKind::pair;
    MeshShape mesh;
    SplitRule split = SplitRule::balanced;
    AreaWeighting weights = AreaWeighting::cos_lat;
    Summation summation = Summation::reproducible;
    ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    io::SourceGrid grid;
    io::ForecastLayout layout;
    io::LeadTimes lead_times;
    DataSplit data_split = DataSplit::initial_conditions;
    io::TimeMeanRows time_means;
    std::string climatology;
    ReportContents contents;
    std::vector<ChannelScores> channels;
    /// With EvaluationPlan::normalize_means: the channels' scores on the normalised fields (the deterministic ones
    /// ACE logs and the time means; no maps), and the channel mean of their time-mean RMSE (ACE's
    /// time_mean_norm/rmse/channel_mean, the loss it selects checkpoints by).
    std::vector<ChannelScores> normalized;
    std::string normalize_means, normalize_stds;
    double normalized_rmse_channel_mean = 0.0;
    /// With the plan's scoring.spectrum: its options, the degrees of each spectrum, and how far the grid's latitudes
    /// lie from the nodes of the transform's grid, which it assumes (latitude_offset_from_nodes_deg).
    std::optional<PowerSpectrumOptions> spectrum;
    std::int64_t spectrum_degrees = 0;
    /// With the plan's scoring.quantiles: its probabilities and method (the values: RegionScores::quantiles).
    std::optional<QuantileOptions> quantiles;
    double spectrum_latitude_offset_deg = 0.0;
    RunTimings timings;  ///< with EvaluationPlan::timings
    /// The run's grid on its mesh (for a collective write of the maps).
    std::optional<ShardedGrid> sharded;
};

/// 1 x H x W with H * W = `ranks` and H the largest divisor of `ranks` not above sqrt(ranks).
[[nodiscard]] MeshShape default_mesh(int ranks);

/// The area weights of `box` of kind `kind` on grid `g` (bounds from the file, or halfway between centres).
[[nodiscard]] AreaWeights make_weights(AreaWeighting kind, const io::SourceGrid& g, const Box& box);

/// Scores `plan.variables` of `source` (every variable when empty) as `plan` says.
/// Collective over `world`: every rank calls it with the same plan and its own open source. Throws
/// ArgumentError or SystemError alike on every rank (agreed), or ends the job where a failure is this rank's
/// own and cannot be agreed (memory exhausted mid-collective).
[[nodiscard]] EvaluationResult evaluate(const EvaluationPlan& plan, const io::ForecastSource& source,
                                        const Communicator& world);

}  // namespace gridshard
