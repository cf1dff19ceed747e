#pragma once
/// @file
/// The few double-double operations the metrics need to turn exact sums into means and variances
/// without losing the accuracy the sums carry. Deterministic: same inputs, same bits. No MPI calls.

#include <cmath>

#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard::dd {

/// a + b exactly, as (sum, error).
inline DoubleDouble two_sum(double a, double b) noexcept {
    const double s = a + b;
    const double v = s - a;
    return {s, (a - (s - v)) + (b - v)};
}

/// a * b exactly, as (product, error).
inline DoubleDouble two_product(double a, double b) noexcept {
    const double p = a * b;
    return {p, std::fma(a, b, -p)};
}

inline DoubleDouble normalize(double hi, double lo) noexcept {
    return two_sum(hi, lo);
}

inline DoubleDouble add(DoubleDouble a, DoubleDouble b) noexcept {
    const DoubleDouble s = two_sum(a.hi, b.hi);
    return normalize(s.hi, s.lo + a.lo + b.lo);
}

inline DoubleDouble negate(DoubleDouble a) noexcept {
    return {-a.hi, -a.lo};
}

inline DoubleDouble multiply(DoubleDouble a, DoubleDouble b) noexcept {
    const DoubleDouble p = two_product(a.hi, b.hi);
    return normalize(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}

/// a / b to about 104 bits (one Newton correction of the double quotient).
inline DoubleDouble divide(DoubleDouble a, DoubleDouble b) noexcept {
    const double q1 = a.hi / b.hi;
    if (!std::isfinite(q1)) {
        return {q1, 0.0};
    }
    const DoubleDouble remainder = add(a, negate(multiply(b, {q1, 0.0})));
    const double q2 = remainder.hi / b.hi;
    return normalize(q1, q2);
}

/// sqrt(a) to about 104 bits (one Newton correction of the double root); a <= 0 gives sqrt(a.hi).
inline DoubleDouble sqrt(DoubleDouble a) noexcept {
    const double root = std::sqrt(a.hi);
    if (!(a.hi > 0.0) || !std::isfinite(root)) {
        return {root, 0.0};
    }
    const DoubleDouble remainder = add(a, negate(two_product(root, root)));
    return normalize(root, remainder.hi / (2.0 * root));
}

/// The population standard deviation from the total weight W, S = sum(a x) and Q = sum(a x^2):
/// sqrt(Q/W - (S/W)^2), in double-double: accurate while the mean is within about 2^26 standard deviations
/// of zero. Exact sums use TermSums::std_dev's exact numerator instead; this serves plain (fast) sums.
inline double population_std(DoubleDouble total, DoubleDouble sum, DoubleDouble sum_of_squares) noexcept {
    const DoubleDouble mean = divide(sum, total);
    const DoubleDouble variance = add(divide(sum_of_squares, total), negate(multiply(mean, mean)));
    if (std::isnan(variance.hi)) {
        return variance.hi;
    }
    return std::sqrt(variance.hi > 0.0 ? variance.hi : 0.0);
}

}  // namespace gridshard::dd
