// The finalizers of every metric over merged term sums: one place for each formula.

#include "gridshard/metrics/terms.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "partial_sums.hpp"

namespace gridshard {

std::int64_t TermSums::slot(std::int64_t g, Term t) const {
    return (has_total_ ? 1 : 0) + g * terms_.size() + terms_.index(t);
}

DoubleDouble TermSums::value(std::int64_t g, Term t) const {
    if ((t == Term::weight || t == Term::gradient_weight) && !terms_.contains(t) && has_total_) {
        return sums_->value_dd(0);  // under propagate the weight of the valid points is the total weight
    }
    if (!terms_.contains(t)) {
        throw ArgumentError("term " + std::to_string(static_cast<int>(t)) +
                            " was not formed: a finalizer may read only the terms its request (or score) names");
    }
    return sums_->value_dd(slot(g, t));
}

double TermSums::total_weight() const {
    return has_total_ ? sums_->value(0) : std::numeric_limits<double>::quiet_NaN();
}

double TermSums::ratio(std::int64_t g, Term a, Term b) const {
    const DoubleDouble w = value(g, b);
    return w.hi > 0.0 ? dd::divide(value(g, a), w).hi : std::numeric_limits<double>::quiet_NaN();
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
    return dd::population_std(w, value(g, prediction ? Term::prediction : Term::truth),
                              value(g, prediction ? Term::prediction_square : Term::truth_square));
}

double TermSums::gradient_mean(std::int64_t g, bool prediction) const {
    return ratio(g, prediction ? Term::prediction_gradient : Term::truth_gradient, Term::gradient_weight);
}

double TermSums::gradient_percent_diff(std::int64_t g) const {
    return percent_difference(gradient_mean(g, false), gradient_mean(g, true));
}

double percent_difference(double truth, double prediction) noexcept {
    return 100.0 * (prediction - truth) / truth;
}

}  // namespace gridshard
