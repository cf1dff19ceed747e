#pragma once
/// @file
/// Every score an evaluation reports, declared once: its names (the key in the report, the table label, ACE's
/// log key), the value it takes (a typed selector, ScoreSource, from which its family and how the values of several
/// samples combine follow), and the validity rule it follows. The aggregator computes what the registry lists for a
/// report, and every writer (the table, the JSON report, the netCDF files) iterates it, so adding a score whose value
/// the aggregator already forms (an Evaluator score, an ensemble value, a statistic) is one entry here; a new kind of
/// value is one selector and its finaliser in the aggregator (docs/evaluation.md). No MPI calls.
///
/// @code
///   for (const gridshard::RegisteredScore* s : gridshard::report_scores(gridshard::ReportKind::forecast,
///                                                                       {.ensemble = true})) {
///       std::printf("%s (%s)\n", s->key.c_str(), std::string(gridshard::to_string(s->family)).c_str());
///   }
/// @endcode
///
/// Adding a score (docs/evaluation.md, "Adding a score"): an entry of gridshard's own goes into make_registry()
/// (src/evaluation/score_registry.cpp); a caller's own, such as a test's, is registered before the aggregators are
/// built, on every rank alike. Here ACE's gen standard deviation's twin for the target, under its own ACE key:
/// @code
///   void register_std_target() {
///       (void)gridshard::register_score(
///           {.report = gridshard::ReportKind::forecast,
///            .key = "weighted_std_target",
///            .label = "std_tgt",
///            .ace_key = "mean/weighted_std_target/{var}",
///            .source = &gridshard::score_definition(gridshard::EvaluatorScore::std_truth),
///            .table_order = 20});
///   }
/// @endcode

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gridshard/metrics/scores.hpp"

