#pragma once
/// @file
/// The metrics of docs/design.md §3 on shards. Each gives the serial answer whatever the decomposition: with
/// Summation::reproducible (the default) the result is bit-identical for every mesh shape, rank count
/// and split rule. Results are per channel and "spatially global": every rank of the spatial group
/// holds the value for its own data-parallel samples. Combining over the data group stays an explicit
/// reduce_mean / reduce_weighted_mean (comm/collectives.hpp).
///
/// Every metric first checks its arguments collectively (one 24-byte allreduce over its group), so a
/// bad argument on one rank raises ArgumentError on every rank of the group instead of a hang; the
/// gradient metrics fold the halo exchange's own arguments into that one check. Bytes on the wire below are per rank,
/// for C channels, besides those checks; an exact partial sum travels as ExactSum::wire_size = 143
/// int64 (1,144 bytes), a fast one as 8 bytes. Bit-identical results hold for one build: compile
/// options that change floating-point evaluation (another -march, FMA contraction) may change bits.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// `sum(where(a != 0, x, 0) * a)` per channel: NaNs under zero weight vanish, others propagate.
/// Collective over `spatial`: one allreduce of C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> weighted_sum(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                               Summation summation = Summation::reproducible);

/// `weighted_sum(x, a) / sum(a)` per channel. Collective over `spatial`: one allreduce of C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                Summation summation = Summation::reproducible);

/// `sum over valid of x*a / sum over valid of a` (valid: x not NaN, ValidityPolicy::skip_nan; an
/// infinity counts as a value, so the mean is then +-inf, or NaN with both); NaN where no point is valid.
/// Collective over `spatial`: one allreduce of 2C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> weighted_nanmean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                   Summation summation = Summation::reproducible);

/// The weighted mean over the points `policy` counts (propagate: weighted_mean; skip_nan:
/// weighted_nanmean; skip_invalid_pairs: the finite points). Collective over `spatial`: one allreduce of
/// 2C + 1 sums (C + 1 under propagate).
template <class T>
[[nodiscard]] std::vector<double> masked_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                       ValidityPolicy policy,
                                                       Summation summation = Summation::reproducible);

/// Population std `sqrt(weighted_mean((x - weighted_mean(x))^2))`, from the sums of a, a*x and a*x^2
/// combined in 106-bit arithmetic. Collective over `spatial`: one allreduce of 2C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                               Summation summation = Summation::reproducible);

/// weighted_std over the points `policy` counts (a point with weight 0 or left out by the policy adds
/// nothing). Collective over `spatial`: one allreduce of 3C + 1 sums (2C + 1 under propagate).
template <class T>
[[nodiscard]] std::vector<double> masked_weighted_std(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                      ValidityPolicy policy,
                                                      Summation summation = Summation::reproducible);

/// `weighted_mean(p - t)` per channel, as `(sum a*p - sum a*t) / sum a` with the sums' difference taken
/// in 106-bit arithmetic (each product a*x is exact for per-row weights, rounded once for per-point
/// weights).
/// Collective over `spatial`: one allreduce of 2C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                       Weights a, Summation summation = Summation::reproducible);

/// bias over the points `policy` counts: a point counts when its weight is non-zero and both truth and
/// prediction count (skip_nan: neither is NaN; skip_invalid_pairs: both finite). The Evaluator's `bias`
/// is masked_bias with skip_invalid_pairs. Collective over `spatial`: one allreduce of 3C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> masked_bias(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                              Weights a, ValidityPolicy policy,
                                              Summation summation = Summation::reproducible);

/// `sqrt(weighted_mean((p - t)^2))` per channel. Collective over `spatial`: one allreduce of C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                       Weights a, Summation summation = Summation::reproducible);

/// rmse over the points `policy` counts, as masked_bias. Collective over `spatial`: one allreduce of
/// 2C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> masked_rmse(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                              Weights a, ValidityPolicy policy,
                                              Summation summation = Summation::reproducible);

