#include "gridshard/metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/time_mean.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "row_kernels.hpp"
#include "threads.hpp"

namespace gridshard {
namespace {

using detail::PartialSums;
using detail::RowWeights;
using detail::Scratch;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t total_weight_slot = 0;  // every weighted metric checks sum(a) > 0 with it

// Slot of term `term` of channel `c` when each channel has `terms` sums after the total-weight slot.
constexpr std::int64_t slot(std::int64_t c, std::int64_t term, std::int64_t terms) {
    return 1 + c * terms + term;
}

// The first non-empty message, so a metric reports the first thing wrong with its arguments.
std::string first_error(std::initializer_list<std::string> errors) {
    for (const std::string& e : errors) {
        if (!e.empty()) {
            return e;
        }
    }
    return {};
}

template <class T>
std::string pair_error(const FieldShard<T>& truth, const FieldShard<T>& prediction, const Box& box) {
    if (truth.channels != prediction.channels || truth.values.size() != prediction.values.size()) {
        return "truth (" + std::to_string(truth.values.size()) + " values, " + std::to_string(truth.channels) +
               " channels) and prediction (" + std::to_string(prediction.values.size()) + " values, " +
               std::to_string(prediction.channels) + " channels) must have the same shape";
    }
    return first_error({detail::shard_error(truth, box, "truth"), detail::shard_error(prediction, box, "prediction")});
}

// Collective over `spatial`: raises `local_error` (or a channel count that differs between ranks) on
// every rank alike, before any partial sums are formed.
void check_arguments(const ShardedGrid& grid, const std::string& local_error, std::int64_t channels) {
    detail::agree_or_throw(grid.mesh().spatial(), local_error, {channels}, "channels");
}

// The start every weighted metric shares: `error` and the weights' own error raised on every rank of
// the spatial group alike, then `terms` sums per channel after the total-weight slot, which is filled.
PartialSums start_weighted(const ShardedGrid& grid, const RowWeights& weights, const std::string& error,
                           std::int64_t channels, std::int64_t terms, Summation summation) {
    check_arguments(grid, first_error({error, weights.error()}), channels);
    PartialSums sums(1 + terms * channels, summation);
    weights.add_total(sums, total_weight_slot);
    return sums;
}

// Merges `sums` over the spatial group and checks the total weight, which every rank sees alike.
void merge_weighted(PartialSums& sums, const ShardedGrid& grid) {
    sums.allreduce(grid.mesh().spatial());
    const double total = sums.value(total_weight_slot);
    if (!(total > 0.0)) {
        throw ArgumentError("the total weight over the grid must be > 0, got " + std::to_string(total));
    }
}

template <class T>
const T* row_of(const FieldShard<T>& x, const Box& box, std::int64_t c, std::int64_t i) {
    return x.values.data() + (c * box.lat.size() + i) * box.lon.size();
}

// Per channel: slot 0 = sum(a*x), slot 1 = sum over valid a*x... as the caller lays out; this visits
// every (channel, row) of a shard with a weights check folded into the local error.
template <class F>
void for_each_row(const Box& box, std::int64_t channels, F&& f) {
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            f(c, i);
        }
    }
}

// sum(a*x) and sum(a) per channel: the shared core of weighted_sum and weighted_mean.
template <class T>
PartialSums weighted_sums(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation,
                          const std::string& extra_error = {}) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums = start_weighted(grid, weights, first_error({extra_error, detail::shard_error(x, box, "x")}),
                                      x.channels, 1, summation);
    {
        Scratch scratch(box.lon.size(), 1);
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            detail::add_weighted_row(sums, slot(c, 0, 1), row_of(x, box, c, i), box.lon.size(), weights, i, scratch[0]);
        });
    }
    merge_weighted(sums, grid);
    return sums;
}

// sum(a*x) / sum(a) per channel from weighted_sums.
std::vector<double> means_of(const PartialSums& sums, std::int64_t channels) {
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.ratio(slot(c, 0, 1), total_weight_slot);
    }
    return result;
}

