// Exact per-point sums of squares (each square as its two-product) into TimeMeanAccumulator's running sums, with the
// least and greatest errors: ACE's extended video's sums in one pass over the fields.

#include "gridshard/metrics/square_sums.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"
#include "field_sums.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

using Sums = TimeMeanAccumulator::RunningSums;

/// `x` squared into one point's running sums (`sum`, `error`, `special` at that point): its rounded square and, where
/// that is finite, its remainder (fma).
inline void add_square(double x, double& sum, double& error, double& special) noexcept {
    const double hi = x * x;
    const double lo = std::fma(x, x, -hi);
    detail::accumulate(hi, sum, error, special);
    detail::accumulate((hi - hi) == 0.0 ? lo : 0.0, sum, error, special);
}

/// Points [begin, begin + n) of one member against the truth. Every array its own (restrict), and the loop free of
/// branches, so that it vectorises over the points; each point's arithmetic is the same whatever the vector width.
template <class T>
GRIDSHARD_KERNEL void error_squares(const T* __restrict truth, const T* __restrict member, std::int64_t begin,
                                    std::int64_t n, double* __restrict error_sum, double* __restrict error_error,
                                    double* __restrict error_special, double* __restrict square_sum,
                                    double* __restrict square_error, double* __restrict square_special,
                                    double* __restrict least, double* __restrict greatest) noexcept {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::int64_t p = begin; p < begin + n; ++p) {
        const auto x = static_cast<double>(member[p]);
        const double e = x - static_cast<double>(truth[p]);
        add_square(e, error_sum[p], error_error[p], error_special[p]);
        add_square(x, square_sum[p], square_error[p], square_special[p]);
        const bool missing = std::isunordered(e, least[p]);  // either NaN, without a branch
        const double low = e < least[p] ? e : least[p];
        const double high = e > greatest[p] ? e : greatest[p];
        least[p] = missing ? nan : low;
        greatest[p] = missing ? nan : high;
    }
}

template <class T>
GRIDSHARD_KERNEL void squares_of(const T* __restrict values, std::int64_t begin, std::int64_t n, double* __restrict sum,
                                 double* __restrict error, double* __restrict special) noexcept {
    for (std::int64_t p = begin; p < begin + n; ++p) {
        add_square(static_cast<double>(values[p]), sum[p], error[p], special[p]);
    }
}

void check_points(std::size_t given, std::size_t points, const char* what) {
    if (given != points) {
        throw ArgumentError(std::string(what) + ": " + std::to_string(given) + " values for " + std::to_string(points) +
                            " points");
    }
}

}  // namespace

template <class T>
void add_error_squares(std::span<const T> truth, std::span<const T> members, TimeMeanAccumulator& squared_errors,
                       TimeMeanAccumulator& squares, std::span<double> least, std::span<double> greatest) {
    const std::size_t points = squared_errors.points();
    check_points(truth.size(), points, "add_error_squares: the truth");
    check_points(squares.points(), points, "add_error_squares: the squares' sums");
    check_points(least.size(), points, "add_error_squares: the least errors");
    check_points(greatest.size(), points, "add_error_squares: the greatest errors");
    if (points == 0 ? !members.empty() : members.size() % points != 0) {
        throw ArgumentError("add_error_squares: " + std::to_string(members.size()) +
                            " member values are not whole fields of " + std::to_string(points) + " points");
    }
    const auto count = static_cast<std::int64_t>(points == 0 ? 0 : members.size() / points);
    const Sums errors = squared_errors.running_sums();
    const Sums member_squares = squares.running_sums();
    detail::for_each_block(static_cast<std::int64_t>(points), 4 * count, [&](std::int64_t begin, std::int64_t n) {
        for (std::int64_t m = 0; m < count; ++m) {  // the block's sums stay in cache over the members
            error_squares<T>(truth.data(), members.data() + m * static_cast<std::int64_t>(points), begin, n, errors.sum,
                             errors.error, errors.special, member_squares.sum, member_squares.error,
                             member_squares.special, least.data(), greatest.data());
        }
    });
    squared_errors.count_steps(count);
    squares.count_steps(count);
}

template <class T>
void add_squares(std::span<const T> values, TimeMeanAccumulator& squares) {
    check_points(values.size(), squares.points(), "add_squares");
    const Sums sums = squares.running_sums();
    detail::for_each_block(static_cast<std::int64_t>(values.size()), 2, [&](std::int64_t begin, std::int64_t n) {
        squares_of<T>(values.data(), begin, n, sums.sum, sums.error, sums.special);
    });
    squares.count_steps(1);
}

template void add_error_squares<float>(std::span<const float>, std::span<const float>, TimeMeanAccumulator&,
                                       TimeMeanAccumulator&, std::span<double>, std::span<double>);
template void add_error_squares<double>(std::span<const double>, std::span<const double>, TimeMeanAccumulator&,
                                        TimeMeanAccumulator&, std::span<double>, std::span<double>);
template void add_squares<float>(std::span<const float>, TimeMeanAccumulator&);
template void add_squares<double>(std::span<const double>, TimeMeanAccumulator&);

}  // namespace gridshard
