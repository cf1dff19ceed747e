#pragma once
/// @file
/// The streaming aggregator of an evaluation, in the shape of ACE's inference aggregators: built once per
/// variable from the sharded grid, the forecast's shape, this data rank's share of the work, the regions and
/// the options (no MPI calls), then fed one (initial condition, lead time) of truth and members at a time, and
/// finished into every score of the registry (evaluation/score_registry.hpp). A pair of fields is the forecast
/// of one initial condition and one member whose lead times are its steps, every step counted.
///
/// Communication: record() is collective over the spatial group (one fused evaluation per region, one
/// allreduce over the lon group for the zonal means; the ensemble scores and the anomaly correlation one
/// allreduce each; ACE's ensemble statistics none, they are summed per point; with the members split, the ensemble's
/// exchange over the data group; the power spectra the fill's halo exchanges and the transform's all-to-alls); the
/// ranks of a spatial group share their pairs by construction (geometry/work_split.hpp), so nothing has to be matched
/// on ranks that record nothing. finish() is collective over the world: each per-sample value is written into its own
/// slot by the one data rank that scored it (by every rank of its spatial group, which all hold it) and summed over the
/// data group (exact: the other ranks add zeros), the means over samples are then taken in sample order, and the
/// time-mean sums are merged over the data group, so every score is the serial answer bit for bit whatever the mesh, on
/// every rank.
///
/// @code
///   // One variable of a forecast, this data rank's share of it fed pair by pair.
///   gridshard::VariableScores score(const gridshard::ShardedGrid& grid, const gridshard::ForecastExtent& extent,
///                                   const gridshard::WorkShare& share,
///                                   const std::vector<gridshard::RegionWeights>& regions,
///                                   const std::vector<float>& truth, const std::vector<float>& members) {
///       gridshard::AggregatorOptions options;
///       options.report = gridshard::ReportKind::forecast;
///       options.counted_leads = {1, 2, 3};
///       gridshard::Aggregator scores(grid, {extent, 1, share}, regions, options);   // no MPI
///       for (std::int64_t ic = share.initial_conditions.begin; ic < share.initial_conditions.end; ++ic) {
///           for (std::int64_t lead = share.leads.begin; lead < share.leads.end; ++lead) {
///               // (in a real run: this pair's truth and members read into the buffers)
///               scores.record<float>(ic, lead, {truth, 1}, members);   // collective over spatial
///           }
///       }
///       return scores.finish("t2m");   // collective over the world
///   }
/// @endcode

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gridshard/evaluation/score_registry.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/work_split.hpp"
#include "gridshard/io/normalization.hpp"
#include "gridshard/metrics/climate_index.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/flood_fill.hpp"
#include "gridshard/metrics/histogram.hpp"
#include "gridshard/metrics/quantile.hpp"
#include "gridshard/metrics/spectrum.hpp"
#include "gridshard/metrics/time_mean.hpp"
#include "gridshard/metrics/trend.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {

/// The shape of one variable's forecast and this data rank's share of it.
struct AggregatorShape {
    ForecastExtent extent;
    std::int64_t channels = 1;
    WorkShare work{{0, 1}, {0, 1}, {0, 1}, DataSplit::initial_conditions};
};

/// A region scored beside the others: its name, this rank's weights on its box, and the points of the box inside it
/// (row-major indices; none: every point, the globe), whose values its quantiles take.
struct RegionWeights {
    std::string name;
    AreaWeights weights;
    std::optional<std::vector<std::int64_t>> cells{};
};

/// The power spectra an aggregator forms (ACE's power_spectrum metric, the registry's power_spectrum family): the
/// spherical power spectrum of the truth and of every member at each counted lead time, after the NaN fill, averaged
/// over every (sample, counted lead time) exactly; then ACE's summaries of the mean spectra's ratio.
struct PowerSpectrumOptions {
    SpectrumSpec spec{};
    /// ACE's SmoothFloodFill before the transform (each field its own NaN points); none: values that are not
    /// finite propagate into the spectrum.
    std::optional<FloodFillOptions> fill = FloodFillOptions{};
};

/// ACE's near_zero_fraction metric (fme 2026.10.0, NearZeroFractionAggregator) of one variable: over every counted
/// (sample, lead time), the area-weighted fraction of points at or below `eps` (a missing value is not at or below),
/// averaged, for the prediction and the truth (the registry's near_zero_fraction scores, time means of the global
/// region); with `maps`, per cell the fraction of those (sample, lead time) at or below `eps`, not area-weighted
/// (ACE's include_maps). The mean over snapshots of a snapshot's weighted fraction is the weighted mean of the
/// per-cell fractions, so the aggregator keeps only the per-cell counts (exact, 24 bytes per point and channel each
/// for the prediction and the truth) and forms the fractions at finish.
struct NearZeroFractionOptions {
    double eps = 0.0;
    bool maps = false;
};

/// ACE's near_zero_fraction config (fme's NearZeroFractionMetricConfig: variables, eps, per_variable_eps,
/// include_maps) over a run's variables: which variables have near-zero fractions, and each one's threshold.
struct NearZeroFractionConfig {
    std::vector<std::string> variables{};  ///< empty: every variable
    double eps = 0.0;
    std::vector<std::pair<std::string, double>> per_variable_eps{};
    bool include_maps = false;
    /// The options of `variable`'s aggregator (its threshold: per_variable_eps's, else eps), or none when
    /// `variables` does not name it. Throws ArgumentError naming the setting for a threshold below 0 (ACE's rule) or
    /// NaN. No MPI calls.
    [[nodiscard]] std::optional<NearZeroFractionOptions> options_for(const std::string& variable) const;
    /// Throws ArgumentError naming the setting, the name and the `scored` variables for a name in `variables` or
    /// `per_variable_eps` that is not scored or is given twice (ACE leaves such a name out silently; a misspelt one
    /// here would leave its variable without fractions or with the default threshold), and as options_for for every
    /// threshold. No MPI calls.
    void check(const std::vector<std::string>& scored) const;
};

