#include "gridshard/evaluation/score_registry.hpp"

#include <algorithm>
#include <cctype>
#include <deque>

#include "gridshard/core/error.hpp"
#include "gridshard/metrics/scores.hpp"

namespace gridshard {
namespace {

using F = ScoreFamily;
using C = SampleCombination;

// ACE's power_spectrum metric in `report`: the mean spectra (files only), then the summaries of their ratio under
// ACE's names (fme's inference spectrum aggregator, power_spectrum/<summary>/<var>), in the table after the others.
void add_power_spectrum(std::vector<RegisteredScore>& scores, ReportKind report, int width, int digits) {
    const int order = 100;  // after every other column, in both tables
    scores.push_back(
        {.report = report, .key = "prediction", .source = SpectrumValue::prediction, .policy = PolicyRule::nan_fill});
    scores.push_back(
        {.report = report, .key = "target", .source = SpectrumValue::truth, .policy = PolicyRule::nan_fill});
    const struct {
        const char* key;
        const char* label;
        SpectrumValue value;
    } summaries[] = {{"smallest_scale_norm_bias", "ps_smallest", SpectrumValue::smallest_scale},
                     {"positive_norm_bias", "ps_positive", SpectrumValue::positive},
                     {"negative_norm_bias", "ps_negative", SpectrumValue::negative},
                     {"mean_abs_norm_bias", "ps_mean_abs", SpectrumValue::mean_abs}};
    for (int k = 0; k < 4; ++k) {
        scores.push_back({.report = report,
                          .key = summaries[k].key,
                          .label = summaries[k].label,
                          .ace_key = std::string("power_spectrum/") + summaries[k].key + "/{var}",
                          .source = summaries[k].value,
                          .policy = PolicyRule::nan_fill,
                          .table_width = width,
                          .table_digits = digits,
                          .table_order = order + k});
    }
}

// The registry: the pair's scores are the fused evaluation's own (metrics/scores.hpp), under their names; the
// forecast's under ACE's. Each entry names its value; its family and combination follow from it. A deque, so that
// register_score() keeps every entry where the aggregators point.
std::deque<RegisteredScore> make_registry() {
    std::vector<RegisteredScore> scores;
    for (const ScoreDefinition& d : evaluation_scores()) {
        scores.push_back({.report = ReportKind::pair,
                          .key = d.name,
                          .label = d.label,
                          .source = &d,
                          .table_width = d.table_width,
                          .table_digits = d.table_digits});
    }
    scores.push_back({.report = ReportKind::pair,
                      .key = "rmse_of_time_mean",
                      .label = "rmse(tmean)",
                      .source = TimeMeanStatistic::rmse_of_time_mean});
    scores.push_back({.report = ReportKind::pair,
                      .key = "time_and_global_mean_bias",
                      .label = "bias(tmean)",
                      .source = TimeMeanStatistic::time_and_global_mean_bias});
    scores.push_back({.report = ReportKind::pair, .key = "truth", .source = ZonalProfile::truth});
    scores.push_back({.report = ReportKind::pair, .key = "pred", .source = ZonalProfile::prediction});
    add_power_spectrum(scores, ReportKind::pair, 12, 4);

    for (std::size_t k = 0; k < scores.size(); ++k) {
        if (!std::holds_alternative<SpectrumValue>(scores[k].source)) {
            scores[k].table_order = static_cast<int>(k);  // the pair's table follows the registry
        }
    }
    const auto forecast = [&](RegisteredScore s) {
        s.report = ReportKind::forecast;
        s.table_width = 11;
        s.table_digits = 5;
        scores.push_back(std::move(s));
    };
    // Deterministic, per lead time: ACE's names for the Evaluator's scores. The gradient score is ACE's rule:
    // each field's mean over its own valid points.
    forecast({.key = "weighted_rmse",
              .label = "rmse",
              .ace_key = "mean/weighted_rmse/{var}",
              .source = &score_definition(EvaluatorScore::rmse),
              .ace_normalized = true,
              .ace_step_log = AceStepLog::fields_and_normalized,
              .table_order = 1});
    forecast({.key = "weighted_bias",
              .label = "bias",
              .ace_key = "mean/weighted_bias/{var}",
              .source = &score_definition(EvaluatorScore::bias),
              .ace_normalized = true,
              .ace_step_log = AceStepLog::fields,
              .table_order = 2});
    forecast({.key = "weighted_mean_gen",
              .ace_key = "mean/weighted_mean_gen/{var}",
              .source = &score_definition(EvaluatorScore::mean_pred),
              .ace_normalized = true});
    forecast({.key = "weighted_mean_target",
              .ace_key = "mean/weighted_mean_target/{var}",
              .source = &score_definition(EvaluatorScore::mean_truth),
              .ace_normalized = true});
    forecast({.key = "weighted_std_gen",
              .ace_key = "mean/weighted_std_gen/{var}",
              .source = &score_definition(EvaluatorScore::std_pred),
              .ace_normalized = true});
    forecast({.key = "weighted_grad_mag_percent_diff",
              .label = "grad%",
              .ace_key = "mean/weighted_grad_mag_percent_diff/{var}",
              .source = &score_definition(EvaluatorScore::grad_mag_percent_diff_own_points),
              .policy = PolicyRule::own_gradient,
              .ace_step_log = AceStepLog::fields,
              .table_order = 3});
    // Ensemble, per lead time: the values of each initial condition's members (metrics/ensemble.hpp).
    forecast({.key = "ensemble_mean_rmse",
              .label = "ens_rmse",
              .source = EnsembleValue::ensemble_mean_rmse,
              .policy = PolicyRule::all_finite,
              .table_order = 6});
    forecast({.key = "spread", .source = EnsembleValue::spread, .policy = PolicyRule::all_finite});
    forecast({.key = "spread_skill_ratio",
              .label = "ssr",
              .source = EnsembleRatio{EnsembleValue::spread, EnsembleValue::ensemble_mean_rmse},
              .policy = PolicyRule::all_finite,
              .table_order = 7});
    forecast({.key = "crps",
              .label = "crps",
              .source = EnsembleValue::crps,
              .policy = PolicyRule::all_finite,
              .table_order = 8});
    forecast({.key = "fair_crps",
              .label = "fair_crps",
              .source = EnsembleValue::fair_crps,
              .policy = PolicyRule::all_finite,
              .table_order = 9});
    // ACE's ensemble scores at a lead time (fme's one-step ensemble aggregator, ensemble_step_<k>): per grid cell a
    // statistic of the members over every initial condition, then its area mean; only at the lead times
    // AggregatorOptions::ensemble_cell_leads names.
    forecast({.key = "almost_fair_crps",
              .ace_key = "ensemble_step_{step}/crps/{var}",
              .source = CellStatistic::almost_fair_crps});
    forecast({.key = "cell_ensemble_mean_rmse",
              .ace_key = "ensemble_step_{step}/ensemble_mean_rmse/{var}",
              .source = CellStatistic::ensemble_mean_rmse});
    forecast({.key = "ssr_bias", .ace_key = "ensemble_step_{step}/ssr_bias/{var}", .source = CellStatistic::ssr_bias});
    forecast({.key = "acc",
              .label = "acc",
              .source = AnomalyCorrelationValue{},
              .policy = PolicyRule::all_finite,
              .table_order = 10});
    // Time means of the maps (ACE's time_mean/rmse and time_mean/bias), then every per-lead score's mean over
    // the counted lead times (no entry of its own: the writers add it to each per-lead score).
    forecast({.key = "rmse",
              .label = "rmse(tmean)",
              .ace_key = "time_mean/rmse/{var}",
              .source = TimeMeanStatistic::rmse_of_time_mean,
              .ace_normalized = true,
              .table_order = 4});
    forecast({.key = "bias",
              .label = "bias(tmean)",
              .ace_key = "time_mean/bias/{var}",
              .source = TimeMeanStatistic::time_and_global_mean_bias,
              .table_order = 5});
    // Zonal means over (lead time, latitude), ACE's ZonalMeanAggregator's gen and error.
    forecast({.key = "gen", .source = ZonalProfile::prediction});
    forecast({.key = "error", .source = ZonalProfile::error});
    add_power_spectrum(scores, ReportKind::forecast, 11, 5);
    // ACE's near_zero_fraction metric (fme's NearZeroFractionAggregator): gen and gen_minus_target under its
    // default name (the drop-in puts the metric's configured name first), the truth's fraction beside them.
    forecast({.key = "near_zero_fraction_gen",
              .label = "nz_gen",
              .ace_key = "near_zero_fraction/gen/{var}",
              .source = NearZeroValue::prediction,
              .table_order = 110});
    forecast({.key = "near_zero_fraction_target", .source = NearZeroValue::truth});
    forecast({.key = "near_zero_fraction_gen_minus_target",
              .label = "nz_diff",
              .ace_key = "near_zero_fraction/gen_minus_target/{var}",
              .source = NearZeroValue::prediction_minus_truth,
              .table_order = 111});
    // ACE's trend metric (fme's TrendEvaluatorAggregator): the RMSE of the slope maps.
    forecast({.key = "trend_rmse",
              .label = "trend_rmse",
              .ace_key = "trend/weighted_rmse/{var}",
              .source = TrendValue::rmse,
              .table_order = 112});
    // ACE's annual metric (fme's PairedGlobalMeanAnnualAggregator, under its default name "annual").
    forecast({.key = "annual_rmse", .ace_key = "annual/rmse/{var}", .source = AnnualValue::rmse});
    forecast({.key = "annual_crps", .ace_key = "annual/crps/{var}", .source = AnnualValue::crps});
    forecast({.key = "annual_r2_target", .ace_key = "annual/r2/{var}_target", .source = AnnualValue::r2_target});
    forecast({.key = "annual_r2_gen", .ace_key = "annual/r2/{var}_gen", .source = AnnualValue::r2_gen});
    // ACE's seasonal metric (fme's SeasonalAggregator, under its default name "seasonal").
    forecast({.key = "seasonal_rmse", .ace_key = "seasonal/time-mean-rmse/{var}", .source = SeasonalValue::rmse});
    for (const auto& [season, value] :
         {std::pair{"DJF", SeasonalValue::rmse_djf}, std::pair{"MAM", SeasonalValue::rmse_mam},
          std::pair{"JJA", SeasonalValue::rmse_jja}, std::pair{"SON", SeasonalValue::rmse_son}}) {
        std::string lower(season);
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
        forecast({.key = "seasonal_rmse_" + lower,
                  .ace_key = std::string("seasonal/time-mean-rmse/{var}-") + season,
                  .source = value});
    }
    // ACE's enso_index metric (fme's PairedRegionalIndexAggregator, its default name): the Niño 3.4 index's summaries.
    for (const auto& [suffix, value] : {std::pair{"std", IndexValue::std}, std::pair{"std_norm", IndexValue::std_norm},
                                        std::pair{"power_2_5yr", IndexValue::power_2_5yr},
                                        std::pair{"power_2_5yr_norm", IndexValue::power_2_5yr_norm},
                                        std::pair{"power_1_16yr", IndexValue::power_1_16yr},
                                        std::pair{"power_1_16yr_norm", IndexValue::power_1_16yr_norm}}) {
        forecast({.key = std::string("nino34_index_") + suffix,
                  .ace_key = std::string("enso_index/{var}_nino34_index_") + suffix,
                  .source = value});
    }
    // ACE's histogram metric (fme's HistogramAggregator, its default name): the 99.9999th percentiles.
    forecast({.key = "histogram_percentile_gen",
              .ace_key = "histogram/prediction/99.9999th-percentile/{var}",
              .source = HistogramValue::prediction_percentile});
    forecast({.key = "histogram_percentile_target",
              .ace_key = "histogram/target/99.9999th-percentile/{var}",
              .source = HistogramValue::truth_percentile});
    // ACE's enso_coefficient metric (fme's EnsoCoefficientEvaluatorAggregator, its default name).
    forecast({.key = "enso_coefficient_rmse",
              .ace_key = "enso_coefficient/rmse/{var}",
              .source = IndexRegressionValue::rmse});
    // ACE's ipo_index metric (fme's PairedIPOIndexAggregator, its default name): the filtered tripole index's spread.
    forecast({.key = "ipo_tpi_std", .ace_key = "ipo_index/{var}_ipo_tpi_std", .source = TripoleValue::std});
    forecast(
        {.key = "ipo_tpi_std_norm", .ace_key = "ipo_index/{var}_ipo_tpi_std_norm", .source = TripoleValue::std_norm});
    for (RegisteredScore& s : scores) {
        s.family = family_of(s.source);
        s.combination = combination_of(s.source);
    }
    return {scores.begin(), scores.end()};
}

std::deque<RegisteredScore>& registry() {
    static std::deque<RegisteredScore> scores = make_registry();
    return scores;
}

}  // namespace

ScoreFamily family_of(const ScoreSource& source) noexcept {
    struct {
        F operator()(const ScoreDefinition*) const { return F::deterministic; }
        F operator()(EnsembleValue) const { return F::ensemble; }
        F operator()(EnsembleRatio) const { return F::ensemble; }
        F operator()(CellStatistic) const { return F::ensemble; }
        F operator()(TimeMeanStatistic) const { return F::time_mean; }
        F operator()(AnomalyCorrelationValue) const { return F::anomaly_correlation; }
        F operator()(ZonalProfile) const { return F::zonal_mean; }
        F operator()(SpectrumValue) const { return F::power_spectrum; }
        F operator()(NearZeroValue) const { return F::near_zero_fraction; }
        F operator()(TrendValue) const { return F::trend; }
        F operator()(AnnualValue) const { return F::annual; }
        F operator()(SeasonalValue) const { return F::seasonal; }
        F operator()(IndexValue) const { return F::regional_index; }
        F operator()(HistogramValue) const { return F::histogram; }
        F operator()(IndexRegressionValue) const { return F::index_regression; }
        F operator()(TripoleValue) const { return F::tripole_index; }
    } family;
    return std::visit(family, source);
}

SampleCombination combination_of(const ScoreSource& source) noexcept {
    if (std::holds_alternative<EnsembleRatio>(source)) {
        return C::ratio_of_means;
    }
    if (std::holds_alternative<CellStatistic>(source) || std::holds_alternative<TimeMeanStatistic>(source) ||
        std::holds_alternative<NearZeroValue>(source) || std::holds_alternative<TrendValue>(source) ||
        std::holds_alternative<SeasonalValue>(source) || std::holds_alternative<IndexRegressionValue>(source)) {
        return C::cell_statistic;
    }
    if (const auto* value = std::get_if<SpectrumValue>(&source)) {
        return *value == SpectrumValue::prediction || *value == SpectrumValue::truth ? C::mean_of_samples
                                                                                     : C::ratio_of_means;
    }
    return C::mean_of_samples;
}

std::string_view to_string(ScoreFamily family) noexcept {
    switch (family) {
        case F::deterministic:
            return "deterministic";
        case F::ensemble:
            return "ensemble";
        case F::anomaly_correlation:
            return "anomaly_correlation";
        case F::time_mean:
            return "time_mean";
        case F::zonal_mean:
            return "zonal_mean";
        case F::power_spectrum:
            return "power_spectrum";
        case F::near_zero_fraction:
            return "near_zero_fraction";
        case F::trend:
            return "trend";
        case F::annual:
            return "annual";
        case F::seasonal:
            return "seasonal";
        case F::regional_index:
            return "regional_index";
        case F::histogram:
            return "histogram";
        case F::index_regression:
            return "index_regression";
        case F::tripole_index:
            return "tripole_index";
    }
    return "deterministic";
}

std::string_view to_string(SampleCombination combination) noexcept {
    switch (combination) {
        case C::mean_of_samples:
            return "mean_of_samples";
        case C::ratio_of_means:
            return "ratio_of_means";
        case C::cell_statistic:
            return "cell_statistic";
    }
    return "mean_of_samples";
}

std::string_view to_string(PolicyRule rule) noexcept {
    switch (rule) {
        case PolicyRule::follows_option:
            return "follows_option";
        case PolicyRule::own_gradient:
            return "own magnitudes not NaN";
        case PolicyRule::all_finite:
            return "all_finite";
        case PolicyRule::nan_fill:
            return "nan_fill";
    }
    return "follows_option";
}

std::string_view to_string(AceStepLog log) noexcept {
    switch (log) {
        case AceStepLog::none:
            return "none";
        case AceStepLog::fields:
            return "fields";
        case AceStepLog::fields_and_normalized:
            return "fields_and_normalized";
    }
    return "none";
}

std::string_view describe(PolicyRule rule) noexcept {
    switch (rule) {
        case PolicyRule::follows_option:
            return "the points the validity policy counts";
        case PolicyRule::own_gradient:
            return "each field's own gradient magnitudes that are not NaN, as ACE's weighted_nanmean";
        case PolicyRule::all_finite:
            return "points where the truth, every member and the climatology are finite";
        case PolicyRule::nan_fill:
            return "every point, NaN filled before the transform";
    }
    return "the points the validity policy counts";
}

std::string ace_key_of(const RegisteredScore& score, const std::string& variable, bool normalized, std::int64_t step) {
    std::string key = score.ace_key;
    if (key.empty()) {
        return key;
    }
    const auto replace = [&](const std::string& field, const std::string& value) {
        if (const std::size_t at = key.find(field); at != std::string::npos) {
            key.replace(at, field.size(), value);
        }
    };
    replace("{var}", variable);
    replace("{step}", std::to_string(step));
    if (normalized) {
        key.insert(key.find('/'), "_norm");
    }
    return key;
}

const std::deque<RegisteredScore>& registered_scores() {
    return registry();
}

const RegisteredScore& register_score(RegisteredScore score) {
    const std::string report = score.report == ReportKind::forecast ? "forecast" : "pair";
    std::string why;
    if (score.key.empty()) {
        why = "a score needs a key";
    } else if (std::any_of(registry().begin(), registry().end(),
                           [&](const RegisteredScore& s) { return s.report == score.report && s.key == score.key; })) {
        why = "the " + report + " report already has a score '" + score.key + "'";
    } else if (const auto* d = std::get_if<const ScoreDefinition*>(&score.source); d != nullptr && *d == nullptr) {
        why = "score '" + score.key + "' names no ScoreDefinition";
    }
    if (!why.empty()) {
        throw ArgumentError("register_score: " + why);
    }
    score.family = family_of(score.source);
    score.combination = combination_of(score.source);
    return registry().emplace_back(std::move(score));
}

std::vector<const RegisteredScore*> report_scores(ReportKind kind, ReportContents contents) {
    std::vector<const RegisteredScore*> out;
    for (const RegisteredScore& s : registered_scores()) {
        const bool cells = s.combination == C::cell_statistic;
        const bool present = s.family == F::ensemble ? (cells ? contents.ensemble_cells : contents.ensemble)
                             : s.family == F::anomaly_correlation ? contents.anomaly_correlation
                             : s.family == F::power_spectrum      ? contents.power_spectrum
                             : s.family == F::near_zero_fraction  ? contents.near_zero_fraction
                             : s.family == F::trend               ? contents.trend
                             : s.family == F::annual              ? contents.annual
                             : s.family == F::seasonal            ? contents.seasonal
                             : s.family == F::regional_index      ? contents.regional_index
                             : s.family == F::histogram           ? contents.histogram
                             : s.family == F::index_regression    ? contents.index_regression
                             : s.family == F::tripole_index       ? contents.tripole_index
                                                                  : true;
        if (s.report == kind && present) {
            out.push_back(&s);
        }
    }
    return out;
}

std::vector<const RegisteredScore*> table_scores(ReportKind kind, ReportContents contents) {
    std::vector<const RegisteredScore*> out;
    for (const RegisteredScore* s : report_scores(kind, contents)) {
        if (!s->label.empty()) {
            out.push_back(s);
        }
    }
    std::stable_sort(out.begin(), out.end(), [](const RegisteredScore* a, const RegisteredScore* b) {
        return a->table_order < b->table_order;
    });
    return out;
}

}  // namespace gridshard