// sum over valid points of a*x / their weight per channel (terms 0 and 1 of two); NaN where none is valid.
std::vector<double> nan_means_of(const PartialSums& sums, std::int64_t channels) {
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.ratio(slot(c, 0, 2), slot(c, 1, 2));
    }
    return result;
}

}  // namespace

template <class T>
std::vector<double> weighted_sum(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const PartialSums sums = weighted_sums(grid, x, a, summation);
    std::vector<double> result(static_cast<std::size_t>(x.channels));
    for (std::int64_t c = 0; c < x.channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.value(slot(c, 0, 1));
    }
    return result;
}

template <class T>
std::vector<double> weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    return means_of(weighted_sums(grid, x, a, summation), x.channels);
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
    std::vector<double> combined;
    if (error.empty()) {
        combined.resize(region.size());
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            for (std::int64_t j = 0; j < box.lon.size(); ++j) {
                const double w = weights.per_point() ? weights.points(i)[j] : weights.row(i);
                const auto k = static_cast<std::size_t>(i * box.lon.size() + j);
                combined[k] = w * region[k];
            }
        }
    } else {
        combined.assign(static_cast<std::size_t>(box.area()), 0.0);  // unused: the check below raises
    }
    return means_of(weighted_sums(grid, x, Weights{combined, true}, summation, error), x.channels);
}

template <class T>
std::vector<double> weighted_nanmean(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums = start_weighted(grid, weights, detail::shard_error(x, box, "x"), x.channels, 2, summation);
    {
        Scratch scratch(box.lon.size());
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            detail::add_valid_row(sums, slot(c, 0, 2), slot(c, 1, 2), row_of(x, box, c, i), box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    return nan_means_of(sums, x.channels);
}

template <class T>
std::vector<double> weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums = start_weighted(grid, weights, detail::shard_error(x, box, "x"), x.channels, 2, summation);
    {
        Scratch scratch(box.lon.size());
        const std::int64_t cols = box.lon.size();
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            const T* row = row_of(x, box, c, i);
            double* squares = scratch[0];
            for (std::int64_t j = 0; j < cols; ++j) {
                squares[j] = static_cast<double>(row[j]) * static_cast<double>(row[j]);
            }
            detail::add_weighted_row(sums, slot(c, 0, 2), row, cols, weights, i, scratch[1]);
            detail::add_weighted_row(sums, slot(c, 1, 2), squares, cols, weights, i, scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    const DoubleDouble total = sums.value_dd(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(x.channels));
    for (std::int64_t c = 0; c < x.channels; ++c) {
        result[static_cast<std::size_t>(c)] =
            dd::population_std(total, sums.value_dd(slot(c, 0, 2)), sums.value_dd(slot(c, 1, 2)));
    }
    return result;
}

namespace {

// bias with an error found by the caller folded into the same collective check.
template <class T>
std::vector<double> bias_of(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                            Summation summation, const std::string& caller_error) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums = start_weighted(grid, weights, first_error({caller_error, pair_error(truth, prediction, box)}),
                                      channels, 2, summation);
    {
        Scratch scratch(box.lon.size(), 1);
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            detail::add_weighted_row(sums, slot(c, 0, 2), row_of(truth, box, c, i), box.lon.size(), weights, i,
                                     scratch[0]);
            detail::add_weighted_row(sums, slot(c, 1, 2), row_of(prediction, box, c, i), box.lon.size(), weights, i,
                                     scratch[0]);
        });
    }
    merge_weighted(sums, grid);
    const double total = sums.value(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = sums.difference(slot(c, 1, 2), slot(c, 0, 2)) / total;
    }
    return result;
}

}  // namespace

template <class T>
std::vector<double> bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    return bias_of(grid, truth, prediction, a, summation, {});
}

