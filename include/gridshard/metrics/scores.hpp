#pragma once
/// @file
/// The scores of the fused evaluation, declared once each: a typed id, a name, a table label, the terms it reads and
/// a finalizer over the merged sums of one channel. The Evaluator computes the definitions it is given; the
/// evaluation layer's score registry (evaluation/score_registry.hpp) names which ones a report holds, and under
/// which keys (docs/evaluation.md). No MPI calls.
///
/// @code
///   #include "gridshard/metrics/evaluation.hpp"
///   void print(gridshard::Evaluator& evaluator, gridshard::FieldShard<float> truth,
///              gridshard::FieldShard<float> prediction) {
///       gridshard::Scores s = evaluator.evaluate(truth, prediction);
///       for (const gridshard::ScoreDefinition& d : gridshard::evaluation_scores()) {
///           std::printf("%s = %g\n", d.name.c_str(), s[d.name][0]);   // channel 0
///       }
///   }
/// @endcode

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/metrics/terms.hpp"

namespace gridshard {

/// The scores gridshard defines (src/metrics/scores.cpp); a caller may give the Evaluator definitions of its own.
enum class EvaluatorScore {
    mean_truth,
    mean_pred,
    bias,
    rmse,
    std_truth,
    std_pred,
    grad_mag_percent_diff,
    grad_mag_percent_diff_own_points,
};

/// One score: `name` its key in Scores and in the JSON report, `label` its column header in the table (with
/// `table_width` characters and `table_digits` significant digits), `terms` the per-point terms it reads, and
/// `finalize` its value for one channel from the merged sums (NaN where the channel has no valid point). The weight
/// terms are added by the policy.
struct ScoreDefinition {
    std::string name;
    std::string label;
    int table_width = 12;
    int table_digits = 4;
    TermSet terms;
    std::function<double(const TermSums&, std::int64_t channel)> finalize;
    /// Whether `gridshard eval` on two fields reports it (evaluation_scores()).
    bool two_field = true;
};

/// The scores of `gridshard eval` and the Evaluator, in report order: mean_truth, mean_pred, bias, rmse,
/// std_truth, std_pred, grad_mag_percent_diff.
[[nodiscard]] const std::vector<ScoreDefinition>& evaluation_scores();

/// The definition of `id`: those of evaluation_scores() and grad_mag_percent_diff_own_points (ACE's
/// gradient_magnitude_percent_diff, each field's mean over its own valid points, which the forecast
/// evaluation reports under ACE's name).
[[nodiscard]] const ScoreDefinition& score_definition(EvaluatorScore id);

/// Per-channel values of named scores, in the order of the registry they came from.
class Scores {
  public:
    Scores() = default;
    /// An empty table of `names`, each with `channels` NaN values.
    Scores(std::vector<std::string> names, std::int64_t channels);

    /// The values of score `name`, one per channel. Throws ArgumentError naming an unknown score.
    [[nodiscard]] const std::vector<double>& operator[](std::string_view name) const;
    [[nodiscard]] std::vector<double>& operator[](std::string_view name);
    /// The score names, in order.
    [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
    /// The values of the score at position `k` of names() (a name may repeat: the same definition asked twice).
    [[nodiscard]] const std::vector<double>& at(std::size_t k) const { return values_.at(k); }
    [[nodiscard]] std::vector<double>& at(std::size_t k) { return values_.at(k); }

  private:
    [[nodiscard]] std::size_t index_of(std::string_view name) const;

    std::vector<std::string> names_;
    std::vector<std::vector<double>> values_;
};

}  // namespace gridshard
