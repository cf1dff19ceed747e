// The finalizers of every metric over merged term sums: one place for each formula. The device path mirrors the
// weighted statistics' in torch operations (python/gridshard/_device.py, `_finalize`): a change here is a change
// there, or its tests (tests/python/test_device_path.py) fail.

#include "gridshard/metrics/terms.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "partial_sums.hpp"

namespace gridshard {

namespace {

bool is_weight(Term t) noexcept {
    return t == Term::weight || t == Term::gradient_weight || t == Term::truth_own_gradient_weight ||
           t == Term::prediction_own_gradient_weight;
}

}  // namespace

std::int64_t TermSums::slot(std::int64_t g, Term t) const {
    if (is_weight(t) && !terms_.contains(t) && has_total_) {
        return 0;  // under propagate the weight of the valid points is the total weight
    }
    if (!terms_.contains(t)) {
        throw ArgumentError("term " + std::to_string(static_cast<int>(t)) +
                            " was not formed: a finalizer may read only the terms its request (or score) names");
    }
    return (has_total_ ? 1 : 0) + g * terms_.size() + terms_.index(t);
}

DoubleDouble TermSums::value(std::int64_t g, Term t) const {
    return sums_->value_dd(slot(g, t));
}

const ExactSum* TermSums::exact(std::int64_t g, Term t) const {
    return sums_->exact(slot(g, t));
}

double TermSums::total_weight() const {
    return has_total_ ? sums_->value(0) : std::numeric_limits<double>::quiet_NaN();
}

double detail::ratio_of(DoubleDouble a, DoubleDouble b) noexcept {
    return b.hi > 0.0 ? dd::divide(a, b).hi : std::numeric_limits<double>::quiet_NaN();
}

double TermSums::ratio(std::int64_t g, Term a, Term b) const {
    return detail::ratio_of(value(g, a), value(g, b));
}

double TermSums::bias(std::int64_t g) const {
    const DoubleDouble w = value(g, Term::weight);
    if (!(w.hi > 0.0)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    const DoubleDouble difference = dd::add(value(g, Term::prediction), dd::negate(value(g, Term::truth)));
    return dd::divide(difference, w).hi;
}

double TermSums::rmse(std::int64_t g) const {
    return std::sqrt(mean(g, Term::difference_square));
}

double TermSums::std_dev(std::int64_t g, bool prediction) const {
    const DoubleDouble w = value(g, Term::weight);
    if (!(w.hi > 0.0)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    const Term first = prediction ? Term::prediction : Term::truth;
    const Term second = prediction ? Term::prediction_square : Term::truth_square;
    const DoubleDouble s = value(g, first);
    const DoubleDouble q = value(g, second);
    const ExactSum* exact_w = exact(g, Term::weight);
    if (exact_w == nullptr || !std::isfinite(s.hi) || !std::isfinite(q.hi)) {
        return dd::population_std(w, s, q);  // plain sums, or NaN and infinities: IEEE's answer
    }
    // W^2 var = W Q - S^2, exactly: the squares were formed exactly (term_engine.cpp), so however far the
    // mean lies from zero the cancellation costs nothing, and a constant field gives exactly 0.
    const ExactSum& exact_s = *exact(g, first);
    ExactSum numerator;
    for (double part : exact_w->expansion()) {
        numerator.add_scaled(*exact(g, second), part);
    }
    for (double part : exact_s.expansion()) {
        numerator.add_scaled(exact_s, -part);
    }
    const DoubleDouble n = numerator.to_double_double();
    if (!(n.hi > 0.0)) {
        return 0.0;  // never negative for exact sums of non-negative weights
    }
    return dd::divide(dd::sqrt(n), w).hi;
}

double TermSums::gradient_mean(std::int64_t g, bool prediction, GradientPoints points) const {
    if (points == GradientPoints::own) {
        return prediction ? ratio(g, Term::prediction_own_gradient, Term::prediction_own_gradient_weight)
                          : ratio(g, Term::truth_own_gradient, Term::truth_own_gradient_weight);
    }
    return ratio(g, prediction ? Term::prediction_gradient : Term::truth_gradient, Term::gradient_weight);
}

double TermSums::gradient_percent_diff(std::int64_t g, GradientPoints points) const {
    return percent_difference(gradient_mean(g, false, points), gradient_mean(g, true, points));
}

double percent_difference(double truth, double prediction) noexcept {
    return 100.0 * (prediction - truth) / truth;
}

}  // namespace gridshard
