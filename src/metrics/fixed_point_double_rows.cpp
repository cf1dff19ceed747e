// The fixed-point path of the term engine's double rows (fixed_point_rows.hpp). A double's value, square or product
// carries 53 significant bits, so each term takes two digits (fixed_point_add), and a square, which the per-row path
// sums as its rounding and the rounding's error, takes two terms.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "../core/kernel_dispatch.hpp"
#include "fixed_point_rows.hpp"

namespace gridshard::detail {
namespace {

constexpr std::uint64_t infinity_bits = std::bit_cast<std::uint64_t>(std::numeric_limits<double>::infinity());

// A double row pair's count of valid points, the largest magnitude among them, a lower bound of the non-zero
// magnitudes (bit patterns), and, with `differences`, the largest and smallest non-zero magnitude of the valid points'
// differences `y - x` (rounded, as the per-row path forms them).
struct DoubleRowRange {
    std::int64_t valid = 0;
    std::uint64_t largest = 0;
    std::uint64_t smallest = 0;  // 0 when every value is zero
    std::uint64_t largest_difference = 0;
    std::uint64_t smallest_difference = 0;  // 0 when every difference is zero
};

// The range of one block of at most 2^31 points: integer max and min of the bit patterns, so that the loop
// vectorises. The smallest non-zero magnitude is taken over every value, as the float rows' (a NaN's or an infinity's
// pattern is never the smallest, and a valid partner of an invalid value only lowers the bound).
template <ValidityPolicy policy, bool pair, bool differences>
GRIDSHARD_KERNEL DoubleRowRange double_block_range(const double* x, const double* y, std::int64_t n) noexcept {
    constexpr std::uint64_t magnitude_mask = 0x7fffffffffffffffU;
    constexpr std::uint64_t none = ~std::uint64_t{0};  // bits - 1 wraps zero to the largest pattern: zeros skipped
    std::uint64_t largest = 0;
    std::uint64_t smallest_less_one = none;
    std::uint64_t largest_difference = 0;
    std::uint64_t smallest_difference_less_one = none;
    std::uint64_t valid = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double xv = x[j];
        const double yv = pair ? y[j] : 0.0;
        const bool ok = counts_both<policy>(xv, yv);
        const std::uint64_t ok_mask = 0U - static_cast<std::uint64_t>(ok);
        const std::uint64_t xb = std::bit_cast<std::uint64_t>(xv) & magnitude_mask;
        const std::uint64_t yb = std::bit_cast<std::uint64_t>(yv) & magnitude_mask;
        largest = std::max(largest, std::max(xb, yb) & ok_mask);
        smallest_less_one = std::min(smallest_less_one, std::min(xb - 1U, yb - 1U));
        if constexpr (differences) {
            const std::uint64_t db = std::bit_cast<std::uint64_t>(yv - xv) & magnitude_mask & ok_mask;
            largest_difference = std::max(largest_difference, db);
            smallest_difference_less_one = std::min(smallest_difference_less_one, db - 1U);
        }
        valid += static_cast<std::uint64_t>(ok);
    }
    return {static_cast<std::int64_t>(valid), largest, smallest_less_one + 1U, largest_difference,
            smallest_difference_less_one + 1U};
}

template <ValidityPolicy policy, bool differences>
DoubleRowRange double_row_range(const double* x, const double* y, std::int64_t n) noexcept {
    DoubleRowRange row;
    for (std::int64_t start = 0; start < n; start += fixed_point_block) {
        const std::int64_t length = std::min(fixed_point_block, n - start);
        const DoubleRowRange block = y != nullptr
                                         ? double_block_range<policy, true, differences>(x + start, y + start, length)
                                         : double_block_range<policy, false, false>(x + start, y, length);
        row.valid += block.valid;
        row.largest = std::max(row.largest, block.largest);
        row.smallest = std::min(row.smallest - 1U, block.smallest - 1U) + 1U;  // zero stands for none
        row.largest_difference = std::max(row.largest_difference, block.largest_difference);
        row.smallest_difference = std::min(row.smallest_difference - 1U, block.smallest_difference - 1U) + 1U;
    }
    return row;
}

// The grids of a double row's terms: its values, the roundings of its squares and products, the roundings' errors,
// and the squares of its differences. Each takes two digits.
struct DoubleRowGrids {
    FixedPointGrid values;
    FixedPointGrid products;
    FixedPointGrid product_errors;
    FixedPointGrid differences;
};

// The two-digit grid 2^lowest_bit (subnormals' 2^-1074 at the least) of terms below 2^top, if it holds them.
std::optional<FixedPointGrid> two_digit_grid(int lowest_bit, int top) noexcept {
    lowest_bit = std::max(lowest_bit, -1074);
    if (!fixed_point_grid_fits(lowest_bit, top)) {
        return std::nullopt;
    }
    return FixedPointGrid{lowest_bit, false};
}

// With the row's non-zero magnitudes in [2^a, 2^b), every value is a multiple of 2^(a - 52) below 2^b. A rounded
// square or product is at least 2^2a, so a multiple of 2^(2a - 52), and at most 2^2b; its error, exact, is a multiple
// of 2^(2a - 104) (of 2^-1074 where it is subnormal) below half the product's last place, 2^(2b - 53). With the
// differences' non-zero magnitudes in [2^p, 2^q), a rounded square of one is a multiple of 2^(2p - 52) not above
// 2^2q. So the values fit while b - a <= 51, the squares and products while b - a <= 25, the differences' squares
// while q - p <= 25; past that, or with an infinity, nullopt.
std::optional<DoubleRowGrids> double_row_grids(const DoubleRowRange& range, bool moments) noexcept {
    if (range.largest >= infinity_bits) {
        return std::nullopt;
    }
    if (range.largest == 0) {
        return DoubleRowGrids{};  // every term is zero
    }
    const int b = std::ilogb(std::bit_cast<double>(range.largest)) + 1;
    const int a = std::ilogb(std::bit_cast<double>(range.smallest));
    const std::optional<FixedPointGrid> values = two_digit_grid(a - 52, b);
    if (!values || !moments) {
        return values ? std::optional<DoubleRowGrids>(DoubleRowGrids{*values, *values, *values, *values})
                      : std::nullopt;
    }
    const std::optional<FixedPointGrid> products = two_digit_grid(2 * a - 52, 2 * b + 1);
    const std::optional<FixedPointGrid> errors = two_digit_grid(2 * a - 104, 2 * b - 52);
    std::optional<FixedPointGrid> differences = values;  // every difference zero: any grid holds its zeros
    if (range.largest_difference >= infinity_bits) {
        return std::nullopt;
    }
    if (range.largest_difference != 0) {
        const int q = std::ilogb(std::bit_cast<double>(range.largest_difference)) + 1;
        const int p = std::ilogb(std::bit_cast<double>(range.smallest_difference));
        differences = two_digit_grid(2 * p - 52, 2 * q + 1);
    }
    if (!products || !errors || !differences) {
        return std::nullopt;
    }
    return DoubleRowGrids{*values, *products, *errors, *differences};
}

// The digits of a block's terms, two a term, in this order.
enum DoubleTerm : std::size_t {
    x_value,
    y_value,
    x_square,
    x_square_error,
    y_square,
    y_square_error,
    difference_square,
    cross,
    double_terms
};

// The digit sums (high, low) of one block's terms in DoubleTerm order, on the grids whose anchors `anchors` holds
// (values, products, product errors, differences): y's terms only with `pair`, the squares and products only with
// `moments`. Each term is the per-row path's expression on the masked values (exact_products.cpp): the square's
// rounding and its error, the rounded square of the rounded difference, the rounded product.
template <ValidityPolicy policy, bool pair, bool moments>
GRIDSHARD_KERNEL void double_fixed_point_terms(const double* x, const double* y, std::int64_t n, const double* anchors,
                                               std::uint64_t* __restrict digits) noexcept {
    const double value_anchor = anchors[0];
    const double product_anchor = anchors[1];
    const double error_anchor = anchors[2];
    const double difference_anchor = anchors[3];
    std::uint64_t xh = 0, xl = 0, yh = 0, yl = 0, xxh = 0, xxl = 0, xeh = 0, xel = 0, yyh = 0, yyl = 0, yeh = 0,
                  yel = 0, ddh = 0, ddl = 0, xyh = 0, xyl = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double xv = x[j];
        const double yv = pair ? y[j] : 0.0;
        const bool ok = counts_both<policy>(xv, yv);
        const double xm = ok ? xv : 0.0;
        const double ym = ok ? yv : 0.0;
        fixed_point_add(xm, value_anchor, xh, xl);
        if constexpr (pair) {
            fixed_point_add(ym, value_anchor, yh, yl);
        }
        if constexpr (moments) {
            const double xx = xm * xm;
            fixed_point_add(xx, product_anchor, xxh, xxl);
            fixed_point_add(std::fma(xm, xm, -xx), error_anchor, xeh, xel);  // exact: the grids hold xx, finite
            if constexpr (pair) {
                const double yy = ym * ym;
                fixed_point_add(yy, product_anchor, yyh, yyl);
                fixed_point_add(std::fma(ym, ym, -yy), error_anchor, yeh, yel);
                const double d = ym - xm;
                fixed_point_add(d * d, difference_anchor, ddh, ddl);
                fixed_point_add(xm * ym, product_anchor, xyh, xyl);
            }
        }
    }
    const std::uint64_t all[] = {xh, xl, yh, yl, xxh, xxl, xeh, xel, yyh, yyl, yeh, yel, ddh, ddl, xyh, xyl};
    std::copy(std::begin(all), std::end(all), digits);
}

