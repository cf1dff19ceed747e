// The time-mean metrics of fields that hold every step, through the one streaming TimeMeanAccumulator.

#include "gridshard/metrics/metrics.hpp"

#include <string>

#include "gridshard/metrics/time_mean.hpp"
#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// The time-mean metrics of fields holding every step, through the one streaming TimeMeanAccumulator, with
// the policy `rmse` and `bias` have (propagate). The arguments are agreed over the spatial group first.
template <class T>
TimeMeanAccumulator accumulate_steps(const ShardedGrid& grid, const FieldShard<T>& truth,
                                     const FieldShard<T>& prediction, std::int64_t ntime) {
    std::string error;
    if (ntime < 1 || truth.channels % ntime != 0) {
        error = "ntime=" + std::to_string(ntime) + " must be >= 1 and divide the " + std::to_string(truth.channels) +
                " leading planes";
    } else {
        error = pair_error(truth, prediction, grid.box());
    }
    const std::int64_t channels = error.empty() ? truth.channels / ntime : 1;
    check_arguments(grid, error, channels);
    TimeMeanAccumulator sums(grid, channels);
    const auto step_values = static_cast<std::size_t>(channels * grid.box().area());
    for (std::int64_t s = 0; s < ntime; ++s) {
        const auto offset = static_cast<std::size_t>(s) * step_values;
        sums.add<T>({truth.values.subspan(offset, step_values), channels},
                    {prediction.values.subspan(offset, step_values), channels});
    }
    return sums;
}

}  // namespace

template <class T>
std::vector<double> rmse_of_time_mean(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                      std::int64_t ntime, Weights a, Summation summation) {
    return accumulate_steps(grid, truth, prediction, ntime).rmse_of_time_mean(a, ValidityPolicy::propagate, summation);
}

template <class T>
std::vector<double> time_and_global_mean_bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                              std::int64_t ntime, Weights a, Summation summation) {
    return accumulate_steps(grid, truth, prediction, ntime)
        .time_and_global_mean_bias(a, ValidityPolicy::propagate, summation);
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                      \
    template std::vector<double> rmse_of_time_mean<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, std::int64_t, \
                                                      Weights, Summation);                                            \
    template std::vector<double> time_and_global_mean_bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>,       \
                                                              std::int64_t, Weights, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
