#pragma once
/// @file
/// The scores of the fused evaluation, declared once each: a name, a table label, a definition and a
/// finalizer over the merged sums of one channel. The Evaluator computes every registered score, and the
/// tool's table, JSON report and any later writer iterate the same registry, so adding a score is one
/// entry here (docs/design.md §3). No MPI calls.
///
/// @code
///   gridshard::Scores s = evaluator.evaluate(truth, prediction);
///   for (const gridshard::ScoreDefinition& d : gridshard::evaluation_scores()) {
///       std::printf("%s = %g\n", d.name.c_str(), s[d.name][0]);   // channel 0
///   }
/// @endcode

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/numerics/double_double.hpp"

namespace gridshard {

namespace detail {
class PartialSums;
}

/// The merged sums of one channel of the fused evaluation (every spatial rank holds the same), as the
/// finalizers read them. Valid points are those where truth and prediction are both finite and the weight
/// is non-zero; each gradient term is over the points where that field's gradient magnitude is finite.
class EvaluationSums {
  public:
    enum class Term : std::int64_t {
        valid_weight,                ///< sum over valid points of a
        truth_sum,                   ///< sum a t
        prediction_sum,              ///< sum a p
        truth_squares,               ///< sum a t^2
        prediction_squares,          ///< sum a p^2
        difference_squares,          ///< sum a (p - t)^2
        truth_gradient,              ///< sum a |grad t|
        truth_gradient_weight,       ///< sum of a over the points of truth_gradient
        prediction_gradient,         ///< sum a |grad p|
        prediction_gradient_weight,  ///< sum of a over the points of prediction_gradient
    };
    static constexpr std::int64_t term_count = 10;

    EvaluationSums(const detail::PartialSums& sums, std::int64_t first_slot, bool has_gradient) noexcept
        : sums_(&sums), first_slot_(first_slot), has_gradient_(has_gradient) {}

    /// Term `t` to about 106 bits.
    [[nodiscard]] DoubleDouble value(Term t) const;
    /// `value / weight` to about 104 bits before rounding; NaN when the weight is not positive.
    [[nodiscard]] double ratio(Term value, Term weight) const;
    /// `a - b`, exact in reproducible mode, rounded once.
    [[nodiscard]] double difference(Term a, Term b) const;
    /// Whether the gradient terms were formed (EvaluationOptions::gradient).
    [[nodiscard]] bool has_gradient() const noexcept { return has_gradient_; }

  private:
    [[nodiscard]] std::int64_t slot(Term t) const noexcept { return first_slot_ + static_cast<std::int64_t>(t); }

    const detail::PartialSums* sums_;
    std::int64_t first_slot_;
    bool has_gradient_;
};

/// One score: `name` is its key in Scores and in the JSON report, `label` its column header in the table
/// (with `table_width` characters and `table_digits` significant digits), `definition` one line for
/// readers, and `finalize` its value from one channel's sums (NaN where it has none).
struct ScoreDefinition {
    std::string name;
    std::string label;
    std::string definition;
    int table_width = 12;
    int table_digits = 4;
    std::function<double(const EvaluationSums&)> finalize;
};

/// The scores of `gridshard eval` and the Evaluator, in report order: mean_truth, mean_pred, bias, rmse,
/// std_truth, std_pred, grad_mag_percent_diff.
[[nodiscard]] const std::vector<ScoreDefinition>& evaluation_scores();

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
    /// The values of the score at position `k` of names().
    [[nodiscard]] const std::vector<double>& at(std::size_t k) const { return values_.at(k); }

  private:
    [[nodiscard]] std::size_t index_of(std::string_view name) const;

    std::vector<std::string> names_;
    std::vector<std::vector<double>> values_;
};

}  // namespace gridshard