/// Throws ArgumentError naming `setting`, its `field`, the name and the `scored` variables for a name of `names`
/// that is not scored or is given twice (a misspelt name would leave its variable out). No MPI calls.
void check_variable_names(const std::string& setting, const std::string& field, const std::vector<std::string>& names,
                          const std::vector<std::string>& scored);

/// ACE's annual metric (fme's PairedGlobalMeanAnnualAggregator): per sample and calendar year of the valid times, the
/// mean of the counted steps' global area means (the registry's weighted_mean_gen and weighted_mean_target of each
/// sample, exact), kept where the year holds more than 350 days of steps of `timestep_seconds` (ACE's
/// MIN_COMPLETE_YEAR_DAYS); over the kept years, ACE's RMSE of the ensemble means and its fair CRPS of the samples
/// against the truth's ensemble mean.
struct AnnualOptions {
    double timestep_seconds = 0.0;
};

/// The valid time of one (initial condition, lead) pair in the run's calendar: seconds since 2000-01-01 00:00:00 (the
/// trend's times, ACE's reference) and its calendar year and month (the annual and seasonal groups).
struct ValidTime {
    double seconds = std::numeric_limits<double>::quiet_NaN();
    std::int64_t year = 0;
    int month = 0;  ///< 1 to 12
};

/// ACE's seasons (its valid_time.dt.season), in the order gridshard gives them: DJF, MAM, JJA, SON.
inline constexpr std::array<std::string_view, 4> season_names{"DJF", "MAM", "JJA", "SON"};

/// The season of `month` (1 to 12): 0 DJF, 1 MAM, 2 JJA, 3 SON.
[[nodiscard]] constexpr int season_of(int month) noexcept {
    return (month % 12) / 3;
}

/// ACE's regional index (fme's RegionalIndexAggregator, its enso_index metric): per counted (sample, lead time) the
/// weighted mean of the prediction and of the truth with `weights` (this rank's box: ace_regional_weights of the
/// Niño 3.4 box), exact, then per sample ACE's monthly index of each (metrics/climate_index.hpp, over
/// `running_months`) and its summaries. It needs the valid times (Aggregator::record_time).
struct RegionalIndexOptions {
    AreaWeights weights;
    std::int64_t running_months = 5;
};

/// ACE's histogram metric (fme's HistogramAggregator: ComparedDynamicHistograms of 200 bins and the 99.9999th
/// percentile) of one variable: per channel one dynamic histogram (metrics/histogram.hpp) of the truth and one of the
/// members over every counted (sample, lead time), at the points where the truth of the first initial condition's first
/// counted lead time is not NaN (ACE's mask, from its first sample and time), and the percentile of each. The edges
/// follow the windows as ACE's do: the caller marks each window's end (Aggregator::end_histogram_window), every
/// window's range is agreed over the world, each rank bins its own values and the counts are summed once at finish, so
/// the histogram is ACE's serial one of the same windows at every mesh. A window holding a NaN or an infinite value at
/// a counted point is left out of that histogram (ACE skips a NaN window; an infinite one never ends its doubling).
struct HistogramOptions {
    std::int64_t bins = 200;
    double percentile = 99.9999;
};

/// Exact quantiles of a run (gridshard's own scores, no other system's): per region and channel, numpy's
/// `np.nanquantile(values, probabilities, method=method)` of the truth's values (each initial condition's once) and
/// of the prediction's (every member), over every point of the region and every counted lead time of every initial
/// condition, NaN skipped; the same bits at every mesh (metrics/quantile.hpp, QuantileStream). The values are not
/// held: once every pair is recorded the caller gives them again, pass after pass (Aggregator::end_quantile_pass,
/// replay_quantiles): 2 more reads of the run for float32 with few channels and regions, 4 to 6 for float64.
struct QuantileOptions {
    std::vector<double> probabilities;
    QuantileMethod method = QuantileMethod::linear;
};

/// One region's quantiles of one channel (AggregatorOptions::quantiles), on every rank: per probability the
/// truth's and the prediction's (NaN where no value is), and how many values that are not NaN each is of.
struct RegionQuantiles {
    std::vector<double> truth{}, prediction{};
    std::int64_t truth_count = 0, prediction_count = 0;
};

/// One channel's histograms (AggregatorOptions::histogram), on every rank: the edges (bins + 1) and counts of the
/// truth (ACE's target: each initial condition's truth counted once per member, as ACE's folded samples repeat it)
/// and of the prediction, the windows each left out, and the percentiles.
struct ChannelHistograms {
    std::vector<double> truth_edges, prediction_edges;
    std::vector<std::int64_t> truth_counts, prediction_counts;
    std::int64_t truth_windows_left_out = 0, prediction_windows_left_out = 0;
    double truth_percentile = 0.0, prediction_percentile = 0.0;
};

