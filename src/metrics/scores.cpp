#include "gridshard/metrics/scores.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "gridshard/core/error.hpp"

namespace gridshard {

namespace {

// Every score the Evaluator can finalize, in EvaluatorScore's order: those of the two-field evaluation in report
// order, then the own-points gradient score.
const std::vector<ScoreDefinition>& all_scores() {
    using T = Term;
    using S = const TermSums&;
    using C = std::int64_t;
    static const std::vector<ScoreDefinition> scores = {
        // weighted mean of the truth over the valid points
        {.name = "mean_truth",
         .label = "mean_truth",
         .table_width = 14,
         .table_digits = 6,
         .terms = {T::truth},
         .finalize = [](S s, C c) { return s.mean(c, T::truth); }},
        // weighted mean of the prediction over the valid points
        {.name = "mean_pred",
         .label = "mean_pred",
         .table_width = 14,
         .table_digits = 6,
         .terms = {T::prediction},
         .finalize = [](S s, C c) { return s.mean(c, T::prediction); }},
        // weighted mean of (pred - truth)
        {.name = "bias",
         .label = "bias",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::truth, T::prediction},
         .finalize = [](S s, C c) { return s.bias(c); }},
        // sqrt of the weighted mean of (pred - truth)^2
        {.name = "rmse",
         .label = "rmse",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::difference_square},
         .finalize = [](S s, C c) { return s.rmse(c); }},
        // weighted population std of the truth about its own mean
        {.name = "std_truth",
         .label = "std_truth",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::truth, T::truth_square},
         .finalize = [](S s, C c) { return s.std_dev(c); }},
        // weighted population std of the prediction about its own mean
        {.name = "std_pred",
         .label = "std_pred",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::prediction, T::prediction_square},
         .finalize = [](S s, C c) { return s.std_dev(c, true); }},
        // 100 (G(pred) - G(truth)) / G(truth), G the weighted mean of the gradient magnitude over the valid points
        {.name = "grad_mag_percent_diff",
         .label = "grad_%diff",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::truth_gradient, T::prediction_gradient},
         .finalize = [](S s, C c) { return s.gradient_percent_diff(c); }},
        // 100 (G(pred) - G(truth)) / G(truth), each G over its own field's valid points (ACE's definition)
        {.name = "grad_mag_percent_diff_own_points",
         .label = "grad_%diff_own",
         .table_width = 12,
         .table_digits = 4,
         .terms = {T::truth_own_gradient, T::prediction_own_gradient},
         .finalize = [](S s, C c) { return s.gradient_percent_diff(c, GradientPoints::own); },
         .two_field = false},
    };
    return scores;
}

}  // namespace

const std::vector<ScoreDefinition>& evaluation_scores() {
    static const std::vector<ScoreDefinition> scores = [] {
        std::vector<ScoreDefinition> two_field;
        std::copy_if(all_scores().begin(), all_scores().end(), std::back_inserter(two_field),
                     [](const ScoreDefinition& d) { return d.two_field; });
        return two_field;
    }();
    return scores;
}

const ScoreDefinition& score_definition(EvaluatorScore id) {
    return all_scores().at(static_cast<std::size_t>(id));
}

Scores::Scores(std::vector<std::string> names, std::int64_t channels)
    : names_(std::move(names)),
      values_(names_.size(),
              std::vector<double>(static_cast<std::size_t>(channels), std::numeric_limits<double>::quiet_NaN())) {}

std::size_t Scores::index_of(std::string_view name) const {
    const auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) {
        std::string known;
        for (const std::string& n : names_) {
            known += (known.empty() ? "" : ", ") + n;
        }
        throw ArgumentError("no score '" + std::string(name) + "' (the scores are " + known + ")");
    }
    return static_cast<std::size_t>(it - names_.begin());
}

const std::vector<double>& Scores::operator[](std::string_view name) const {
    return values_[index_of(name)];
}

std::vector<double>& Scores::operator[](std::string_view name) {
    return values_[index_of(name)];
}

}  // namespace gridshard
