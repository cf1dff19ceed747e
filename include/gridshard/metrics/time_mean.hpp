#pragma once
/// @file
/// Time-mean scores streamed one step at a time: per-point sums over steps of (prediction - truth),
/// exact, merged over the data group, and finalized into rmse_of_time_mean and time_and_global_mean_bias
/// under a named validity policy. The library's time-mean metrics and `gridshard eval` are this code.
///
/// @code
///   // Each data rank adds its own steps, then one merge gives every rank the sums over all steps.
///   std::vector<double> rmse_of_mean(const gridshard::ShardedGrid& grid, gridshard::Weights weights,
///                                    const std::vector<std::vector<float>>& truth_steps,
///                                    const std::vector<std::vector<float>>& prediction_steps,
///                                    std::int64_t channels) {
///       gridshard::TimeMeanAccumulator sums(grid, channels);
///       for (std::size_t k = 0; k < truth_steps.size(); ++k) {   // (channels, box rows, box cols); no MPI
///           sums.add(gridshard::FieldShard<float>{truth_steps[k], channels},
///                    gridshard::FieldShard<float>{prediction_steps[k], channels});
///       }
///       sums.merge_over_data();                                   // collective over `data`
///       return sums.rmse_of_time_mean(weights, gridshard::ValidityPolicy::skip_invalid_pairs);   // over `spatial`
///   }
/// @endcode

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/core/memory.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// Per channel the weighted mean of the squares of `differences` (channels, rows, cols of this rank's box): with
/// propagate as weighted_mean treats values, otherwise over the points left (weighted_nanmean). The mean square
/// under rmse_of_time_mean's root. Collective over `spatial`.
[[nodiscard]] std::vector<double> mean_square(const ShardedGrid& grid, std::vector<double> differences,
                                              std::int64_t channels, Weights a, ValidityPolicy policy,
                                              Summation summation = Summation::reproducible);

/// rmse_of_time_mean and time_and_global_mean_bias per channel (TimeMeanAccumulator::time_mean_scores).
struct TimeMeanScores {
    std::vector<double> rmse;
    std::vector<double> bias;
};

class TimeMeanAccumulator;
/// add_fields of the same fields to several accumulators in one pass (TimeMeanAccumulator's friend, below).
template <class T>
void add_fields_to(std::span<TimeMeanAccumulator* const> accumulators, std::span<const T> fields);

/// Per point of a rank's box and channel: the sum over steps of the finite differences (prediction -
/// truth) as a double-double (TwoSum), and the IEEE sum of the non-finite ones. The finite sum is exact
/// while a point's differences span less than about 2^(80 - log2 steps), so its value does not depend on
/// how steps are split over data ranks or added; the non-finite sum is NaN or an infinity as IEEE
/// arithmetic gives it. 24 bytes per point, of which a step streams 8 (the running sums) where every addition of a
/// chunk of points is exact and finite: the error terms and the non-finite sums are written, and their memory
/// touched, only in chunks that need them. Keeps a copy of `grid` (sharing its mesh), so it may outlive it.
class TimeMeanAccumulator {
  public:
    /// No MPI calls.
    TimeMeanAccumulator(const ShardedGrid& grid, std::int64_t channels);

    /// Adds one step, both fields (channels, rows, cols) of this rank's box. No MPI calls; throws
    /// ArgumentError for a shape that does not fit (agree first where only some ranks could err).
    template <class T>
    void add(FieldShard<T> truth, FieldShard<T> prediction);

    /// Adds one step of one field: the sums are then of the field itself, and mean_difference() is its
    /// time mean (an accumulator takes one kind of add). No MPI calls.
    template <class T>
    void add(FieldShard<T> values);

    /// Adds one or more steps of one field at once: `fields` (their count, channels, rows, cols of this rank's box,
    /// such as the members of a forecast at one lead time), as their exact double-double sum in one pass: the
    /// sums of adding each. No MPI calls; throws ArgumentError for a size that is not whole fields.
    template <class T>
    void add_fields(std::span<const T> fields);
    /// add_fields of the same `fields` to each of `accumulators` (of one grid and channels) in one pass: each block's
    /// exact sum formed once, then added to each, the sums of add_fields to each in turn. No MPI calls.
    template <class T>
    friend void add_fields_to(std::span<TimeMeanAccumulator* const> accumulators, std::span<const T> fields);

