// The weighted metrics (docs/design.md §3): sums, means, the masked means, std, bias, rmse, regional means.
// Each is a request to the one engine (term_engine.hpp) and a finalizer of terms.hpp, in one place for every one
// of them (statistic_sums, finalize), which weighted_statistics also gives with the sums a gradient needs.

#include "gridshard/metrics/metrics.hpp"

#include <cmath>
#include <optional>
#include <span>
#include <string>

#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// The terms `statistic` sums under `policy`.
TermSet terms_of(WeightedStatistic statistic, ValidityPolicy policy) {
    switch (statistic) {
        case WeightedStatistic::sum:
            return {Term::truth};
        case WeightedStatistic::mean:
        case WeightedStatistic::nanmean:
            return weight_and(policy, {Term::truth});
        case WeightedStatistic::std:
            return weight_and(policy, {Term::truth, Term::truth_square});
        case WeightedStatistic::bias:
            return weight_and(policy, {Term::truth, Term::prediction});
        case WeightedStatistic::rmse:
            return weight_and(policy, {Term::difference_square});
    }
    return {};
}

// `statistic` of channel `c` from its sums: the one finalizer of each (terms.hpp).
double finalize(const TermSums& sums, WeightedStatistic statistic, std::int64_t c) {
    switch (statistic) {
        case WeightedStatistic::sum:
            return sums.value(c, Term::truth).hi;
        case WeightedStatistic::mean:
        case WeightedStatistic::nanmean:
            return sums.mean(c, Term::truth);
        case WeightedStatistic::std:
            return sums.std_dev(c);
        case WeightedStatistic::bias:
            return sums.bias(c);
        case WeightedStatistic::rmse:
            return sums.rmse(c);
    }
    return 0.0;
}

// The weights `a * region` per point of this rank's box; on a bad argument (named in `error`), zeros that the
// collective check never reaches.
std::vector<double> regional_point_weights(Weights a, const Box& box, std::span<const double> region,
                                           std::string& error) {
    const RowWeights weights(a, box);
    error = weights.error();
    if (error.empty() && static_cast<std::int64_t>(region.size()) != box.area()) {
        error = "region has " + std::to_string(region.size()) + " values but this rank's box has " +
                std::to_string(box.area()) + " points";
    }
    for (std::size_t k = 0; error.empty() && k < region.size(); ++k) {
        if (!std::isfinite(region[k]) || region[k] < 0.0) {
            error = "region values must be finite and non-negative, got " + std::to_string(region[k]);
        }
    }
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
    return combined;
}

// The sums of `statistic` under `policy`, with the weights `a` or, given a `region`, `a * region`. Collective over
// `spatial`: one allreduce.
template <class T>
TermSums statistic_sums(const ShardedGrid& grid, WeightedStatistic statistic, ValidityPolicy policy, FieldShard<T> x,
                        const FieldShard<T>* prediction, Weights a, Summation summation,
                        std::optional<std::span<const double>> region) {
    const bool paired = statistic == WeightedStatistic::bias || statistic == WeightedStatistic::rmse;
    if (paired != (prediction != nullptr)) {
        throw ArgumentError(std::string("weighted_statistics: ") +
                            (paired ? "bias and rmse need a prediction" : "a one-field statistic takes no prediction"));
    }
    const TermRequest request{terms_of(statistic, policy), policy, summation};
    if (!region) {
        return accumulate_terms<T>(grid, x, prediction, a, request);
    }
    std::string error;
    const std::vector<double> combined = regional_point_weights(a, grid.box(), *region, error);
    return accumulate_terms<T>(
        grid, x, prediction, Weights{combined, true},
        {request.terms, policy, summation, "regional_weights (the region times the weights: an empty region?)"},
        nullptr, error);
}

template <class T>
std::vector<double> statistic_values(const ShardedGrid& grid, WeightedStatistic statistic, ValidityPolicy policy,
                                     FieldShard<T> x, const FieldShard<T>* prediction, Weights a, Summation summation,
                                     std::optional<std::span<const double>> region = std::nullopt) {
    const TermSums sums = statistic_sums(grid, statistic, policy, x, prediction, a, summation, region);
    return per_channel(sums, [&](std::int64_t c) { return finalize(sums, statistic, c); });
}

}  // namespace

template <class T>
WeightedStatistics weighted_statistics(const ShardedGrid& grid, WeightedStatistic statistic, FieldShard<T> x,
                                       const FieldShard<T>* prediction, Weights a, Summation summation,
                                       std::optional<std::span<const double>> region) {
    const ValidityPolicy policy =
        statistic == WeightedStatistic::nanmean ? ValidityPolicy::skip_nan : ValidityPolicy::propagate;
    const TermSums sums = statistic_sums(grid, statistic, policy, x, prediction, a, summation, region);
    WeightedStatistics out;
    out.values = per_channel(sums, [&](std::int64_t c) { return finalize(sums, statistic, c); });
    out.weights = per_channel(sums, [&](std::int64_t c) { return sums.value(c, Term::weight).hi; });
    if (statistic == WeightedStatistic::std) {
        out.means = per_channel(sums, [&](std::int64_t c) { return sums.mean(c, Term::truth); });
    }
    return out;
}

template <class T>
std::vector<double> weighted_sum(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return statistic_values<T>(grid, WeightedStatistic::sum, ValidityPolicy::propagate, x, nullptr, a, summation);
}

template <class T>
std::vector<double> masked_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a, ValidityPolicy policy,
                                         Summation summation) {
    return statistic_values<T>(grid, WeightedStatistic::mean, policy, x, nullptr, a, summation);
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
    return statistic_values<T>(grid, WeightedStatistic::mean, ValidityPolicy::propagate, x, nullptr, a, summation,
                               region);
}

template <class T>
std::vector<double> masked_weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, ValidityPolicy policy,
                                        Summation summation) {
    return statistic_values<T>(grid, WeightedStatistic::std, policy, x, nullptr, a, summation);
}

template <class T>
std::vector<double> weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return masked_weighted_std(grid, x, a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> masked_bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                                ValidityPolicy policy, Summation summation) {
    return statistic_values(grid, WeightedStatistic::bias, policy, truth, &prediction, a, summation);
}

template <class T>
std::vector<double> bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    return masked_bias(grid, truth, prediction, a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> masked_rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                                ValidityPolicy policy, Summation summation) {
    return statistic_values(grid, WeightedStatistic::rmse, policy, truth, &prediction, a, summation);
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
                                                           std::span<const double>, Summation);                      \
    template WeightedStatistics weighted_statistics<T>(const ShardedGrid&, WeightedStatistic, FieldShard<T>,         \
                                                       const FieldShard<T>*, Weights, Summation,                     \
                                                       std::optional<std::span<const double>>);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
