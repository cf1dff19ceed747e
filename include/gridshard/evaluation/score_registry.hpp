#pragma once
/// @file
/// Every score an evaluation reports, declared once: its names (the key in the report, the table label, ACE's
/// log key), its family, how the values of several samples combine, and the validity rule it follows. The
/// aggregator computes what the registry lists for a report, and every writer (the table, the JSON report, the
/// netCDF files) iterates it, so adding a scalar score is one entry here and, for a new kind of value, one
/// finaliser in the aggregator (docs/evaluation.md). No MPI calls.
///
/// @code
///   for (const gridshard::RegisteredScore* s : gridshard::report_scores(gridshard::ReportKind::forecast,
///                                                                       {.ensemble = true})) {
///       std::printf("%s (%s)\n", s->key.c_str(), std::string(gridshard::to_string(s->family)).c_str());
///   }
/// @endcode

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
    ScoreFamily family = ScoreFamily::deterministic;
    SampleCombination combination = SampleCombination::mean_of_samples;
    PolicyRule policy = PolicyRule::follows_option;
    /// The value it takes: the Evaluator score (deterministic), the EnsembleScores member (ensemble; with
    /// cell_statistic "almost_fair_crps", "ensemble_mean_rmse" or "ssr_bias" of the cells' statistics), the
    /// accumulator statistic (time_mean: "rmse_of_time_mean" or "time_and_global_mean_bias"), the profile
    /// (zonal_mean: "truth", "prediction" or "error"), the mean spectrum (power_spectrum: "prediction" or "truth") or
    /// the summary of their ratio (power_spectrum with ratio_of_means: a SpectrumBiases member, "smallest_scale",
    /// "positive", "negative" or "mean_abs"); for ratio_of_means of ensemble scores the numerator's key.
    std::string source{};
    std::string denominator{};  ///< for ratio_of_means: the denominator's key
    /// ACE logs it on the normalised fields too (mean_norm/..., time_mean_norm/...: `--normalize`).
    bool ace_normalized = false;
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
};

/// ACE's log key of `score` for `variable` (`{var}`), at lead `step` (`{step}`), on the normalised fields
/// (`normalized`: its first segment with "_norm", as mean_norm/... and time_mean_norm/...). "" when ACE has none.
[[nodiscard]] std::string ace_key_of(const RegisteredScore& score, const std::string& variable, bool normalized,
                                     std::int64_t step = 0);

/// Every registered score, in report order.
[[nodiscard]] const std::vector<RegisteredScore>& registered_scores();

/// The scores of `kind` with `contents`, in report order.
[[nodiscard]] std::vector<const RegisteredScore*> report_scores(ReportKind kind, ReportContents contents);

/// The scores of `kind` with `contents` in the table, in column order.
[[nodiscard]] std::vector<const RegisteredScore*> table_scores(ReportKind kind, ReportContents contents);

}  // namespace gridshard
