#include "gridshard/metrics/scores.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gridshard/core/error.hpp"
#include "partial_sums.hpp"

namespace gridshard {

DoubleDouble EvaluationSums::value(Term t) const {
    return sums_->value_dd(slot(t));
}

double EvaluationSums::ratio(Term value, Term weight) const {
    return sums_->ratio(slot(value), slot(weight));
}

double EvaluationSums::difference(Term a, Term b) const {
    return sums_->difference(slot(a), slot(b));
}

const std::vector<ScoreDefinition>& evaluation_scores() {
    using T = EvaluationSums::Term;
    static const std::vector<ScoreDefinition> scores = {
        {"mean_truth", "mean_truth", "weighted mean of the truth over the valid points", 14, 6,
         [](const EvaluationSums& s) { return s.ratio(T::truth_sum, T::valid_weight); }},
        {"mean_pred", "mean_pred", "weighted mean of the prediction over the valid points", 14, 6,
         [](const EvaluationSums& s) { return s.ratio(T::prediction_sum, T::valid_weight); }},
        {"bias", "bias", "weighted mean of (pred - truth)", 12, 4,
         [](const EvaluationSums& s) {
             return s.difference(T::prediction_sum, T::truth_sum) / s.value(T::valid_weight).hi;
         }},
        {"rmse", "rmse", "sqrt of the weighted mean of (pred - truth)^2", 12, 4,
         [](const EvaluationSums& s) { return std::sqrt(s.ratio(T::difference_squares, T::valid_weight)); }},
        {"std_truth", "std_truth", "weighted population std of the truth about its own mean", 12, 4,
         [](const EvaluationSums& s) {
             return dd::population_std(s.value(T::valid_weight), s.value(T::truth_sum), s.value(T::truth_squares));
         }},
        {"std_pred", "std_pred", "weighted population std of the prediction about its own mean", 12, 4,
         [](const EvaluationSums& s) {
             return dd::population_std(s.value(T::valid_weight), s.value(T::prediction_sum),
                                       s.value(T::prediction_squares));
         }},
        {"grad_mag_percent_diff", "grad_%diff",
         "100 (G(pred) - G(truth)) / G(truth), G the weighted NaN-aware mean of the gradient magnitude", 12, 4,
         [](const EvaluationSums& s) {
             if (!s.has_gradient()) {
                 return std::numeric_limits<double>::quiet_NaN();
             }
             const double truth = s.ratio(T::truth_gradient, T::truth_gradient_weight);
             const double prediction = s.ratio(T::prediction_gradient, T::prediction_gradient_weight);
             return 100.0 * (prediction - truth) / truth;
         }},
    };
    return scores;
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