namespace {

// rmse with an error found by the caller folded into the same collective check.
template <class T>
std::vector<double> rmse_of(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                            Summation summation, const std::string& caller_error) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums = start_weighted(grid, weights, first_error({caller_error, pair_error(truth, prediction, box)}),
                                      channels, 1, summation);
    {
        Scratch scratch(box.lon.size());
        const std::int64_t cols = box.lon.size();
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            const T* t = row_of(truth, box, c, i);
            const T* p = row_of(prediction, box, c, i);
            double* squares = scratch[0];
            for (std::int64_t j = 0; j < cols; ++j) {
                const double d = static_cast<double>(p[j]) - static_cast<double>(t[j]);
                squares[j] = d * d;
            }
            detail::add_weighted_row(sums, slot(c, 0, 1), squares, cols, weights, i, scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    const DoubleDouble total = sums.value_dd(total_weight_slot);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        result[static_cast<std::size_t>(c)] = std::sqrt(dd::divide(sums.value_dd(slot(c, 0, 1)), total).hi);
    }
    return result;
}

}  // namespace

template <class T>
std::vector<double> rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction, Weights a,
                         Summation summation) {
    return rmse_of(grid, truth, prediction, a, summation, {});
}

template <class T>
std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const Box& box = grid.box();
    const std::string error = detail::shard_error(x, box, "x");
    const std::int64_t rows = box.lat.size();
    const std::int64_t values = x.channels * rows;
    // Slots: the nansum of each (channel, row), then its count of valid points; no weights here.
    detail::agree_or_throw(grid.mesh().lon(), error, {x.channels}, "channels");
    PartialSums sums(values * 2, summation, window_for<T>());
    // Every (channel, row) has slots of its own, formed by one thread: the same bits for any thread count.
    GRIDSHARD_PRAGMA(omp parallel num_threads(detail::threads_for(values)) if (values > 1)) {
        // Masked rows keep the input type: float rows take the exact sum's cheaper one-digit path.
        std::vector<T> masked(static_cast<std::size_t>(box.lon.size()));
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t k = 0; k < values; ++k) {
            const T* row = row_of(x, box, k / rows, k % rows);
            T* __restrict out = masked.data();
            std::int64_t valid = 0;
            for (std::int64_t j = 0; j < box.lon.size(); ++j) {
                const T v = row[j];
                out[j] = v == v ? v : T{0};
                valid += v == v ? 1 : 0;
            }
            sums.add_row(k, masked.data(), box.lon.size(), 1.0);
            sums.add_count(values + k, 1.0, valid);
        }
    }
    sums.allreduce(grid.mesh().lon());
    std::vector<double> result(static_cast<std::size_t>(values));
    for (std::int64_t k = 0; k < values; ++k) {
        const double count = sums.value(values + k);
        result[static_cast<std::size_t>(k)] = count > 0 ? sums.value(k) / count : nan;
    }
    return result;
}

namespace {

// Exchanges the one-cell halos of `fields` (all shaped like the first) for the gradient stencil.
// Collective over `spatial`; a shard of the wrong size raises on every rank inside the exchange.
template <class T>
HaloBuffers<T> exchange_for_gradient(const ShardedGrid& grid, std::span<const std::span<const T>> fields,
                                     std::int64_t channels, const GradientOptions& options) {
    detail::check_gradient_grid(grid.grid());
    const HaloExchange& plan = grid.halo_plan(options.periodic_lon);
    auto halo = plan.make_buffers<T>(std::max<std::int64_t>(channels, 0) * static_cast<std::int64_t>(fields.size()));
    plan.execute(fields, halo);
    return halo;
}

std::string latitude_error(const ShardedGrid& grid, const GradientOptions& options) {
    return detail::gradient_options_error(options, grid.box().lat.size());
}

}  // namespace

template <class T>
std::vector<double> gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, const GradientOptions& options) {
    const Box& box = grid.box();
    const std::span<const T> fields[] = {x.values};
    check_arguments(grid, first_error({detail::shard_error(x, box, "x"), latitude_error(grid, options)}), x.channels);
    const auto halo = exchange_for_gradient<T>(grid, fields, x.channels, options);
    std::vector<double> result(static_cast<std::size_t>(x.channels * box.area()));
    detail::GradientRows<T> rows(grid.grid(), box, options, x.values, x.channels, halo, 0);
    for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
        rows.row(c, i, result.data() + (c * box.lat.size() + i) * box.lon.size());
    });
    return result;
}

