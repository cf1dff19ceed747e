#pragma once
/// @file
/// Per-point least-squares trends streamed one time at a time (ACE's trend metric): per point the exact sums of the
/// values and of time x value, and of the times and their squares, merged over the data group, and the slope of the
/// values against time formed from them, the same bits whatever the mesh or the order in which the times came.
///
/// @code
///   // Each data rank adds its own times (every member of a forecast at once), then one merge, then the slopes.
///   std::vector<double> slopes_per_year(const gridshard::ShardedGrid& grid, const std::vector<double>& seconds,
///                                       const std::vector<std::vector<float>>& fields, std::int64_t channels) {
///       gridshard::TrendAccumulator trend(grid, channels);
///       for (std::size_t k = 0; k < fields.size(); ++k) {   // one field (channels, box rows, box cols) a time
///           trend.add<float>(seconds[k], fields[k]);       // no MPI
///       }
///       trend.merge_over_data();                           // collective over `data`
///       return trend.slopes(365.25 * 86400.0);             // per year of 365.25 days; no MPI
///   }
/// @endcode

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gridshard/metrics/time_mean.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {

/// What a TrendAccumulator sums per point: the values and the products t y (`slopes`: the slopes and the weighted
/// sums), or the products alone (`weighted_sums`: a regression on a weight given as t, two thirds of the memory and
/// of the work).
enum class TrendSums { slopes, weighted_sums };

/// Per point of a rank's box and channel: the sum of the values, and of each product t y split exactly into its
/// rounded part and its remainder, each in a TimeMeanAccumulator (exact while a point's terms span less than about
/// 2^(80 - log2 n)); the sums of the times and of their squares in ExactSums. 72 bytes per point (48 with
/// TrendSums::weighted_sums). Keeps a copy of `grid` (sharing its mesh).
class TrendAccumulator {
  public:
    /// No MPI calls.
    TrendAccumulator(const ShardedGrid& grid, std::int64_t channels, TrendSums sums = TrendSums::slopes);

    /// Adds `fields` (one or more fields of channels x this rank's box, field slowest: the members of a forecast),
    /// every one at time `t`. Their sum enters at once, as the exact double-double sum of the fields: one pass over
    /// the fields and the sums whatever the number of fields. No MPI calls; throws ArgumentError for a size that does
    /// not fit or a time that is not finite.
    template <class T>
    void add(double t, std::span<const T> fields);

    /// Collective over `data`: the three sums' gathers (TimeMeanAccumulator::merge_over_data) and one exact
    /// allreduce of the times' sums; afterwards every data rank holds the sums over every time.
    void merge_over_data();

    /// The values added (over every data rank after merge_over_data()).
    [[nodiscard]] std::int64_t count() const noexcept { return products_.steps(); }

    /// Per point the slope (n Sty - St Sy) / (n Stt - St^2) times `time_unit` (a slope per that many units of t).
    /// The denominator is exact and rounded once; the numerator is formed in double-double from the exact sums in
    /// their one canonical form (two_sum of each sum's halves), so the slope is a function of the exact sums alone
    /// and right to about 2^-104 of the numerator's larger term before rounding. NaN at a point where a value was
    /// not finite, and everywhere with fewer than two distinct times. No MPI calls; throws std::logic_error for an
    /// accumulator of TrendSums::weighted_sums (it has no sums of the values).
    [[nodiscard]] std::vector<double> slopes(double time_unit) const;

    /// Per point the exact sum of t y over every value added, rounded once (the sum of the products in double-double
    /// from the two exact sums, as slopes() forms it): the regression of the values on a weight given as t. NaN at a
    /// point where a value was not finite. No MPI calls.
    [[nodiscard]] std::vector<double> weighted_sums() const;

  private:
    // A point's exact sums in their canonical double-double form: of the values, and of t y (the products' rounded
    // parts and remainders together); none where a value was not finite.
    struct PointSums {
        DoubleDouble values, products;
    };
    [[nodiscard]] std::optional<PointSums> point_sums(std::size_t k) const;

    std::optional<TimeMeanAccumulator> values_;  // none with TrendSums::weighted_sums
    TimeMeanAccumulator products_, remainders_;
    ExactSum times_{}, squares_{};
};

}  // namespace gridshard