    /// Adds `steps` steps of one field at once, given by `parts` (each channels x box) whose exact per-point sum is
    /// the steps' sum (for example a double-double sum of several members, as its two halves): the sums become
    /// those of adding each step, as exact. No MPI calls; throws ArgumentError for a part that does not fit.
    void add_steps(std::span<const std::span<const double>> parts, std::int64_t steps);

    /// Collective over `data`: a small agreement that every rank could allocate its send buffer, then one
    /// all-gather of the sums (24 bytes per point per data rank), merged in data-rank order, and of the
    /// step counts; afterwards every data rank holds the sums over every step.
    void merge_over_data();

    /// The steps added (over every data rank after merge_over_data()).
    [[nodiscard]] std::int64_t steps() const noexcept { return steps_; }

    /// Per point the time mean of (prediction - truth) under `policy`: propagate keeps the non-finite sum
    /// (NaN, or an infinity), skip_nan makes a point NaN only when a step was NaN, skip_invalid_pairs makes
    /// a point NaN when any step was not finite. No MPI calls.
    [[nodiscard]] std::vector<double> mean_difference(ValidityPolicy policy) const;

    /// sqrt(weighted mean of the squared time-mean differences): with propagate as `rmse` treats values
    /// (weighted_mean), otherwise over the points left (weighted_nanmean). Collective over `spatial`.
    [[nodiscard]] std::vector<double> rmse_of_time_mean(Weights a, ValidityPolicy policy,
                                                        Summation summation = Summation::reproducible) const;

    /// The weighted mean of the time-mean differences, as rmse_of_time_mean. Collective over `spatial`.
    [[nodiscard]] std::vector<double> time_and_global_mean_bias(Weights a, ValidityPolicy policy,
                                                                Summation summation = Summation::reproducible) const;

    /// Both of the above, per channel, from one pass over the time-mean differences and one allreduce: the same
    /// values. Collective over `spatial`.
    [[nodiscard]] TimeMeanScores time_mean_scores(Weights a, ValidityPolicy policy,
                                                  Summation summation = Summation::reproducible) const;

    /// For a kernel that adds to several accumulators in one pass (metrics/trend.cpp): per point the running sum of
    /// the finite values, its error term and the IEEE sum of the non-finite ones, to be updated as add() updates
    /// them (TwoSum), then count_steps() with the steps so added. No MPI calls.
    struct RunningSums {
        double* sum;
        double* error;
        double* special;
    };
    [[nodiscard]] RunningSums running_sums() noexcept;
    void count_steps(std::int64_t steps) noexcept { steps_ += steps; }

    /// The grid whose box is summed.
    [[nodiscard]] const ShardedGrid& grid() const noexcept { return grid_; }

    /// The points summed (channels x this rank's box).
    [[nodiscard]] std::size_t points() const noexcept { return sum_.size(); }

    /// Point `k`'s sum: `hi + lo` is the exact sum of its finite values, `special` the IEEE sum of the non-finite
    /// ones (0 when none). No MPI calls.
    struct PointSum {
        double hi, lo, special;
    };
    [[nodiscard]] PointSum point_sum(std::size_t k) const noexcept { return {sum_[k], error_[k], special_[k]}; }

  private:
    template <bool with_truth, class T>
    void add_step(FieldShard<T> truth, FieldShard<T> prediction);
    /// mean_difference() into `mean` (one value a point).
    void write_mean_difference(ValidityPolicy policy, std::span<double> mean) const;

    /// Writes the zeros of the error terms and non-finite sums no chunk has written yet, and marks every chunk written:
    /// before a kernel outside adds to them all (running_sums) or a merge reads them.
    void touch_every_chunk() noexcept;

    ShardedGrid grid_;
    std::int64_t channels_;
    std::int64_t steps_ = 0;
    std::vector<double> sum_;
    ZeroedArray<double> error_;    // 0 where no addition was inexact
    ZeroedArray<double> special_;  // the IEEE sum of the non-finite differences (0 when none)
    // Per chunk of points (time_mean.cpp's time_sum_chunk): one bit once its error terms have been written, another
    // once its non-finite sums have; where a bit is not set those values are all 0, their memory perhaps never touched.
    std::vector<std::uint8_t> chunk_written_;
};

}  // namespace gridshard