/// ACE's enso_coefficient metric (fme's EnsoCoefficientEvaluatorAggregator) of one variable: per sample and cell the
/// regression coefficient of the counted steps' values on a reference index, sum_t x w / sum_t w^2 over the sample's
/// counted steps, averaged over the samples the index covers (the truth's over the initial conditions, as ACE's
/// repeated targets give it), and the area-weighted RMSE of the prediction's map against the truth's. Each counted
/// pair's values enter an exact sum weighted by w / sum_t w^2 (a TrendAccumulator's sum of t y), so the maps are the
/// same bits at every mesh. 96 bytes a point and channel (the products' sums alone: TrendSums::weighted_sums).
struct IndexRegressionOptions {
    /// Per (initial condition, lead time), initial condition slowest: the index at that pair's time (ACE's
    /// get_sample_index_series: the reference index nearest each time, less its mean over the sample's run); NaN
    /// throughout an initial condition the index does not cover. A rank needs the rows of the initial conditions it
    /// records (the others may be NaN).
    std::vector<double> index;
};

/// ACE's ipo_index metric (fme's PairedIPOIndexAggregator) of one variable: per counted (sample, lead time) the
/// regional means of the prediction and of the truth in ACE's three tripole boxes (`weights`: T1, T2, T3 on this
/// rank's box, ACE's box times cos(lat), no area weights), NaN skipped, exact; then per sample and box ACE's monthly
/// anomalies (metrics/climate_index.hpp, one month), the tripole index T2 - (T1 + T3) / 2, and where every sample has
/// at least 80 years of months, the spread of its 13-year low-pass filtered index. It needs the valid times.
struct TripoleIndexOptions {
    std::array<AreaWeights, 3> weights;
};

struct AggregatorOptions {
    ReportKind report = ReportKind::pair;
    Summation summation = Summation::reproducible;
    ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    /// The lead-time rows the time means count, in order.
    std::vector<std::int64_t> counted_leads;
    /// Whether record() is given a climatology (the anomaly correlation).
    bool anomaly_correlation = false;
    /// Whether finish() forms the time-mean maps, and how: gathered whole onto world rank 0, or (false) kept as
    /// each data rank 0's own box for a collective write.
    bool maps = false;
    bool gather_maps = true;
    /// The registry keys of the deterministic scores to form (empty: every one). A score left out costs nothing:
    /// without the gradient score, no halo is exchanged and no gradient formed.
    std::vector<std::string> deterministic_keys{};
    /// Whether a forecast of several members forms the per-lead ensemble scores (WeatherBench 2's definitions).
    bool lead_ensemble_scores = true;
    /// The lead times at which ACE's ensemble scores (the registry's ensemble cell statistics: almost_fair_crps,
    /// cell_ensemble_mean_rmse, ssr_bias) are formed; none: not formed. Each costs 72 bytes per point and channel
    /// of the box. They need several members held together (not DataSplit::members).
    std::vector<std::int64_t> ensemble_cell_leads{};
    /// With ensemble_cell_leads, also the statistics' maps (ACE's log_mean_maps): ChannelScores::cell_maps.
    bool ensemble_cell_maps = false;
    /// The alpha of ACE's almost-fair CRPS (fme's ensemble aggregator uses 0.95; 1 is the fair CRPS).
    double crps_alpha = 0.95;
    /// The power spectra (none: not formed). Each counted pair costs a transform of the truth and of every member.
    std::optional<PowerSpectrumOptions> spectrum{};
    /// ACE's stats of the variable (io/normalization.hpp), one mean and std per channel: its normalised scores (ACE's
    /// mean_norm and time_mean_norm) are formed beside the others, on the pairs normalised as io::normalize forms
    /// them, by an aggregator of their own (normalized(); normalized_options() says what it forms). A forecast's only.
    std::optional<io::ChannelStats> normalization{};
    /// ACE's near-zero fractions (none: not formed).
    std::optional<NearZeroFractionOptions> near_zero_fraction{};
    /// ACE's trend metric (fme's TrendEvaluatorAggregator): per cell the least-squares slope of the counted pairs'
    /// values against their times (Aggregator::record_time), per year of 365.25 days, of the prediction (every
    /// member) and of the truth, and the area-weighted RMSE of their difference: a TrendAccumulator of each
    /// (metrics/trend.hpp; 72 bytes a point and channel each), whose slopes are a function of exact sums alone, so
    /// the maps are the same bits at every mesh.
    bool trend = false;
    /// ACE's video metric (fme's VideoAggregator, its default videos): per counted lead time and cell the mean over
    /// every sample of the prediction (every member) and of the truth, exact; a lead time not counted is NaN, as
    /// ACE's row of the initial condition, which its video never sees. 48 bytes a point, channel and lead time.
    bool video = false;
    /// With `video`, ACE's extended videos (its enable_extended_videos): per counted lead time and cell the bias of the
    /// mean maps, the RMSE over every sample, the least and the greatest error (prediction - truth, in doubles) over
    /// every sample (NaN where one is NaN; at a lead time not counted +inf and -inf, the empty minimum and maximum, as
    /// ACE's, where the other maps are NaN) and the ratio of the prediction's variance over samples to the truth's, by
    /// ACE's rule E[x^2] - E[x]^2 of exact means (the truth counted once per initial condition, as ACE's repeated
    /// target gives the same means). The squares are summed exactly (each as its two-product). 88 bytes more a point,
    /// channel and lead time.
    bool extended_video = false;
    /// ACE's annual metric (none: not formed); it needs the valid times (Aggregator::record_time) and the global
    /// weighted means of the prediction and the truth, which it adds to deterministic_keys where those leave them out.
    std::optional<AnnualOptions> annual{};
    /// ACE's seasonal metric (fme's SeasonalAggregator): per season of the valid times (record_time) and cell the
    /// exact mean over every counted (sample, lead time) of the prediction (every member) and of the truth, and the
    /// area-weighted RMSE of their difference per season and over the four (the root of the mean of the four
    /// seasons' mean squares), NaN when a season has no counted step. 192 bytes a point and channel.
    bool seasonal = false;
    /// ACE's regional index (none: not formed). 16 bytes a (sample, lead time) and channel.
    std::optional<RegionalIndexOptions> regional_index{};
    /// ACE's histograms (none: not formed); record() then needs windows (Aggregator::end_histogram_window). 2 bytes a
    /// point and channel, and 16 per bin and channel.
    std::optional<HistogramOptions> histogram{};
    /// The run's exact quantiles (none: not formed); record() then needs passes (Aggregator::end_quantile_pass). At
    /// most 8 MiB of histograms.
    std::optional<QuantileOptions> quantiles{};
    /// ACE's ENSO coefficient (none: not formed).
    std::optional<IndexRegressionOptions> index_regression{};
    /// ACE's IPO tripole index (none: not formed). 48 bytes a (sample, lead time) and channel.
    std::optional<TripoleIndexOptions> tripole_index{};
};

