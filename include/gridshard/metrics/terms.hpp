#pragma once
/// @file
/// The per-point terms every metric is made of, and their merged sums. One pass over a shard forms the
/// terms a metric asks for under one ValidityPolicy and sums them exactly (docs/design.md §3 and §5); every
/// metric, the fused Evaluator and the tool's scores are finalizers over a TermSums. No MPI calls here.
///
/// @code
///   void report(const gridshard::TermSums& s, std::int64_t c) {   // s: from the metrics layer, merged
///       double mean = s.mean(c, gridshard::Term::truth);          // channel c: sum a*t / sum a over valid points
///       double rmse = s.rmse(c);
///       std::printf("mean %g rmse %g\n", mean, rmse);
///   }
/// @endcode

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "gridshard/numerics/double_double.hpp"

namespace gridshard {

namespace detail {
class PartialSums;
/// `a / b` to about 104 bits before rounding; NaN when `b` is not positive (no valid point). TermSums::ratio's rule,
/// for sums merged outside a TermSums (the zonal means of fixed-point rows, metrics/zonal_metrics.cpp).
[[nodiscard]] double ratio_of(DoubleDouble a, DoubleDouble b) noexcept;
}  // namespace detail

/// One per-point term; each metric sums some of them, weighted by a, over the points its policy counts
/// ("valid"). t is the truth (or the only field), p the prediction, and both are 0 where a point is not
/// valid, so a term never carries NaN from a point it leaves out.
enum class Term : int {
    weight,                     ///< a over the valid points (under propagate: every point of non-zero weight)
    truth,                      ///< a t
    prediction,                 ///< a p
    truth_square,               ///< a t^2
    prediction_square,          ///< a p^2
    difference_square,          ///< a (p - t)^2
    cross,                      ///< a t p
    gradient_weight,            ///< a over the points where both gradient magnitudes are valid (one field: its own)
    truth_gradient,             ///< a |grad t| over those points
    prediction_gradient,        ///< a |grad p| over those points
    truth_own_gradient_weight,  ///< a over the points whose truth magnitude is valid, whatever p's is
    truth_own_gradient,         ///< a |grad t| over those points
    prediction_own_gradient_weight,  ///< a over the points whose prediction magnitude is valid
    prediction_own_gradient,         ///< a |grad p| over those points
};
inline constexpr int term_count = 14;

/// Which points a gradient mean averages over when two fields are scored. `common`: the points where both
/// magnitudes are valid (the pair rule of `gridshard eval`'s grad_mag_percent_diff). `own`: each field's
/// own valid points, so a NaN in one field leaves the other's mean alone (ACE's
/// `gradient_magnitude_percent_diff`, a `weighted_nanmean` of each magnitude).
enum class GradientPoints { common, own };

/// A set of terms (a bit per Term).
class TermSet {
  public:
    constexpr TermSet() = default;
    constexpr TermSet(std::initializer_list<Term> terms) {
        for (Term t : terms) {
            bits_ |= bit(t);
        }
    }
    [[nodiscard]] constexpr bool contains(Term t) const noexcept { return (bits_ & bit(t)) != 0; }
    /// This set and `t`.
    [[nodiscard]] constexpr TermSet with(Term t) const noexcept {
        TermSet s = *this;
        s.bits_ |= bit(t);
        return s;
    }
    /// Whether a term of the point values themselves (not only gradients) is in the set.
    [[nodiscard]] constexpr bool needs_point_values() const noexcept {
        return contains(Term::weight) || contains(Term::truth) || contains(Term::prediction) ||
               contains(Term::truth_square) || contains(Term::prediction_square) || contains(Term::difference_square) ||
               contains(Term::cross);
    }
    [[nodiscard]] constexpr bool needs_gradient() const noexcept {
        return needs_common_gradient() || needs_own_gradient();
    }
    /// Whether a gradient term over the points where both magnitudes are valid is in the set.
    [[nodiscard]] constexpr bool needs_common_gradient() const noexcept {
        return contains(Term::gradient_weight) || contains(Term::truth_gradient) || contains(Term::prediction_gradient);
    }
    /// Whether a gradient term over one field's own valid points is in the set.
    [[nodiscard]] constexpr bool needs_own_gradient() const noexcept {
        return contains(Term::truth_own_gradient_weight) || contains(Term::truth_own_gradient) ||
               contains(Term::prediction_own_gradient_weight) || contains(Term::prediction_own_gradient);
    }
    /// Whether a gradient term of the prediction is in the set.
    [[nodiscard]] constexpr bool needs_prediction_gradient() const noexcept {
        return contains(Term::prediction_gradient) || contains(Term::prediction_own_gradient) ||
               contains(Term::prediction_own_gradient_weight);
    }
    /// The position of `t` among the terms of the set (its slot), counting from 0.
    [[nodiscard]] constexpr int index(Term t) const noexcept { return __builtin_popcount(bits_ & (bit(t) - 1)); }
    [[nodiscard]] constexpr int size() const noexcept { return __builtin_popcount(bits_); }