template <class T>
std::vector<double> weighted_mean_gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                     const GradientOptions& options, Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    PartialSums sums =
        start_weighted(grid, weights, first_error({detail::shard_error(x, box, "x"), latitude_error(grid, options)}),
                       x.channels, 2, summation);
    const std::span<const T> fields[] = {x.values};
    const auto halo = exchange_for_gradient<T>(grid, fields, x.channels, options);
    {
        Scratch scratch(box.lon.size(), 3);
        detail::GradientRows<T> rows(grid.grid(), box, options, x.values, x.channels, halo, 0);
        for_each_row(box, x.channels, [&](std::int64_t c, std::int64_t i) {
            rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 0, 2), slot(c, 1, 2), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    return nan_means_of(sums, x.channels);
}

template <class T>
std::vector<double> gradient_magnitude_percent_diff(const ShardedGrid& grid, FieldShard<T> truth,
                                                    FieldShard<T> prediction, Weights a, const GradientOptions& options,
                                                    Summation summation) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    const std::int64_t channels = truth.channels;
    PartialSums sums =
        start_weighted(grid, weights, first_error({pair_error(truth, prediction, box), latitude_error(grid, options)}),
                       channels, 4, summation);
    const std::span<const T> fields[] = {truth.values, prediction.values};
    const auto halo = exchange_for_gradient<T>(grid, fields, channels, options);  // one exchange, both fields
    {
        Scratch scratch(box.lon.size(), 3);
        detail::GradientRows<T> truth_rows(grid.grid(), box, options, truth.values, channels, halo, 0);
        detail::GradientRows<T> prediction_rows(grid.grid(), box, options, prediction.values, channels, halo, 1);
        for_each_row(box, channels, [&](std::int64_t c, std::int64_t i) {
            truth_rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 0, 4), slot(c, 1, 4), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
            prediction_rows.row(c, i, scratch[2]);
            detail::add_valid_row(sums, slot(c, 2, 4), slot(c, 3, 4), scratch[2], box.lon.size(), weights, i,
                                  scratch[0], scratch[1]);
        });
    }
    merge_weighted(sums, grid);
    std::vector<double> result(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        const double g_truth = sums.ratio(slot(c, 0, 4), slot(c, 1, 4));
        const double g_prediction = sums.ratio(slot(c, 2, 4), slot(c, 3, 4));
        result[static_cast<std::size_t>(c)] = 100.0 * (g_prediction - g_truth) / g_truth;
    }
    return result;
}

namespace {

// Per-point means over `ntime` leading steps, (channels, rows, cols) in double, summed in step order.
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

#define GRIDSHARD_INSTANTIATE_METRICS(T)                                                                              \
    template std::vector<double> weighted_sum<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);              \
    template std::vector<double> weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);             \
    template std::vector<double> weighted_nanmean<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);          \
    template std::vector<double> weighted_std<T>(const ShardedGrid&, FieldShard<T>, Weights, Summation);              \
    template std::vector<double> bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation);       \
    template std::vector<double> rmse<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, Weights, Summation);       \
    template std::vector<double> regional_weighted_mean<T>(const ShardedGrid&, FieldShard<T>, Weights,                \
                                                           std::span<const double>, Summation);                       \
    template std::vector<double> zonal_mean<T>(const ShardedGrid&, FieldShard<T>, Summation);                         \
    template std::vector<double> gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, const GradientOptions&);    \
    template std::vector<double> weighted_mean_gradient_magnitude<T>(const ShardedGrid&, FieldShard<T>, Weights,      \
                                                                     const GradientOptions&, Summation);              \
    template std::vector<double> gradient_magnitude_percent_diff<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, \
                                                                    Weights, const GradientOptions&, Summation);      \
    template std::vector<double> rmse_of_time_mean<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>, std::int64_t, \
                                                      Weights, Summation);                                            \
    template std::vector<double> time_and_global_mean_bias<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>,       \
                                                              std::int64_t, Weights, Summation);

GRIDSHARD_INSTANTIATE_METRICS(float)
GRIDSHARD_INSTANTIATE_METRICS(double)

}  // namespace gridshard