template <ValidityPolicy policy>
void double_fixed_point_terms_of(const double* x, const double* y, std::int64_t n, bool moments, const double* anchors,
                                 std::uint64_t* digits) noexcept {
    if (y == nullptr) {
        moments ? double_fixed_point_terms<policy, false, true>(x, y, n, anchors, digits)
                : double_fixed_point_terms<policy, false, false>(x, y, n, anchors, digits);
    } else {
        moments ? double_fixed_point_terms<policy, true, true>(x, y, n, anchors, digits)
                : double_fixed_point_terms<policy, true, false>(x, y, n, anchors, digits);
    }
}

template <ValidityPolicy policy>
bool add_double_row_of(PartialSums& sums, const double* x, const double* y, std::int64_t n, double factor,
                       const FixedPointSlots& slots) {
    const bool moments = slots.moments();
    const DoubleRowRange range =
        moments && y != nullptr ? double_row_range<policy, true>(x, y, n) : double_row_range<policy, false>(x, y, n);
    const std::optional<DoubleRowGrids> grids = double_row_grids(range, moments);
    const DoubleRowGrids on = grids.value_or(DoubleRowGrids{});
    const std::array<double, 4> anchors{on.values.anchor(), on.products.anchor(), on.product_errors.anchor(),
                                        on.differences.anchor()};
    // Per FixedPointSlots sum (truth, prediction, truth_square, prediction_square, difference_square, cross): its
    // terms and their grids (a square's second term, its rounding's error, none for the others).
    struct Source {
        DoubleTerm term;
        const FixedPointGrid* grid;
        DoubleTerm error_term;
    };
    const std::array<Source, 6> sources{Source{x_value, &on.values, double_terms},
                                        Source{y_value, &on.values, double_terms},
                                        Source{x_square, &on.products, x_square_error},
                                        Source{y_square, &on.products, y_square_error},
                                        Source{difference_square, &on.differences, double_terms},
                                        Source{cross, &on.products, double_terms}};
    std::array<std::uint64_t, 2 * double_terms> digits{};
    return add_fixed_point_blocks(
        sums, n, factor, slots, y != nullptr, range, grids, [&](std::int64_t start, std::int64_t length) {
            double_fixed_point_terms_of<policy>(x + start, y != nullptr ? y + start : nullptr, length, moments,
                                                anchors.data(), digits.data());
            for (std::size_t k = 0; k < slots.sums.size(); ++k) {
                if (slots.sums[k] < 0) {
                    continue;
                }
                const Source& source = sources[k];
                sums.add_fixed_point(slots.sums[k], factor, *source.grid, digits[2 * source.term],
                                     digits[2 * source.term + 1], length);
                if (source.error_term != double_terms) {
                    sums.add_fixed_point(slots.sums[k], factor, on.product_errors, digits[2 * source.error_term],
                                         digits[2 * source.error_term + 1], length);
                }
            }
            return digits.data();
        });
}

}  // namespace

