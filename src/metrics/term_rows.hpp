#pragma once
// What the parts of the term engine (term_engine.cpp, fixed_point_rows.cpp, fused_gradient.cpp,
// exact_products.cpp) share: the one validity test of a value under a ValidityPolicy, and one (channel, row) of a
// pass. Internal to the metrics layer; no MPI calls.

#include <cstdint>
#include <type_traits>

#include "gridshard/metrics/field.hpp"

namespace gridshard::detail {

/// Whether a value counts under `policy` (before the weight is looked at).
template <ValidityPolicy policy, class V>
constexpr bool counts(V v) noexcept {
    if constexpr (policy == ValidityPolicy::propagate) {
        return true;
    } else if constexpr (policy == ValidityPolicy::skip_nan) {
        return v == v;
    } else {
        return (v - v) == V{0};  // finite
    }
}

/// Whether both values count, both tests evaluated (no branch, so that rows vectorise).
template <ValidityPolicy policy, class V>
constexpr bool counts_both(V x, V y) noexcept {
    return (static_cast<unsigned>(counts<policy>(x)) & static_cast<unsigned>(counts<policy>(y))) != 0U;
}

/// Calls `f` with `policy` as a compile-time constant (std::integral_constant), for kernels templated on the policy.
template <class F>
decltype(auto) with_policy(ValidityPolicy policy, F f) {
    switch (policy) {
        case ValidityPolicy::propagate:
            return f(std::integral_constant<ValidityPolicy, ValidityPolicy::propagate>{});
        case ValidityPolicy::skip_nan:
            return f(std::integral_constant<ValidityPolicy, ValidityPolicy::skip_nan>{});
        case ValidityPolicy::skip_invalid_pairs:
            break;
    }
    return f(std::integral_constant<ValidityPolicy, ValidityPolicy::skip_invalid_pairs>{});
}

/// One (channel, row) of the pass: where its values are and how it is weighted.
template <class T>
struct Row {
    const T* truth;
    const T* prediction;          // null for a one-field pass
    const double* point_weights;  // null for per-row weights
    double factor;                // the row's weight, or 1 with per-point weights
    std::int64_t cols;
};

}  // namespace gridshard::detail