/// Weighted mean with weights `a * region`, `region` one value per point of this rank's box (a 0/1
/// mask or fractional cover). Collective over `spatial`: one allreduce of C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> regional_weighted_mean(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                         std::span<const double> region,
                                                         Summation summation = Summation::reproducible);

/// The weighted statistics weighted_statistics forms, each that of its own function above.
enum class WeightedStatistic { sum, mean, nanmean, std, bias, rmse };

/// A weighted statistic per channel beside what a gradient of it needs, all from the statistic's one pass and one
/// allreduce: `weights` the weight of the points it counted (the non-NaN ones for a nanmean, every point of non-zero
/// weight otherwise), and for a std `means` the mean its deviations are taken from (empty otherwise).
struct WeightedStatistics {
    std::vector<double> values;  ///< the bits of the statistic's own function (weighted_mean, rmse, ...)
    std::vector<double> weights;
    std::vector<double> means;
};

/// `statistic` of `x` (bias and rmse: of `prediction` against `x`, which is then required), with weights `a`, or
/// `a * region` per point when `region` is given (as regional_weighted_mean). Collective over `spatial`: one
/// allreduce, as the statistic's own function.
template <class T>
[[nodiscard]] WeightedStatistics weighted_statistics(const ShardedGrid& grid, WeightedStatistic statistic,
                                                     FieldShard<T> x, const FieldShard<T>* prediction, Weights a,
                                                     Summation summation = Summation::reproducible,
                                                     std::optional<std::span<const double>> region = std::nullopt);

/// NaN-aware mean over longitude, `nansum / count of valid`, for each channel and each row of this
/// rank's box, laid out (channels, rows); an all-NaN row gives NaN. Collective over `lon` only. With exact sums: one
/// allgather of each row's fixed-point sum (6 int64 per channel and row), then, only for the rows some rank sums by
/// the per-row path (a range the fixed-point grids cannot hold, infinities, more than 2048 columns on a rank), one
/// allreduce of their exact sums (19 int64 each for float, 76 for double). Fast sums: one allreduce of 2 doubles per
/// channel and row. Every rank of the lon group holds its own rows.
template <class T>
[[nodiscard]] std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x,
                                             Summation summation = Summation::reproducible);

/// zonal_mean beside what its gradient needs: per (channel, row) the number of valid points each mean averaged, from
/// the same exchange. Collective over `lon` only, as zonal_mean.
struct ZonalMeanAndCount {
    std::vector<double> means;   ///< zonal_mean's, bit for bit
    std::vector<double> counts;  ///< the points that are not NaN over the whole circle
};
template <class T>
[[nodiscard]] ZonalMeanAndCount zonal_mean_and_count(const ShardedGrid& grid, FieldShard<T> x,
                                                     Summation summation = Summation::reproducible);

/// zonal_mean of several fields of the same shape (for example truth and prediction) in one exchange
/// over `lon`: one result per field, each laid out as zonal_mean's. Collective over `lon`: one 24-byte
/// argument check, then zonal_mean's exchange for every field, channel and row at once.
template <class T>
[[nodiscard]] std::vector<std::vector<double>> zonal_means(const ShardedGrid& grid,
                                                           std::span<const FieldShard<T>> fields,
                                                           Summation summation = Summation::reproducible);

/// `sqrt(g_lat^2 + g_lon^2)` at every point of this rank's box, (channels, rows, cols), with
/// torch.gradient / numpy.gradient semantics (see GradientOptions). Throws ArgumentError for nlat or
/// nlon of 1. Collective over `spatial`: one halo exchange of one cell with the 4 side neighbours
/// (C x perimeter values); each rank holds its own points.
template <class T>
[[nodiscard]] std::vector<double> gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x,
                                                     const GradientOptions& options = {});