bool add_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const double* x, const double* y, std::int64_t n,
                         double factor, const FixedPointSlots& slots) {
    return with_policy(policy, [&](auto p) { return add_double_row_of<p.value>(sums, x, y, n, factor, slots); });
}

std::optional<FixedPointRowSum> fixed_point_row_sum(const double* x, std::int64_t n) {
    constexpr ValidityPolicy policy = ValidityPolicy::skip_nan;
    if (n > fixed_point_block) {
        return std::nullopt;
    }
    const DoubleRowRange range = double_row_range<policy, false>(x, nullptr, n);
    const std::optional<DoubleRowGrids> grids = double_row_grids(range, false);
    if (!grids) {
        return std::nullopt;
    }
    FixedPointRowSum sum{range.valid, grids->values, 0, 0, 0};
    if (range.largest == 0) {
        return sum;  // every value is zero
    }
    const std::array<double, 4> anchors{grids->values.anchor(), 0.0, 0.0, 0.0};
    std::array<std::uint64_t, 2 * double_terms> digits{};
    double_fixed_point_terms_of<policy>(x, nullptr, n, false, anchors.data(), digits.data());
    sum.high = digits[2 * x_value];
    sum.low = digits[2 * x_value + 1];
    sum.terms = n;
    return sum;
}

}  // namespace gridshard::detail
