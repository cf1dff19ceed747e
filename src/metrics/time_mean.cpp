#include "gridshard/metrics/time_mean.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"
#include "field_sums.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "metric_support.hpp"

namespace gridshard {

namespace {

// The difference p - t (or p, without a truth) in double.
template <bool with_truth, class T>
inline double difference(T t, T p) noexcept {
    return with_truth ? static_cast<double>(p) - static_cast<double>(t) : static_cast<double>(p);
}

// The points one flag of TimeMeanAccumulator::chunk_written_ covers: a page of each of its arrays. A block of
// detail::for_each_block starts on a chunk.
constexpr std::int64_t time_sum_chunk = 512;
static_assert(detail::thread_block_points % time_sum_chunk == 0);

// Flags of TimeMeanAccumulator::chunk_written_: a chunk's error terms, and its non-finite sums, have been written.
constexpr std::uint8_t errors_written = 1;
constexpr std::uint8_t specials_written = 2;

// Adds the finite differences p - t (or p, without a truth) of `n` <= time_sum_chunk points to their running sums, a
// non-finite one as 0, by TwoSum, each error term into `errors` (scratch, written for every point). Returns
// errors_written when some error term is not 0 (some addition was inexact), with specials_written when some difference
// is not finite.
// Branch-free, so it vectorises.
template <bool with_truth, class T>
GRIDSHARD_KERNEL unsigned add_chunk_of_differences(const T* __restrict t, const T* __restrict p, std::int64_t n,
                                                   double* __restrict sum, double* __restrict errors) noexcept {
    unsigned inexact = 0;
    unsigned special = 0;
    for (std::int64_t k = 0; k < n; ++k) {
        const double d = difference<with_truth>(t[k], p[k]);
        const bool finite = (d - d) == 0.0;  // false for NaN or infinite
        const double x = finite ? d : 0.0;
        const double s_new = sum[k] + x;
        const double v = s_new - sum[k];
        const double e = (sum[k] - (s_new - v)) + (x - v);
        errors[k] = e;
        sum[k] = s_new;
        inexact |= e != 0.0 ? errors_written : 0U;
        special |= finite ? 0U : specials_written;
    }
    return inexact | special;
}

// Adds the non-finite differences of `n` points to their IEEE sums, a finite one as +0, which changes no sum (it holds
// +0, an infinity or NaN): branch-free, so it vectorises. With `first` the sums are still 0 and their memory perhaps
// never touched: written, not read (0 + x is x, since x is never -0), so that a page's first touch is a write.
template <bool first, bool with_truth, class T>
GRIDSHARD_KERNEL void add_special_differences(const T* __restrict t, const T* __restrict p, std::int64_t n,
                                              double* __restrict special) noexcept {
    for (std::int64_t k = 0; k < n; ++k) {
        const double d = difference<with_truth>(t[k], p[k]);
        special[k] = (first ? 0.0 : special[k]) + ((d - d) == 0.0 ? 0.0 : d);
    }
}

// Adds p - t (or p, without a truth) of points [first, first + n) (`first` on a chunk) to their running sums, the
// arrays and `written` (chunk_written_) indexed from point 0: finite differences by TwoSum, non-finite ones to their
// own IEEE sum. Only the running sums are read and written in a chunk whose additions are exact and finite; adding an
// error term of +0 or a non-finite sum of +0 changes nothing elsewhere, since neither ever holds -0 (a running sum
// never does, so neither does a TwoSum error). A chunk's error terms and non-finite sums are first written, not read
// (a read of a page never touched would map the system's zero page, and the write after it copy the page and flush
// every core's TLB).
template <bool with_truth, class T>
void add_differences(const T* t, const T* p, std::int64_t first, std::int64_t n, double* sum, double* error,
                     double* special, std::uint8_t* written) noexcept {
    alignas(64) double errors[time_sum_chunk];
    for (std::int64_t begin = first; begin < first + n; begin += time_sum_chunk) {
        const std::int64_t size = std::min(time_sum_chunk, first + n - begin);
        std::uint8_t& flags = written[begin / time_sum_chunk];
        const unsigned found = add_chunk_of_differences<with_truth>(t + begin, p + begin, size, sum + begin, errors);
        if ((found & errors_written) != 0) {
            const bool had = (flags & errors_written) != 0;
            for (std::int64_t k = 0; k < size; ++k) {
                error[begin + k] = (had ? error[begin + k] : 0.0) + errors[k];
            }
        }
        if ((found & specials_written) != 0) {
            (flags & specials_written) != 0
                ? add_special_differences<false, with_truth>(t + begin, p + begin, size, special + begin)
                : add_special_differences<true, with_truth>(t + begin, p + begin, size, special + begin);
        }
        flags |= static_cast<std::uint8_t>(found);
    }
}

/// `size` values into one running sum each (a TwoSum a value, non-finite ones to their own sum). A kernel of its own,
/// every array restrict and no branch, so it vectorises (inlined into add_field_sums' lambda it did not).
GRIDSHARD_KERNEL void add_values(const double* __restrict values, std::int64_t size, double* __restrict sum,
                                 double* __restrict error, double* __restrict special) noexcept {
    for (std::int64_t k = 0; k < size; ++k) {
        detail::accumulate(values[k], sum[k], error[k], special[k]);
    }
}

/// Points [0, n) of `count` fields `stride` apart into the running sums of each of `targets` (offset to the
/// points' first): their exact sum s + e formed once a chunk, then into each target s then e (e alone when there are
/// several fields: one field's is 0).
template <class T>
GRIDSHARD_KERNEL void add_field_sums(const T* __restrict fields, std::int64_t count, std::int64_t stride,
                                     std::int64_t n,
                                     std::span<const TimeMeanAccumulator::RunningSums> targets) noexcept {
    detail::for_each_field_sum(fields, count, stride, n,
                               [&](std::int64_t first, std::int64_t size, const double* s, const double* e) {
                                   for (const TimeMeanAccumulator::RunningSums& t : targets) {
                                       add_values(s, size, t.sum + first, t.error + first, t.special + first);
                                       if (count > 1) {  // one field's e is 0
                                           add_values(e, size, t.sum + first, t.error + first, t.special + first);
                                       }
                                   }
                               });
}

}  // namespace

template <class T>
void TimeMeanAccumulator::add_fields(std::span<const T> fields) {
    TimeMeanAccumulator* self[] = {this};
    add_fields_to<T>(self, fields);
}

template <class T>
void add_fields_to(std::span<TimeMeanAccumulator* const> accumulators, std::span<const T> fields) {
    if (accumulators.empty()) {
        return;
    }
    const std::size_t points = accumulators.front()->sum_.size();
    for (const TimeMeanAccumulator* a : accumulators) {
        if (a->sum_.size() != points || (points == 0 ? !fields.empty() : fields.size() % points != 0)) {
            throw ArgumentError("TimeMeanAccumulator::add_fields: " + std::to_string(fields.size()) +
                                " values are not whole fields of " + std::to_string(a->sum_.size()) + " points");
        }
    }
    const auto count = static_cast<std::int64_t>(points == 0 ? 0 : fields.size() / points);
    if (count == 0) {
        return;
    }
    const auto n = static_cast<std::int64_t>(points);
    std::vector<TimeMeanAccumulator::RunningSums> all;
    for (TimeMeanAccumulator* a : accumulators) {
        all.push_back(a->running_sums());  // writes every point's error term and non-finite sum
    }
    detail::for_each_block(n, count * static_cast<std::int64_t>(all.size()),
                           [&](std::int64_t begin, std::int64_t size) {
                               std::vector<TimeMeanAccumulator::RunningSums> block(all.size());
                               for (std::size_t k = 0; k < all.size(); ++k) {
                                   block[k] = {all[k].sum + begin, all[k].error + begin, all[k].special + begin};
                               }
                               add_field_sums<T>(fields.data() + begin, count, n, size, block);
                           });
    for (TimeMeanAccumulator* a : accumulators) {
        a->steps_ += count;
    }
}

TimeMeanAccumulator::TimeMeanAccumulator(const ShardedGrid& grid, std::int64_t channels)
    : grid_(grid), channels_(channels) {
    if (channels < 1) {
        throw ArgumentError("TimeMeanAccumulator: channels must be >= 1, got " + std::to_string(channels));
    }
    const auto points = static_cast<std::size_t>(channels * grid.box().area());
    sum_ = allocate_vector<double>(points, "the time sums");
    error_ = ZeroedArray<double>(points, "the time sums");
    special_ = ZeroedArray<double>(points, "the time sums");
    chunk_written_ = allocate_vector<std::uint8_t>((points + time_sum_chunk - 1) / time_sum_chunk, "the time sums");
}

TimeMeanAccumulator::RunningSums TimeMeanAccumulator::running_sums() noexcept {
    touch_every_chunk();
    return {sum_.data(), error_.data(), special_.data()};
}

void TimeMeanAccumulator::touch_every_chunk() noexcept {
    const std::size_t points = sum_.size();
    for (std::size_t c = 0; c < chunk_written_.size(); ++c) {
        const std::size_t begin = c * time_sum_chunk;
        const std::size_t size = std::min<std::size_t>(time_sum_chunk, points - begin);
        if ((chunk_written_[c] & errors_written) == 0) {
            std::fill_n(error_.data() + begin, size, 0.0);  // written first (add_differences)
        }
        if ((chunk_written_[c] & specials_written) == 0) {
            std::fill_n(special_.data() + begin, size, 0.0);
        }
        chunk_written_[c] = errors_written | specials_written;
    }
}

template <class T>
void TimeMeanAccumulator::add(FieldShard<T> truth, FieldShard<T> prediction) {
    add_step<true>(truth, prediction);
}

template <class T>
void TimeMeanAccumulator::add(FieldShard<T> values) {
    add_step<false>(values, values);
}

template <bool with_truth, class T>
void TimeMeanAccumulator::add_step(FieldShard<T> truth, FieldShard<T> prediction) {
    const std::size_t points = sum_.size();
    if (truth.channels != channels_ || prediction.channels != channels_ || truth.values.size() != points ||
        prediction.values.size() != points) {
        throw ArgumentError("TimeMeanAccumulator::add: truth (" + std::to_string(truth.values.size()) +
                            " values) and prediction (" + std::to_string(prediction.values.size()) + " values) of " +
                            std::to_string(truth.channels) + " and " + std::to_string(prediction.channels) +
                            " channels, for " + std::to_string(channels_) + " channels of " + std::to_string(points) +
                            " values");
    }
    // Each point on its own: the threads split the points into blocks, and the sums are the same bits for
    // any count.
    detail::for_each_block(static_cast<std::int64_t>(points), 1, [&](std::int64_t begin, std::int64_t count) {
        add_differences<with_truth>(truth.values.data(), prediction.values.data(), begin, count, sum_.data(),
                                    error_.data(), special_.data(), chunk_written_.data());
    });
    ++steps_;
}

void TimeMeanAccumulator::add_steps(std::span<const std::span<const double>> parts, std::int64_t steps) {
    const std::size_t points = sum_.size();
    for (const std::span<const double> part : parts) {
        if (part.size() != points) {
            throw ArgumentError("TimeMeanAccumulator::add_steps: a part of " + std::to_string(part.size()) +
                                " values for " + std::to_string(points) + " points");
        }
    }
    // As add_step, each part in turn within each block (the same sums as adding the parts one by one).
    detail::for_each_block(static_cast<std::int64_t>(points), 1, [&](std::int64_t begin, std::int64_t count) {
        for (const std::span<const double> part : parts) {
            add_differences<false>(part.data(), part.data(), begin, count, sum_.data(), error_.data(), special_.data(),
                                   chunk_written_.data());
        }
    });
    steps_ += steps;
}

void TimeMeanAccumulator::merge_over_data() {
    const ProcessMesh& mesh = grid_.mesh();
    if (mesh.shape().data == 1) {
        return;  // nothing to merge
    }
    const std::size_t points = sum_.size();
    touch_every_chunk();  // every point's sums are read and written below
    // Agreed before the gather, so a rank short of memory raises on every rank instead of leaving the
    // others waiting in it.
    std::vector<double> packed;
    check_collectively(mesh.data(), attempt([&] {
                           packed = allocate_vector<double>(3 * points + 1, "the time sums for the data group");
                       }));
    for (std::size_t n = 0; n < points; ++n) {
        packed[3 * n] = sum_[n];
        packed[3 * n + 1] = error_[n];
        packed[3 * n + 2] = special_[n];
    }
    packed[3 * points] = static_cast<double>(steps_);
    const std::vector<double> all = allgather_data<double>(mesh, packed);
    const std::size_t parts = all.size() / packed.size();
    steps_ = 0;
    for (std::size_t d = 0; d < parts; ++d) {
        steps_ += static_cast<std::int64_t>(all[d * packed.size() + 3 * points]);
    }
    for (std::size_t n = 0; n < points; ++n) {
        DoubleDouble merged{};
        double special = 0.0;
        for (std::size_t d = 0; d < parts; ++d) {  // in data-rank order
            const double* part = all.data() + d * packed.size() + 3 * n;
            merged = dd::add(merged, dd::two_sum(part[0], part[1]));
            special += part[2];
        }
        sum_[n] = merged.hi;
        error_[n] = merged.lo;
        special_[n] = special;
    }
}

void TimeMeanAccumulator::write_mean_difference(ValidityPolicy policy, std::span<double> mean) const {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    const double steps = static_cast<double>(steps_);
    // Each point on its own: the threads take blocks of them.
    detail::for_each_block(static_cast<std::int64_t>(mean.size()), 1, [&](std::int64_t begin, std::int64_t count) {
        for (auto n = static_cast<std::size_t>(begin); n < static_cast<std::size_t>(begin + count); ++n) {
            const std::uint8_t written = chunk_written_[n / time_sum_chunk];  // else 0, their memory perhaps untouched
            const double special = (written & specials_written) != 0 ? special_[n] : 0.0;
            const double finite_mean = (sum_[n] + ((written & errors_written) != 0 ? error_[n] : 0.0)) / steps;
            if (special == 0.0 || steps_ == 0) {
                mean[n] = steps_ == 0 ? nan : finite_mean;
            } else {
                mean[n] = policy == ValidityPolicy::skip_invalid_pairs ? nan : special;  // NaN or an infinity
            }
        }
    });
}

std::vector<double> TimeMeanAccumulator::mean_difference(ValidityPolicy policy) const {
    std::vector<double> mean(sum_.size());
    write_mean_difference(policy, mean);
    return mean;
}

namespace {

// Per channel the weighted mean of `values` (channels, rows, cols of this rank's box) and of their squares, each
// square rounded to double: with propagate as weighted_mean treats values, otherwise over the points left
// (weighted_nanmean). One pass over the values taken as a pair (v, v), whose products are the rounded squares and
// whose validity is v's own. Collective over `spatial`: one allreduce.
struct MeanAndMeanSquare {
    std::vector<double> mean;
    std::vector<double> mean_square;
};
MeanAndMeanSquare mean_and_mean_square(const ShardedGrid& grid, std::span<const double> values, std::int64_t channels,
                                       Weights a, ValidityPolicy policy, Summation summation) {
    const FieldShard<double> field{values, channels};
    const ValidityPolicy mask = policy == ValidityPolicy::propagate ? policy : ValidityPolicy::skip_nan;
    const TermSums sums = detail::accumulate_terms<double>(
        grid, field, &field, a, {detail::weight_and(mask, {Term::truth, Term::cross}), mask, summation});
    return {detail::per_channel(sums, [&](std::int64_t c) { return sums.mean(c, Term::truth); }),
            detail::per_channel(sums, [&](std::int64_t c) { return sums.mean(c, Term::cross); })};
}

}  // namespace

std::vector<double> mean_square(const ShardedGrid& grid, std::vector<double> differences, std::int64_t channels,
                                Weights a, ValidityPolicy policy, Summation summation) {
    return mean_and_mean_square(grid, differences, channels, a, policy, summation).mean_square;
}

TimeMeanScores TimeMeanAccumulator::time_mean_scores(Weights a, ValidityPolicy policy, Summation summation) const {
    // Pages of their own, first touched by the threads that write them.
    ZeroedArray<double> differences(sum_.size(), "the time-mean differences");
    write_mean_difference(policy, std::span<double>(differences.data(), differences.size()));
    MeanAndMeanSquare means = mean_and_mean_square(
        grid_, std::span<const double>(differences.data(), differences.size()), channels_, a, policy, summation);
    for (double& m : means.mean_square) {
        m = std::sqrt(m);
    }
    return {std::move(means.mean_square), std::move(means.mean)};
}

std::vector<double> TimeMeanAccumulator::rmse_of_time_mean(Weights a, ValidityPolicy policy,
                                                           Summation summation) const {
    return time_mean_scores(a, policy, summation).rmse;
}

std::vector<double> TimeMeanAccumulator::time_and_global_mean_bias(Weights a, ValidityPolicy policy,
                                                                   Summation summation) const {
    return time_mean_scores(a, policy, summation).bias;
}

template void TimeMeanAccumulator::add<float>(FieldShard<float>, FieldShard<float>);
template void TimeMeanAccumulator::add<double>(FieldShard<double>, FieldShard<double>);
template void add_fields_to<float>(std::span<TimeMeanAccumulator* const>, std::span<const float>);
template void add_fields_to<double>(std::span<TimeMeanAccumulator* const>, std::span<const double>);
template void TimeMeanAccumulator::add_fields<float>(std::span<const float>);
template void TimeMeanAccumulator::add_fields<double>(std::span<const double>);
template void TimeMeanAccumulator::add<float>(FieldShard<float>);
template void TimeMeanAccumulator::add<double>(FieldShard<double>);

}  // namespace gridshard