namespace gridshard {

/// The two reports of an evaluation: a pair of fields scored step by step (the eval contract: the scores of
/// metrics/scores.hpp under their own names), and a forecast scored per lead time under ACE's names.
enum class ReportKind { pair, forecast };

/// What a score is computed from.
enum class ScoreFamily {
    deterministic,        ///< one Evaluator score (metrics/scores.hpp) of each sample, per lead time
    ensemble,             ///< one ensemble score of each initial condition's members, per lead time (with
                          ///< cell_statistic: a statistic per cell over every initial condition, at chosen leads)
    anomaly_correlation,  ///< the anomaly correlation against the climatology of each sample, per lead time
    time_mean,            ///< per grid cell the mean over the counted lead times and samples, then an area mean
    zonal_mean,           ///< a profile over latitude per lead time, averaged over samples
    /// the spherical power spectrum of each counted (sample, lead time), averaged (ACE's power_spectrum metric):
    /// the mean spectra of the prediction and of the truth, and ACE's summaries of their ratio
    power_spectrum,
    /// the area-weighted fraction of points at or below a threshold, averaged over every counted (sample, lead
    /// time) (ACE's near_zero_fraction metric), and per cell the fraction of those at or below it
    near_zero_fraction,
    /// per cell the least-squares slope of the counted values against time (ACE's trend metric), and the
    /// area-weighted RMSE of the prediction's slopes against the truth's
    trend,
    /// per sample and calendar year the mean of the counted steps' global means (ACE's annual metric): the RMSE of
    /// the yearly ensemble means and the fair CRPS of the samples' yearly means
    annual,
    /// per season and cell the mean over its counted steps (ACE's seasonal metric): the area-weighted RMSE of the
    /// prediction's seasonal means against the truth's
    seasonal,
    /// per sample ACE's monthly regional index of the counted steps' regional means (ACE's enso_index metric): its
    /// standard deviation over time and the band powers of its spectrum, and their ratios to the truth's
    regional_index,
    /// ACE's dynamic histograms of every counted (sample, lead time) (its histogram metric): the percentile of the
    /// prediction's and of the truth's
    histogram,
    /// per cell the regression of the counted steps' values on a reference index, averaged over the samples it
    /// covers (ACE's enso_coefficient metric): the area-weighted RMSE of the prediction's map against the truth's
    index_regression,
    /// per sample ACE's monthly IPO tripole index of the counted steps' regional means (ACE's ipo_index metric): the
    /// spread of its low-pass filtered index, and its ratio to the truth's
    tripole_index,
};

/// How the values of several samples (initial conditions, members) of one lead time combine.
enum class SampleCombination {
    mean_of_samples,  ///< the mean in sample order of the per-sample values
    ratio_of_means,   ///< the mean of `numerator`'s values over the mean of `denominator`'s (WeatherBench 2; for
                      ///< power_spectrum, a summary of the mean spectra's ratio per degree)
    cell_statistic,   ///< a statistic per grid cell over every counted sample, then its area mean
};

/// Which points a score counts.
enum class PolicyRule {
    follows_option,  ///< the evaluation's ValidityPolicy (the fused evaluation's one masking rule)
    own_gradient,    ///< each field's own magnitudes under that policy, NaN left out even under propagate
                     ///< (own_gradient_policy, metrics/field.hpp: ACE's weighted_nanmean beside propagating means)
    all_finite,      ///< points where the truth, every member (and the climatology) are finite, whatever the option
    nan_fill,        ///< every point: NaN filled before the transform (PowerSpectrumOptions::fill), else propagated
};

/// WeatherBench 2's ensemble values of one initial condition's members at a lead time (metrics/ensemble.hpp).
enum class EnsembleValue { ensemble_mean_rmse, spread, crps, fair_crps };
/// The mean over initial conditions of one ensemble value over the mean of another (WeatherBench 2's spread-skill
/// ratio).
struct EnsembleRatio {
    EnsembleValue numerator;
    EnsembleValue denominator;
};
/// ACE's per-cell ensemble statistics over every initial condition at a lead time, then their area means.
enum class CellStatistic { almost_fair_crps, ensemble_mean_rmse, ssr_bias };
/// The statistics of the time-mean maps (metrics/time_mean.hpp).
enum class TimeMeanStatistic { rmse_of_time_mean, time_and_global_mean_bias };
/// The anomaly correlation against the climatology of each sample.
struct AnomalyCorrelationValue {};
/// The zonal-mean profiles, averaged over samples.
enum class ZonalProfile { truth, prediction, error };
/// The mean power spectra and ACE's summaries of their ratio (metrics/spectrum.hpp, SpectrumBiases).
enum class SpectrumValue { prediction, truth, smallest_scale, positive, negative, mean_abs };
/// ACE's near-zero fractions (AggregatorOptions::near_zero_fraction): of the prediction, of the truth, and their
/// difference (ACE's gen_minus_target).
enum class NearZeroValue { prediction, truth, prediction_minus_truth };
/// ACE's trend scores (AggregatorOptions::trend): the area-weighted RMSE of the slope maps.
enum class TrendValue { rmse };
/// ACE's annual scores (AggregatorOptions::annual): the RMSE over years of the ensemble means and the fair CRPS, and
/// with its monthly reference data (Aggregator::set_annual_reference) the R² of the truth's and of the prediction's
/// yearly ensemble means against the reference's.
enum class AnnualValue { rmse, crps, r2_target, r2_gen };
/// ACE's seasonal scores (AggregatorOptions::seasonal): the RMSE of one season's mean maps (in season_names' order),
/// and over the four seasons.
enum class SeasonalValue { rmse_djf, rmse_mam, rmse_jja, rmse_son, rmse };
/// ACE's regional index summaries (AggregatorOptions::regional_index): the prediction's index's standard deviation
/// (and over the truth's), its band powers over 2 to 5 and 1 to 16 years (and over the truth's).
enum class IndexValue { std, std_norm, power_2_5yr, power_2_5yr_norm, power_1_16yr, power_1_16yr_norm };
/// ACE's histogram percentiles (AggregatorOptions::histogram): of the prediction's histogram and of the truth's.
enum class HistogramValue { prediction_percentile, truth_percentile };
/// ACE's ENSO coefficient scores (AggregatorOptions::index_regression): the area-weighted RMSE of the coefficient maps.
enum class IndexRegressionValue { rmse };
/// ACE's IPO tripole index summaries (AggregatorOptions::tripole_index): the filtered index's spread, and over the
/// truth's.
enum class TripoleValue { std, std_norm };

/// The value a registered score takes: a typed selector, so a misspelt one does not compile. A deterministic score is
/// the Evaluator's value of a definition (metrics/scores.hpp: score_definition(), or one of the caller's own, which
/// must outlive the registry).
using ScoreSource =
    std::variant<const ScoreDefinition*, EnsembleValue, EnsembleRatio, CellStatistic, TimeMeanStatistic,
                 AnomalyCorrelationValue, ZonalProfile, SpectrumValue, NearZeroValue, TrendValue, AnnualValue,
                 SeasonalValue, IndexValue, HistogramValue, IndexRegressionValue, TripoleValue>;

/// Where ACE's one-step mean metric (mean_step_<k>: fme's MeanAggregator logs of one forward step) logs a per-lead
/// score: not at all, on the fields, or on the fields and on the normalised fields (mean_step_<k>_norm).
enum class AceStepLog { none, fields, fields_and_normalized };

[[nodiscard]] std::string_view to_string(AceStepLog log) noexcept;

/// The family and the combination over samples a source implies.
[[nodiscard]] ScoreFamily family_of(const ScoreSource& source) noexcept;
[[nodiscard]] SampleCombination combination_of(const ScoreSource& source) noexcept;

[[nodiscard]] std::string_view to_string(ScoreFamily family) noexcept;
[[nodiscard]] std::string_view to_string(PolicyRule rule) noexcept;
/// Which points `rule` counts, in words (for the report's line naming the scores whose rule is not --policy's).
[[nodiscard]] std::string_view describe(PolicyRule rule) noexcept;
[[nodiscard]] std::string_view to_string(SampleCombination combination) noexcept;

/// One score of one report.
struct RegisteredScore {
    ReportKind report = ReportKind::pair;
    std::string key{};      ///< its key in the JSON report and its name in the netCDF files
    std::string label{};    ///< its table column ("" when the table leaves it out)
    std::string ace_key{};  ///< ACE's log key (fme 2026.10.0) with {var} for the variable (and {step} for the lead
                            ///< time of a cell statistic), or "" when ACE has none
    ScoreSource source{};   ///< the value it takes
    PolicyRule policy = PolicyRule::follows_option;
    /// family_of(source) and combination_of(source), filled in by the registry.
    ScoreFamily family = ScoreFamily::deterministic;
    SampleCombination combination = SampleCombination::mean_of_samples;
    /// ACE logs it on the normalised fields too (mean_norm/..., time_mean_norm/...: `--normalize`).
    bool ace_normalized = false;
    /// ACE's mean_step_<k> metric logs it (a deterministic score).
    AceStepLog ace_step_log = AceStepLog::none;
    int table_width = 12;
    int table_digits = 4;
    int table_order = 0;  ///< the forecast table's column order (the pair table's follows the registry)
};

/// What a report holds beyond its deterministic scores.
struct ReportContents {
    bool ensemble = false;             ///< ensemble scores (more than one member)
    bool anomaly_correlation = false;  ///< the anomaly correlation (a climatology)
    bool ensemble_cells = false;       ///< ACE's ensemble scores (cell statistics at chosen lead times)
    bool power_spectrum = false;       ///< the mean power spectra and their summaries
    bool near_zero_fraction = false;   ///< ACE's near-zero fractions
    bool trend = false;                ///< ACE's trend
    bool annual = false;               ///< ACE's annual means
    bool seasonal = false;             ///< ACE's seasonal means
    bool regional_index = false;       ///< ACE's regional index
    bool histogram = false;            ///< ACE's histograms
    bool index_regression = false;     ///< ACE's ENSO coefficient
    bool tripole_index = false;        ///< ACE's IPO tripole index
};

/// ACE's log key of `score` for `variable` (`{var}`), at lead `step` (`{step}`), on the normalised fields
/// (`normalized`: its first segment with "_norm", as mean_norm/... and time_mean_norm/...). "" when ACE has none.
[[nodiscard]] std::string ace_key_of(const RegisteredScore& score, const std::string& variable, bool normalized,
                                     std::int64_t step = 0);

/// Every registered score, in report order: gridshard's own, then those register_score() added.
[[nodiscard]] const std::deque<RegisteredScore>& registered_scores();

/// Adds `score` to the registry after every entry there (its family and combination filled in from its source) and
/// returns it: a score of the caller's own, which every aggregator built afterwards forms and every writer reports
/// (the table when it has a label, the JSON report, the Python module, the ACE drop-in's logs under its ace_key).
/// A deterministic score's ScoreDefinition must outlive every aggregator. Call it before building aggregators, on
/// every rank alike; not thread-safe. Throws ArgumentError for an empty key, a key its report already has, or a
/// deterministic source that names no definition.
const RegisteredScore& register_score(RegisteredScore score);

/// The scores of `kind` with `contents`, in report order.
[[nodiscard]] std::vector<const RegisteredScore*> report_scores(ReportKind kind, ReportContents contents);

/// The scores of `kind` with `contents` in the table, in column order.
[[nodiscard]] std::vector<const RegisteredScore*> table_scores(ReportKind kind, ReportContents contents);

}  // namespace gridshard