/// What the aggregator of the normalised pairs forms for `options` (ACE's normalised aggregators): the deterministic
/// scores ACE logs on normalised fields (the registry's ace_normalized ones) and the time means; no anomaly
/// correlation, maps, ensemble scores or spectra. No MPI calls.
[[nodiscard]] AggregatorOptions normalized_options(const AggregatorOptions& options);

/// One score's values for one channel over one region: `values` holds `width` values per lead time (1 for a
/// scalar score, the latitudes for a zonal profile, the wavenumbers for a spectrum), lead time slowest.
struct ScoreSeries {
    const RegisteredScore* score = nullptr;
    std::int64_t width = 1;
    std::vector<double> values;
};

/// One score at one lead time (ACE's ensemble scores, at AggregatorOptions::ensemble_cell_leads).
struct ScoreAtLead {
    const RegisteredScore* score = nullptr;
    std::int64_t lead = 0;
    double value = 0.0;
};

/// The map of one of ACE's ensemble cell statistics at one lead time (AggregatorOptions::ensemble_cell_maps), held as
/// the time-mean maps are.
struct ScoreMapAtLead {
    const RegisteredScore* score = nullptr;
    std::int64_t lead = 0;
    std::vector<double> values;
};

/// One score over the counted lead times (a time mean) for one channel over one region.
struct ScoreValue {
    const RegisteredScore* score = nullptr;
    double value = 0.0;
};

/// The scores of one channel over one region: every per-lead score and every time mean, in registry order (the
/// cell statistics first, then the mean over the counted lead times of each per-lead score), and the scores at
/// chosen lead times (lead by lead, each in registry order).
struct RegionScores {
    std::string name;
    std::vector<ScoreSeries> per_lead;
    std::vector<ScoreValue> time_means;
    std::vector<ScoreAtLead> at_leads{};
    std::optional<RegionQuantiles> quantiles{};  ///< with AggregatorOptions::quantiles
};

/// ACE's annual means of one channel (fme's annual_diagnostics.nc): `years` contiguous from the first kept year to the
/// last, and per (sample, year) (sample slowest) the mean of the prediction's and of the truth's global means over the
/// year's counted steps, NaN where the year is not kept for that sample (too few steps, or none); `counts` is ACE's
/// counts variable there, the steps over themselves (1 where kept, NaN elsewhere).
struct AnnualMeans {
    std::vector<std::int64_t> years;
    std::int64_t samples = 0;
    std::vector<double> prediction, truth, counts;
};

/// One channel ("NAME", or "NAME[k]" for level k): its regions (global first), its zonal profiles (the
/// registry's zonal_mean scores, global), with AggregatorOptions::spectrum its mean power spectra (the registry's
/// power_spectrum "prediction" and "target", `width` degrees, one row; their summaries are time means of the global
/// region), and with AggregatorOptions::maps its time-mean maps of the prediction and of the error (whole on world
/// rank 0, or each data rank 0's own box; empty elsewhere).
struct ChannelScores {
    std::string name;
    std::vector<RegionScores> regions;
    std::vector<ScoreSeries> profiles;
    std::vector<ScoreSeries> spectra{};
    std::vector<double> prediction_map;
    std::vector<double> bias_map;
    /// With AggregatorOptions::ensemble_cell_maps, per ensemble cell statistic and lead time its map.
    std::vector<ScoreMapAtLead> cell_maps{};
    /// With NearZeroFractionOptions::maps, the per-cell near-zero fractions of the prediction and of the truth, held as
    /// the time-mean maps are.
    std::vector<double> near_zero_prediction_map{};
    std::vector<double> near_zero_truth_map{};
    /// With AggregatorOptions::trend, the per-cell slopes per year of the prediction and of the truth, held as the
    /// time-mean maps are.
    std::vector<double> trend_prediction_map{};
    std::vector<double> trend_truth_map{};
    /// With AggregatorOptions::video (`has_video`, on every rank), per lead time (slowest) the mean maps of the
    /// prediction and of the truth, held as the time-mean maps are (lead times x the map).
    bool has_video = false;
    std::vector<double> video_prediction{};
    std::vector<double> video_truth{};
    /// With AggregatorOptions::extended_video (`has_extended_video`, on every rank), per lead time (slowest) the maps
    /// of ACE's extended videos, held alike: the bias of the mean maps, the RMSE, the least and the greatest error and
    /// the variance ratio.
    bool has_extended_video = false;
    std::vector<double> video_bias{};
    std::vector<double> video_rmse{};
    std::vector<double> video_min_error{};
    std::vector<double> video_max_error{};
    std::vector<double> video_variance_ratio{};
    /// With AggregatorOptions::annual, ACE's annual means on every rank.
    std::optional<AnnualMeans> annual{};
    /// With AggregatorOptions::seasonal (`has_seasonal`, on every rank), per season (DJF, MAM, JJA, SON; slowest) the
    /// mean maps of the prediction and of the truth, held as the time-mean maps are (4 x the map).
    bool has_seasonal = false;
    std::vector<double> seasonal_prediction{};
    std::vector<double> seasonal_truth{};
    /// With AggregatorOptions::regional_index, ACE's index of the prediction and of the truth (per sample: the truth
    /// of its initial condition), on every rank.
    std::optional<MonthlyIndex> index_prediction{}, index_truth{};
    /// With AggregatorOptions::histogram, ACE's histograms.
    std::optional<ChannelHistograms> histograms{};
    /// With AggregatorOptions::index_regression, the coefficient maps of the prediction and of the truth (ACE's
    /// enso_coefficient), held as the time-mean maps are.
    std::vector<double> index_regression_prediction_map{}, index_regression_truth_map{};
    /// With AggregatorOptions::tripole_index, ACE's monthly IPO tripole index of the prediction and of the truth (per
    /// sample: the truth of its initial condition), unfiltered, on every rank.
    std::optional<MonthlyIndex> tripole_prediction{}, tripole_truth{};
    /// The per-lead series of `key` over the first region, or nullptr.
    [[nodiscard]] const ScoreSeries* profile(std::string_view key) const;
};