/// The adjoint of gradient_magnitude, for gradients: for `upstream` u `(channels, box)`, the gradient of
/// `sum_p u_p |grad x|_p` with respect to this rank's x, in T, written to `gradient` (x's size). Each point's
/// derivative coefficients `(u gy / |grad x|, u gx / |grad x|)` (in double, rounded once to T; zero where u is zero
/// or the magnitude is zero or not finite) go through the stencil's transpose (torch.gradient's, one-sided at the
/// grid's edges, longitude periodic with `options.periodic_lon`; unit spacing only), each point's sum in a fixed
/// order, so the result is the same bits on every layout. Collective over `spatial`: an agreement on the
/// arguments, two padded halo exchanges of one cell.
template <class T>
void gradient_magnitude_backward(const ShardedGrid& grid, FieldShard<T> x, std::span<const T> upstream,
                                 std::span<T> gradient, const GradientOptions& options = {});

/// The pieces of the gradient scores, per channel: each field's weighted mean gradient magnitude over its own valid
/// (non-NaN) magnitudes and the weight of those points, from the exact sums rounded once (plain sums under
/// Summation::fast). Fields: the truth, then the prediction where one is given. The gradients of the scores need
/// the weights; the scores below are these means.
struct GradientMagnitudeMeans {
    std::vector<double> mean;    ///< (fields, channels), field slowest
    std::vector<double> weight;  ///< (fields, channels), field slowest
};

/// gradient_magnitude_means of `truth` and, unless null, `prediction` (of truth's shape). Collective over
/// `spatial`: one halo exchange carrying the fields (fields x C x perimeter values), then one allreduce of
/// 2 fields C + 1 sums.
template <class T>
[[nodiscard]] GradientMagnitudeMeans gradient_magnitude_means(const ShardedGrid& grid, FieldShard<T> truth,
                                                              const FieldShard<T>* prediction, Weights a,
                                                              const GradientOptions& options = {},
                                                              Summation summation = Summation::reproducible);

/// `weighted_nanmean(gradient_magnitude(x), a)` per channel, without storing the magnitudes.
/// Collective over `spatial`: one halo exchange (C x perimeter values), then one allreduce of 2C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> weighted_mean_gradient_magnitude(const ShardedGrid& grid, FieldShard<T> x, Weights a,
                                                                   const GradientOptions& options = {},
                                                                   Summation summation = Summation::reproducible);

/// `100 * (G(p) - G(t)) / G(t)`, `G = weighted_mean_gradient_magnitude`, per channel. Collective over
/// `spatial`: one halo exchange carrying both fields (2C x perimeter values), then one allreduce of
/// 4C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> gradient_magnitude_percent_diff(const ShardedGrid& grid, FieldShard<T> truth,
                                                                  FieldShard<T> prediction, Weights a,
                                                                  const GradientOptions& options = {},
                                                                  Summation summation = Summation::reproducible);

/// rmse of the time means: `truth` and `prediction` hold `ntime` steps, (ntime, channels, rows, cols)
/// with `channels = x.channels / ntime`. The per-point time means of (p - t) come from the one streaming
/// TimeMeanAccumulator (metrics/time_mean.hpp) under ValidityPolicy::propagate, as `rmse` treats values.
/// Collective over `spatial`: the argument check, then one allreduce of C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> rmse_of_time_mean(const ShardedGrid& grid, FieldShard<T> truth,
                                                    FieldShard<T> prediction, std::int64_t ntime, Weights a,
                                                    Summation summation = Summation::reproducible);

/// Weighted mean over space of (time-mean p - time-mean t), shapes and accumulation as rmse_of_time_mean.
/// Collective over `spatial`: one allreduce of 2C + 1 sums at the end.
template <class T>
[[nodiscard]] std::vector<double> time_and_global_mean_bias(const ShardedGrid& grid, FieldShard<T> truth,
                                                            FieldShard<T> prediction, std::int64_t ntime, Weights a,
                                                            Summation summation = Summation::reproducible);

}  // namespace gridshard
