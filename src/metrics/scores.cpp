#include "gridshard/metrics/scores.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "gridshard/core/error.hpp"

namespace gridshard {

namespace {

// Every score the Evaluator can finalize, those of the two-field evaluation in report order.
const std::vector<ScoreDefinition>& all_scores() {
    using T = Term;
    using S = const TermSums&;
    using C = std::int64_t;
    static const std::vector<ScoreDefinition> scores = {
        {"mean_truth",
         "mean_truth",
         "weighted mean of the truth over the valid points",
         14,
         6,
         {T::truth},
         [](S s, C c) { return s.mean(c, T::truth); }},
        {"mean_pred",
         "mean_pred",
         "weighted mean of the prediction over the valid points",
         14,
         6,
         {T::prediction},
         [](S s, C c) { return s.mean(c, T::prediction); }},
        {"bias",
         "bias",
         "weighted mean of (pred - truth)",
         12,
         4,
         {T::truth, T::prediction},
         [](S s, C c) { return s.bias(c); }},
        {"rmse",
         "rmse",
         "sqrt of the weighted mean of (pred - truth)^2",
         12,
         4,
         {T::difference_square},
         [](S s, C c) { return s.rmse(c); }},
        {"std_truth",
         "std_truth",
         "weighted population std of the truth about its own mean",
         12,
         4,
         {T::truth, T::truth_square},
         [](S s, C c) { return s.std_dev(c); }},
        {"std_pred",
         "std_pred",
         "weighted population std of the prediction about its own mean",
         12,
         4,
         {T::prediction, T::prediction_square},
         [](S s, C c) { return s.std_dev(c, true); }},
        {"grad_mag_percent_diff",
         "grad_%diff",
         "100 (G(pred) - G(truth)) / G(truth), G the weighted mean of the gradient magnitude over the valid points",
         12,
         4,
         {T::truth_gradient, T::prediction_gradient},
         [](S s, C c) { return s.gradient_percent_diff(c); }},
        {"grad_mag_percent_diff_own_points",
         "grad_%diff_own",
         "100 (G(pred) - G(truth)) / G(truth), each G over its own field's valid points (ACE's definition)",
         12,
         4,
         {T::truth_own_gradient, T::prediction_own_gradient},
         [](S s, C c) { return s.gradient_percent_diff(c, GradientPoints::own); },
         false},
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

const ScoreDefinition& score_definition(std::string_view name) {
    for (const ScoreDefinition& d : all_scores()) {
        if (d.name == name) {
            return d;
        }
    }
    throw ArgumentError("no score definition '" + std::string(name) + "'");
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