using VariableScores = std::vector<ChannelScores>;

/// Whether the target of `channel` was missing everywhere: its zonal error profile NaN at every lead time and
/// latitude (a prediction missing everywhere looks the same). ACE leaves such a channel out of a channel mean.
[[nodiscard]] bool target_missing_everywhere(const ChannelScores& channel);

/// ACE's channel mean (fme's aggregators' `channel_mean`): the plain mean, in order, of `values` over the
/// channels that are not `missing`; NaN when every one is. No MPI calls.
[[nodiscard]] double channel_mean(std::span<const double> values, const std::vector<bool>& missing);

/// Seconds an aggregator spent on this rank, by phase (MPI_Wtime): its fused evaluations', the zonal means
/// (their allreduce included), the time sums, and finish().
struct AggregatorTimings {
    EvaluationTimings evaluation;
    double zonal_s = 0.0;
    double time_sums_s = 0.0;
    double finish_s = 0.0;
};

/// One variable's scores, streamed. Keeps copies of the grid and the weights. Move-only.
class Aggregator {
  public:
    /// Allocates everything field-sized (call it where a failure is agreed, check_collectively); no MPI calls.
    /// Throws ArgumentError for a shape whose time sums exceed an MPI message when gathered over the data group.
    Aggregator(const ShardedGrid& grid, AggregatorShape shape, const std::vector<RegionWeights>& regions,
               AggregatorOptions options);
    Aggregator(Aggregator&&) noexcept = default;
    Aggregator(const Aggregator&) = delete;
    Aggregator& operator=(const Aggregator&) = delete;

    /// The bytes an aggregator of `shape` and the run's buffers for it (two pairs of fields) allocate on a rank of
    /// `box` of `grid`, an estimate that errs high; with `options`' spectrum, the power spectra's sums, fill and
    /// transform too (a transform hands each of the `spatial_ranks` whole fields), with its near-zero fractions
    /// their counts, with its trend the trend's sums.
    [[nodiscard]] static std::uint64_t bytes(const Box& box, GridShape grid, const AggregatorShape& shape,
                                             std::size_t regions, std::size_t value_bytes, int data_ranks,
                                             int spatial_ranks = 1, const AggregatorOptions& options = {});

    /// With AggregatorOptions::trend, annual or seasonal (needs_times()), the valid time of (initial condition, lead)
    /// before that pair is recorded; the same on every rank of the spatial group. Throws ArgumentError for seconds
    /// that are not finite, a month outside 1 to 12 or a pair out of range. No MPI calls.
    void record_time(std::int64_t initial_condition, std::int64_t lead, ValidTime time);
    /// Whether record() needs each pair's valid time first (record_time).
    [[nodiscard]] bool needs_times() const noexcept {
        return options_.trend || options_.annual.has_value() || options_.seasonal ||
               options_.regional_index.has_value() || options_.tripole_index.has_value();
    }

    /// With AggregatorOptions::histogram: ends a window of recorded pairs (ACE's record_batch: the pairs recorded since
    /// the last call, on every rank; a rank may have none). Collective over the world: one agreement of each
    /// histogram's range (two allreduces), and at the first window one of ACE's mask unless set_histogram_mask gave it.
    /// Returns whether the window's pairs must be given again, each through replay_histogram, before the next call
    /// (the first window, and one whose range moves the edges: its values binned under the new ones); every rank gets
    /// the same answer and must call again until it is false.
    [[nodiscard]] bool end_histogram_window();
    /// One pair of the window being ended again, for the histograms alone (after end_histogram_window returned true).
    /// No MPI calls.
    template <class T>
    void replay_histogram(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                          std::span<const T> members);
    /// With AggregatorOptions::histogram, optionally before the first pair: this rank's box of the truth of initial
    /// condition 0 at the first counted lead time, whose NaN points the histograms leave out (ACE's mask), so the first
    /// window needs one replay less. No MPI calls.
    template <class T>
    void set_histogram_mask(FieldShard<T> truth);
    [[nodiscard]] bool has_histogram() const noexcept { return options_.histogram.has_value(); }