  private:
    static constexpr unsigned bit(Term t) noexcept { return 1U << static_cast<int>(t); }
    unsigned bits_ = 0;
};

/// The merged sums of a set of terms for each group (a channel, or for zonal sums a (channel, row)), as
/// every rank of the reducing group holds them, and the finalizers of every metric over them: one place
/// for each formula. Values are the exact sums (Summation::reproducible) rounded once, or plain sums
/// (Summation::fast). Cheap to copy (the sums are shared).
class TermSums {
  public:
    TermSums(std::shared_ptr<const detail::PartialSums> sums, TermSet terms, std::int64_t groups,
             bool has_total) noexcept
        : sums_(std::move(sums)), terms_(terms), groups_(groups), has_total_(has_total) {}

    [[nodiscard]] TermSet terms() const noexcept { return terms_; }
    [[nodiscard]] std::int64_t groups() const noexcept { return groups_; }

    /// Term `t` of group `g` to about 106 bits. The weight terms (Term::weight and the gradient weights)
    /// fall back to the total weight when they were not formed (under propagate every point of non-zero
    /// weight counts);
    /// any other term that was not formed is an ArgumentError (a finalizer reading an undeclared term).
    [[nodiscard]] DoubleDouble value(std::int64_t g, Term t) const;
    /// The weight of every point of non-zero weight, over the whole grid (the same for every group).
    [[nodiscard]] double total_weight() const;

    /// `value(g, t) / value(g, weight)` to about 104 bits before rounding; NaN when no point is valid.
    [[nodiscard]] double mean(std::int64_t g, Term t) const { return ratio(g, t, Term::weight); }
    /// `value(g, a) / value(g, b)`; NaN when the denominator is not positive.
    [[nodiscard]] double ratio(std::int64_t g, Term a, Term b) const;
    /// `(sum a p - sum a t) / sum a`, the difference taken exactly when reproducible.
    [[nodiscard]] double bias(std::int64_t g) const;
    /// `sqrt(mean of (p - t)^2)`.
    [[nodiscard]] double rmse(std::int64_t g) const;
    /// The weighted population std of the truth (or, with `prediction`, of the prediction) about its
    /// own mean: `sqrt(W Q - S^2) / W` from W = sum a, S = sum a x and Q = sum a x^2, the numerator exact
    /// with exact sums (so right to a few ulps whatever the offset, and 0 for a constant field), in
    /// 106-bit arithmetic with plain ones.
    [[nodiscard]] double std_dev(std::int64_t g, bool prediction = false) const;
    /// The weighted mean of |grad t| (or |grad p|) over the points with valid magnitudes: those where both
    /// are (`common`), or the field's own (`own`).
    [[nodiscard]] double gradient_mean(std::int64_t g, bool prediction = false,
                                       GradientPoints points = GradientPoints::common) const;
    /// `100 (G(p) - G(t)) / G(t)`, G = gradient_mean over `points`.
    [[nodiscard]] double gradient_percent_diff(std::int64_t g, GradientPoints points = GradientPoints::common) const;

  private:
    /// Where term `t` of group `g` is held (a weight term not formed: the total weight's slot); throws
    /// ArgumentError for any other term not formed.
    [[nodiscard]] std::int64_t slot(std::int64_t g, Term t) const;
    /// The exact sum behind value(g, t), or null with plain sums.
    [[nodiscard]] const ExactSum* exact(std::int64_t g, Term t) const;

    std::shared_ptr<const detail::PartialSums> sums_;
    TermSet terms_;
    std::int64_t groups_ = 0;
    bool has_total_ = false;  // slot 0 holds the total weight
};

/// `100 (prediction - truth) / truth`: the percent difference of two gradient means.
[[nodiscard]] double percent_difference(double truth, double prediction) noexcept;

}  // namespace gridshard
