#pragma once
/// @file
/// ACE's dynamic histogram (fme 2026.10.0, fme.core.histogram.DynamicHistogram) as plain numerics: bins of one width
/// over edges set from the first window's range and doubled to the left or right when a later window's range falls
/// outside, the counts merged pairwise at each doubling; and ACE's percentile of a histogram
/// (fme.core.metrics.quantile). The arithmetic is ACE's to the bit: the range padded by ACE's epsilon in the values'
/// own type, numpy's linspace for the edges, the bin of a value `trunc((x - edge0) / width)` in the values' type
/// (torch's float32 arithmetic for float data), a value past the last edge in the last bin. Counts are integers, so
/// histograms of the same edges merge exactly in any order: the aggregator agrees each window's range over the ranks,
/// bins its own values and sums the counts once (evaluation/aggregator.hpp). No MPI calls here.
///
/// @code
///   // The 99.9999th percentile of one window of values, as ACE's histogram aggregator gives it.
///   double tail(std::span<const float> values) {
///       gridshard::DynamicHistogram histogram(200);
///       const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
///       histogram.take_range(gridshard::histogram_lower_bound(*lo), gridshard::histogram_upper_bound(*hi));
///       std::vector<std::int64_t> counts(200, 0);
///       for (const float x : values) {
///           ++counts[histogram.bin_of(x)];
///       }
///       histogram.add_counts(counts);
///       return gridshard::histogram_quantile(histogram.edges(), histogram.counts(), 99.9999 / 100.0);
///   }
/// @endcode

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gridshard {

/// ACE's EPSILON: a window's range is padded by it on each side (in the values' type), so that no value sits on an
/// outer edge and a constant window has a range.
inline constexpr double histogram_epsilon = 1.0e-6;

/// The lower end of a window whose smallest value is `min`: `min - epsilon` in T (ACE's torch arithmetic), widened.
template <class T>
[[nodiscard]] double histogram_lower_bound(T min) noexcept {
    return static_cast<double>(static_cast<T>(min - static_cast<T>(histogram_epsilon)));
}
/// The upper end of a window whose largest value is `max`: `max + epsilon` in T, widened.
template <class T>
[[nodiscard]] double histogram_upper_bound(T max) noexcept {
    return static_cast<double>(static_cast<T>(max + static_cast<T>(histogram_epsilon)));
}

/// numpy's linspace(start, stop, num) with its endpoint, bit for bit: `i * step + start`, the last value `stop`.
[[nodiscard]] std::vector<double> numpy_linspace(double start, double stop, std::int64_t num);

/// One of ACE's dynamic histograms: `bins` bins (even) over edges that only grow, and their counts.
class DynamicHistogram {
  public:
    explicit DynamicHistogram(std::int64_t bins = 200);

    [[nodiscard]] bool has_edges() const noexcept { return !edges_.empty(); }
    [[nodiscard]] std::int64_t bins() const noexcept { return bins_; }
    [[nodiscard]] const std::vector<double>& edges() const noexcept { return edges_; }
    [[nodiscard]] const std::vector<std::int64_t>& counts() const noexcept { return counts_; }

    /// ACE's response to a window spanning [lower, upper] (histogram_lower_bound and _upper_bound of its values): the
    /// first window sets the edges (linspace), a later one doubles the bins to the left while `lower` is below the
    /// first edge, then to the right while `upper` is above the last, merging the counts pairwise. Returns whether
    /// the edges changed. Both must be finite.
    bool take_range(double lower, double upper);

    /// The bin of `x` under the current edges, in ACE's arithmetic: `trunc((x - T(edge0)) / T(width))` in T, a value
    /// at or past the last bin in the last, one below the first edge (which take_range rules out) in the first.
    template <class T>
    [[nodiscard]] std::size_t bin_of(T x) const noexcept {
        const T position = (x - static_cast<T>(edges_.front())) / static_cast<T>(edges_[1] - edges_.front());
        if (!(position >= T(0))) {
            return 0;
        }
        const auto last = static_cast<std::size_t>(bins_ - 1);
        return position >= static_cast<T>(bins_) ? last : std::min(static_cast<std::size_t>(position), last);
    }

    /// Adds `counts` (one per bin, under the current edges) to the histogram's.
    void add_counts(std::span<const std::int64_t> counts);
    /// Multiplies every count by `factor` (ACE's target histogram counts each initial condition's truth once per
    /// member).
    void scale_counts(std::int64_t factor);

  private:
    void double_bins(bool to_the_left);

    std::int64_t bins_;
    std::vector<double> edges_;
    std::vector<std::int64_t> counts_;
};

/// ACE's percentile of a histogram (fme.core.metrics.quantile): the value at `probability` (0 to 1) of the linearly
/// interpolated cumulative counts; NaN for a histogram without counts.
[[nodiscard]] double histogram_quantile(std::span<const double> edges, std::span<const std::int64_t> counts,
                                        double probability);

}  // namespace gridshard