    /// With AggregatorOptions::quantiles, once every pair is recorded: ends a pass over the run's values (the first is
    /// record()'s). Collective over the world: one allreduce of histograms. Returns whether every counted pair must be
    /// given again, each through replay_quantiles, before the next call; every rank gets the same answer and must
    /// call again until it is false. `T`: the values' type, as record()'s (a rank that recorded nothing too).
    template <class T>
    [[nodiscard]] bool end_quantile_pass();
    /// One pair again, for the quantiles alone (after end_quantile_pass returned true), as record() takes it; a lead
    /// time not counted is passed over. No MPI calls.
    template <class T>
    void replay_quantiles(std::int64_t lead, FieldShard<T> truth, std::span<const T> members);
    [[nodiscard]] bool has_quantiles() const noexcept { return options_.quantiles.has_value(); }
    [[nodiscard]] bool has_annual() const noexcept { return options_.annual.has_value(); }

    /// With AggregatorOptions::annual, before finish: ACE's monthly reference data of its annual metric (fme's
    /// process_monthly_reference), whose yearly means the registry's annual R² scores compare the truth's and the
    /// prediction's yearly ensemble means with. `values`: this rank's box of the reference fields (channels, `samples`,
    /// times, rows, cols; slowest first), `counts` per (sample, time), `years` per time (the first sample's calendar
    /// years, by which ACE groups every sample). Per field its global weighted mean (the aggregator's weights, its
    /// mask too, as ACE's area_weighted_mean of the variable), per sample and year the count-weighted mean of those
    /// (0/0: NaN), and per year their mean over the samples that are not NaN; each sum exact. Collective over the
    /// world: an agreement of the sizes, then one allreduce over the spatial group. Throws ArgumentError on every rank
    /// for sizes that do not fit.
    template <class T>
    void set_annual_reference(std::span<const T> values, std::int64_t samples, std::span<const double> counts,
                              std::span<const std::int64_t> years);
    /// The pair whose truth makes the histograms' mask: (initial condition 0, the first counted lead time).
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> histogram_mask_pair() const noexcept {
        return {0, options_.counted_leads.empty() ? 0 : options_.counted_leads.front()};
    }

    /// Scores one (initial condition, lead time) of this rank's share: `truth` (channels, rows, cols) of the
    /// rank's box, `members` this rank's block of members (members, channels, rows, cols; none when the members
    /// are split and this rank holds none), and with the anomaly correlation `climatology` (channels, rows,
    /// cols). Collective over the spatial group (and over the data group when the members are split).
    template <class T>
    void record(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth, std::span<const T> members,
                std::span<const T> climatology = {});

    /// The per-sample scores (deterministic and, with a climatology, the anomaly correlation; each the mean over every
    /// sample) of the lead times `leads`, per channel: the values finish() will give for them, bit for bit, once every
    /// sample of those lead times is recorded (ACE's per-window time-series logs). Collective over the data group: one
    /// allreduce of the slots of those leads.
    [[nodiscard]] std::vector<std::vector<ScoreSeries>> lead_scores(Range leads) const;

    /// Every score of the report, per channel (and, with AggregatorOptions::normalization, the normalised pairs'
    /// into normalized_scores()). Collective over the world; call once.
    [[nodiscard]] VariableScores finish(const std::string& variable);

    /// With AggregatorOptions::normalization, the aggregator of the normalised pairs (its lead_scores() are ACE's
    /// normalised per-window series); else nullptr.
    [[nodiscard]] const Aggregator* normalized() const noexcept { return normalized_.get(); }
    /// With AggregatorOptions::normalization, after finish(): the scores of the normalised pairs; else empty.
    [[nodiscard]] const VariableScores& normalized_scores() const noexcept { return normalized_scores_; }

    [[nodiscard]] const AggregatorTimings& timings() const noexcept { return timings_; }

