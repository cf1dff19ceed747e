// The weighted metrics (docs/design.md §3): sums, means, the masked means, std, bias, rmse, regional means.
// Each is a request to the one engine (term_engine.hpp) and a finalizer of terms.hpp.

#include "gridshard/metrics/metrics.hpp"

#include <cmath>
#include <string>

#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

template <class T>
std::vector<double> weighted_sum(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const TermSums sums =
        accumulate_terms<T>(grid, x, nullptr, a, {{Term::truth}, ValidityPolicy::propagate, summation});
    return per_channel(sums, [&](std::int64_t c) { return sums.value(c, Term::truth).hi; });
}

template <class T>
std::vector<double> masked_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a, ValidityPolicy policy,
                                         Summation summation) {
    const TermSums sums =
        accumulate_terms<T>(grid, x, nullptr, a, {weight_and(policy, {Term::truth}), policy, summation});
    return per_channel(sums, [&](std::int64_t c) { return sums.mean(c, Term::truth); });
}

template <class T>
std::vector<double> weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return masked_weighted_mean(grid, x, a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> weighted_nanmean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return masked_weighted_mean(grid, x, a, ValidityPolicy::skip_nan, summation);
}

template <class T>
std::vector<double> regional_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                           std::span<const double> region, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    std::string error = weights.error();
    if (error.empty() && static_cast<std::int64_t>(region.size()) != box.area()) {
        error = "region has " + std::to_string(region.size()) + " values but this rank's box has " +
                std::to_string(box.area()) + " points";
    }
    for (std::size_t k = 0; error.empty() && k < region.size(); ++k) {
        if (!std::isfinite(region[k]) || region[k] < 0.0) {
            error = "region values must be finite and non-negative, got " + std::to_string(region[k]);
        }
    }
    // The weights a * region per point; on a bad argument, zeros that the collective check never reaches.
    std::vector<double> combined(static_cast<std::size_t>(box.area()), 0.0);
    if (error.empty()) {
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            for (std::int64_t j = 0; j < box.lon.size(); ++j) {
                const double w = weights.per_point() ? weights.points(i)[j] : weights.row(i);
                const auto k = static_cast<std::size_t>(i * box.lon.size() + j);
                combined[k] = w * region[k];
            }
        }
    }
    const TermSums sums = accumulate_terms<T>(grid, x, nullptr, Weights{combined, true},
                                              {{Term::truth},
                                               ValidityPolicy::propagate,
                                               summation,
                                               "regional_weights (the region times the weights: an empty region?)"},
                                              nullptr, error);
    return per_channel(sums, [&](std::int64_t c) { return sums.mean(c, Term::truth); });
}

template <class T>
std::vector<double> masked_weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, ValidityPolicy policy,
                                        Summation summation) {
    const TermSums sums = accumulate_terms<T>(
        grid, x, nullptr, a, {weight_and(policy, {Term::truth, Term::truth_square}), policy, summation});
    return per_channel(sums, [&](std::int64_t c) { return sums.std_dev(c); });
}

template <class T>
std::vector<double> weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return masked_weighted_std(grid, x, a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> masked_bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                                ValidityPolicy policy, Summation summation) {
    const TermSums sums = accumulate_terms<T>(grid, truth, &prediction, a,
                                              {weight_and(policy, {Term::truth, Term::prediction}), policy, summation});
    return per_channel(sums, [&](std::int64_t c) { return sums.bias(c); });
}

template <class T>
std::vector<double> bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    return masked_bias(grid, truth, prediction, a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> masked_rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                                ValidityPolicy policy, Summation summation) {
    const TermSums sums = accumulate_terms<T>(grid, truth, &prediction, a,
                                              {weight_and(policy, {Term::difference_square}), policy, summation});
    return per_channel(sums, [&](std::int64_t c) { return sums.rmse(c); });
}

template <class T>
std::vector<double> rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    return masked_rmse(grid, truth, prediction, a, ValidityPolicy::propagate, summation);
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                     \
    template std::vector<double> weighted_sum<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);             \
    template std::vector<double> weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);            \
    template std::vector<double> weighted_nanmean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);         \
    template std::vector<double> masked_weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights, ValidityPolicy, \
                                                         Summation);                                                 \
    template std::vector<double> weighted_std<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);             \
    template std::vector<double> masked_weighted_std<T>(const ShardedGrid&, FieldShard<T>, Weights, ValidityPolicy,  \
                                                        Summation);                                                  \
    template std::vector<double> bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation);      \
    template std::vector<double> masked_bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights,           \
                                                ValidityPolicy, Summation);                                          \
    template std::vector<double> rmse<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation);      \
    template std::vector<double> masked_rmse<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights,           \
                                                ValidityPolicy, Summation);                                          \
    template std::vector<double> regional_weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights,               \
                                                           std::span<const double>, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