  private:
    struct Slots {
        std::int64_t samples, leads, regions, scores, channels;
        [[nodiscard]] std::size_t size() const;
        [[nodiscard]] std::size_t at(std::int64_t s, std::int64_t l, std::int64_t r, std::int64_t k,
                                     std::int64_t c) const;
        [[nodiscard]] double sample_mean(const std::vector<double>& values, std::int64_t l, std::int64_t r,
                                         std::int64_t k, std::int64_t c) const;
    };
    // Per point, the sums over initial conditions of the ensemble statistics at one lead time.
    struct CellSums {
        std::int64_t lead;
        TimeMeanAccumulator squared_error, variance, crps;
    };
    template <class T>
    [[nodiscard]] FieldShard<T> repeated(std::vector<T>& buffer, FieldShard<T> one) const;
    // ACE's ensemble scores of one lead's sums over each region (collective over the world).
    [[nodiscard]] std::vector<std::vector<ScoreAtLead>> cell_scores(CellSums& sums, VariableScores& out);
    // The power spectra of this pair's truth (when `with_truth`) and members, stacked in `stacked`, added to their
    // sums (collective over the spatial group).
    template <class T>
    void record_spectra(FieldShard<T> truth, std::span<const T> members, bool with_truth, std::vector<T>& stacked);
    // The mean spectra and their summaries into `out` (collective over the data group).
    void finish_spectra(VariableScores& out);
    // The near-zero indicators of this pair's truth (when `with_truth`) and members added to their counts (no MPI).
    template <class T>
    void record_near_zero(FieldShard<T> truth, std::span<const T> members, bool with_truth);
    // The near-zero fractions and maps into `out` (collective over the world).
    void finish_near_zero(VariableScores& out);
    // The trend's sums of this pair's truth (when `with_truth`) and members at the pair's time (no MPI calls).
    template <class T>
    void record_trend(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                      std::span<const T> members, bool with_truth);
    // The slopes, their RMSE and maps into `out` (collective over the world).
    void finish_trend(VariableScores& out);
    // The extended video's sums of this pair's errors, members' squares and (when `with_truth`) truth's squares, and
    // its least and greatest errors (no MPI calls).
    template <class T>
    void record_extended_video(std::int64_t lead, FieldShard<T> truth, std::span<const T> members, bool with_truth);
    // The video's mean maps, and the extended video's maps, into `out` (collective over the world).
    void finish_video(VariableScores& out);
    // The pair's valid time (record_time's; throws ArgumentError naming `setting` when none was given).
    [[nodiscard]] const ValidTime& time_of(std::int64_t initial_condition, std::int64_t lead,
                                           const std::string& setting) const;
    // The annual means and the seasonal maps and scores into `out` (finish_annual: no MPI calls, from the per-sample
    // global means once summed; finish_seasonal: collective over the world).
    void finish_annual(VariableScores& out) const;
    // With set_annual_reference's data, its mean of each of `years` for `channel` (empty without it); throws
    // ArgumentError for a year it lacks (no MPI calls).
    [[nodiscard]] std::vector<double> reference_of(std::int64_t channel, const std::vector<std::int64_t>& years) const;
    // The regional means of this pair's truth (when `with_truth`) and members (collective over the spatial group), and
    // the indices and their summaries into `out` (no MPI calls, once the means are summed over the data group).
    template <class T>
    void record_index(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                      std::span<const T> members, bool with_truth);
    void finish_index(VariableScores& out);
    // The truth (when `with_truth`) and the members held stacked in index_stacked_; returns how many fields (no MPI).
    template <class T>
    std::int64_t stack_for_index(FieldShard<T> truth, std::span<const T> members, bool with_truth);
    // The regional means of the stacked fields (channels per field) into the per-(sample, lead, channel, box) slots of
    // `prediction` and the per-(initial condition, lead, channel, box) slots of `truth` (no MPI calls).
    void store_index_means(std::span<const double> means, std::int64_t initial_condition, std::int64_t lead,
                           bool with_truth, std::vector<double>& prediction, std::vector<double>& truth,
                           std::int64_t boxes = 1, std::int64_t box = 0) const;
    // ACE's monthly indices of the prediction's and the truth's means of one channel and box (the regional index's with
    // one box, the tripole's with three), over `running` months (no MPI calls).
    [[nodiscard]] std::pair<MonthlyIndex, MonthlyIndex> monthly_indices(std::int64_t channel, std::int64_t boxes,
                                                                        std::int64_t box, std::int64_t running) const;
    // Throws ArgumentError naming the setting for annual means of a pair report or a timestep not above 0; keeps the
    // per-sample global means they take among the deterministic keys. No MPI calls.
    static void check_annual(AggregatorOptions& options);
    // Every pair's valid time on every rank (collective over data: two allreduces of the pairs).
    void merge_times_over_data();
    void finish_seasonal(VariableScores& out);
    // The histograms' work on one pair of the window (the phase's: the mask's truth kept, the range observed and the
    // values binned under the current edges, or binned under the window's edges; no MPI calls), and their counts
    // summed and percentiles into `out` (collective over the world).
    template <class T>
    void record_histogram(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                          std::span<const T> members, bool with_truth);
    void finish_histogram(VariableScores& out);
    // The quantiles' stream of the values' type (made at its first use: the same on every rank), a pair's values
    // added to it where the quantiles are formed and its lead time counted (the truth by the data rank that holds
    // member 0; no MPI calls), and the quantiles into `out` (no MPI calls; ArgumentError on every rank alike when the
    // passes have not ended).
    template <class T>
    QuantileStream<T>& quantile_stream();
    template <class T>
    void record_quantiles(std::int64_t lead, FieldShard<T> truth, std::span<const T> members);
    void finish_quantiles(VariableScores& out) const;
    // The index regression's sums of this pair's truth (when `with_truth`) and members (no MPI calls), and its maps and
    // RMSE into `out` (collective over the world).
    template <class T>
    void record_index_regression(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                 std::span<const T> members, bool with_truth);
    void finish_index_regression(VariableScores& out);
    // Its sums and the initial conditions' index variances (throws ArgumentError for an index of the wrong size).
    void start_index_regression();
    // The tripole boxes' NaN-skipping means of this pair's truth (when `with_truth`) and members (collective over the
    // spatial group: three allreduces), and the index and its filtered spread into `out` (no MPI calls, once the
    // means are summed over the data group: collective over data).
    template <class T>
    void record_tripole(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                        std::span<const T> members, bool with_truth);
    void finish_tripole(VariableScores& out);
    // ACE's climate families of the options (near-zero fractions, trend, video, annual and seasonal means): their sums
    // made (no MPI calls), a counted pair recorded into them (the truth once, by the data rank that holds member 0, its
    // only copy when the members are split; no MPI calls), and finished into `out` (collective over the world).
    void start_climate_families();
    template <class T>
    void record_climate_families(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                 std::span<const T> members);
    void finish_climate_families(VariableScores& out);
    // Per channel, the maps `part` (channels, rows, cols of this rank's box, the same on every data rank) as the
    // maps are held: whole on world rank 0 with AggregatorOptions::gather_maps (one gather over the world), else each
    // data rank 0's own box; empty elsewhere.
    [[nodiscard]] std::vector<std::vector<double>> held_maps(const std::vector<double>& part) const;
    // A climate family's two maps (the prediction's and the truth's, this rank's box): the area-weighted RMSE of their
    // difference into the global time means of the scores of `Value`, and both held into `out` as `gen_map` and
    // `target_map` (collective over the world).
    template <class Value>
    void finish_compared_maps(VariableScores& out, const std::vector<double>& gen, const std::vector<double>& target,
                              std::vector<double> ChannelScores::*gen_map,
                              std::vector<double> ChannelScores::*target_map) const;
    // `values` normalised with AggregatorOptions::normalization into `out` (no MPI calls).
    template <class T>
    const std::vector<T>& normalize_into(std::span<const T> values, std::vector<T>& out) const;

    ShardedGrid grid_;
    AggregatorShape shape_;
    AggregatorOptions options_;
    std::vector<RegionWeights> regions_;
    std::vector<const RegisteredScore*> scores_;
    std::vector<const RegisteredScore*> per_sample_;  // the scores of det_'s slots, in slot order
    std::vector<Evaluator> evaluators_;               // one a region, when this rank holds members
    Slots det_{}, ens_{}, zonal_prediction_{}, zonal_truth_{};
    std::vector<double> det_values_, ens_values_, zonal_prediction_values_, zonal_truth_values_;
    std::optional<TimeMeanAccumulator> prediction_sums_, error_sums_;
    // With the near-zero fractions, the sums over counted pairs of each point's indicator (value <= eps).
    std::optional<TimeMeanAccumulator> near_zero_prediction_, near_zero_truth_;
    std::vector<double> near_zero_indicator_;
    // With the trend, annual or seasonal means: per (initial condition, lead) its valid time (seconds NaN: not given);
    // with the trend, the trends' sums of the
    // prediction (every member) and of the truth.
    std::vector<ValidTime> pair_times_;
    std::optional<TrendAccumulator> trend_prediction_, trend_truth_;
    // With the annual means' reference data: its years and per (channel, year) the mean over its samples.
    std::vector<std::int64_t> reference_years_;
    std::vector<double> reference_means_;
    // With the index regression: the sums of the prediction's and of the truth's values weighted by w / sum_t w^2,
    // and per initial condition its sum_t w^2 over the counted lead times (NaN: not covered).
    std::optional<TrendAccumulator> regression_prediction_, regression_truth_;
    std::vector<double> index_variance_;
    // With the video: per lead time the sums over samples of the prediction and of the truth (empty where not counted).
    std::vector<std::optional<TimeMeanAccumulator>> video_prediction_, video_truth_;
    // With the extended video: per lead time the sums over samples of the squared errors and of the squares of the
    // prediction and of the truth, and the least and greatest errors (empty where not counted).
    struct ExtendedVideoSums {
        TimeMeanAccumulator squared_error, prediction_squares, truth_squares;
        std::vector<double> min_error, max_error;
    };
    std::vector<std::optional<ExtendedVideoSums>> extended_video_;
    // With the seasonal means: per season the sums over its counted pairs of the prediction and of the truth.
    std::vector<TimeMeanAccumulator> seasonal_prediction_, seasonal_truth_;
    // With the regional index: per (sample, lead, channel) the prediction's regional means, per (initial condition,
    // lead, channel) the truth's (0 where this rank did not form them, so the sums over data are exact), and the
    // fields stacked for their one weighted mean.
    std::vector<double> index_prediction_values_, index_truth_values_, index_stacked_;
    // With the tripole index: as the regional index's, per box (fastest).
    std::vector<double> tripole_prediction_values_, tripole_truth_values_;
    std::vector<CellSums> cell_sums_;
    // With the histograms: per channel the truth's (even) and the prediction's (odd) histogram, ACE's mask of the box
    // (1: left out) once known, the window's phase, and per histogram the window's local range (lowest, highest,
    // whether a value was not finite), its counts under the current edges and whether it awaits them.
    enum class HistogramPhase { mask, range, binning };
    struct WindowHistogram {
        DynamicHistogram committed;
        double lowest = std::numeric_limits<double>::infinity();
        double highest = -std::numeric_limits<double>::infinity();
        bool not_finite = false, awaiting = false;
        std::vector<std::int64_t> window_counts{};
        std::int64_t windows_left_out = 0;
    };
    std::vector<WindowHistogram> histograms_;
    std::vector<std::uint8_t> histogram_mask_;
    bool histogram_mask_known_ = false;
    HistogramPhase histogram_phase_ = HistogramPhase::mask;
    bool histogram_values_double_ = false;     // the type of the values recorded (their range's padding is in it)
    std::int64_t histogram_window_pairs_ = 0;  // pairs recorded since the last window's end
    // With the quantiles: one stream of samples (region, field: truth then prediction, channel; slowest first).
    std::optional<QuantileStream<float>> float_quantiles_;
    std::optional<QuantileStream<double>> double_quantiles_;
    // Per channel and degree, the exact sums of the spectra of the truth and of the members, and how many of each.
    std::int64_t spectrum_degrees_ = 0;
    std::vector<ExactSum> truth_spectra_, prediction_spectra_;
    std::int64_t truth_spectrum_count_ = 0, prediction_spectrum_count_ = 0;
    // The spectrum's and the fill's plans, made at the first pair the spectra are formed of.
    std::optional<SpectrumPlan> spectrum_plan_;
    std::optional<FloodFillPlan> fill_plan_;
    std::vector<bool> counted_;
    // Per value type: the repeated truth, the repeated climatology, the truth and members stacked for the spectra, the
    // normalised truth and members.
    std::vector<float> float_scratch_[5];
    std::vector<double> double_scratch_[5];
    AggregatorTimings timings_;
    std::unique_ptr<Aggregator> normalized_;
    VariableScores normalized_scores_;
};

}  // namespace gridshard
