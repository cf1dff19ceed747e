// The fixed-point path of the term engine's float rows (fixed_point_rows.hpp).

#include "fixed_point_rows.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <optional>

#include "../core/kernel_dispatch.hpp"

namespace gridshard::detail {
namespace {

// The range of one block of at most 2^31 points. The smallest non-zero magnitude is taken over every value, the
// ones left out included (a NaN or an infinity never is the smallest, and a valid partner of an invalid value
// only lowers the bound, which stays a bound), so that the loop vectorises.
template <ValidityPolicy policy, bool pair>
GRIDSHARD_KERNEL FloatRowRange float_block_range(const float* x, const float* y, std::int64_t n) noexcept {
    constexpr std::uint32_t magnitude_mask = 0x7fffffffU;
    std::uint32_t largest = 0;
    std::uint32_t largest_difference = 0;
    std::uint32_t smallest_less_one = 0xffffffffU;  // bits - 1 wraps zero to the largest pattern: zeros skipped
    std::uint32_t valid = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const float xv = x[j];
        const float yv = pair ? y[j] : 0.0F;
        const bool ok = counts_both<policy>(xv, yv);
        const std::uint32_t ok_mask = 0U - static_cast<std::uint32_t>(ok);
        const std::uint32_t xb = std::bit_cast<std::uint32_t>(xv) & magnitude_mask;
        const std::uint32_t yb = std::bit_cast<std::uint32_t>(yv) & magnitude_mask;
        largest = std::max(largest, std::max(xb, yb) & ok_mask);
        if constexpr (pair) {
            const std::uint32_t db = std::bit_cast<std::uint32_t>(yv - xv) & magnitude_mask;
            largest_difference = std::max(largest_difference, db & ok_mask);
        }
        smallest_less_one = std::min(smallest_less_one, std::min(xb - 1U, yb - 1U));
        valid += ok ? 1U : 0U;
    }
    return {valid, largest, largest_difference, smallest_less_one + 1U};
}

template <ValidityPolicy policy>
FloatRowRange policy_row_range(const float* x, const float* y, std::int64_t n) noexcept {
    FloatRowRange row;
    for (std::int64_t start = 0; start < n; start += fixed_point_block) {
        const std::int64_t length = std::min(fixed_point_block, n - start);
        const FloatRowRange block = y != nullptr ? float_block_range<policy, true>(x + start, y + start, length)
                                                 : float_block_range<policy, false>(x + start, y, length);
        row.valid += block.valid;
        row.largest = std::max(row.largest, block.largest);
        row.largest_difference = std::max(row.largest_difference, block.largest_difference);
        row.smallest = std::min(row.smallest - 1U, block.smallest - 1U) + 1U;  // zero stands for none
    }
    return row;
}

// The grids of a float row's terms: its values, its squares and products, the squares of its differences.
struct FloatRowGrids {
    FixedPointGrid values;
    FixedPointGrid products;
    FixedPointGrid differences;
};

// With the row's non-zero magnitudes in [2^a, 2^b), every value is a multiple of 2^(a - 23) (subnormals of
// 2^-149) below 2^b, a whole multiple below 2^(b - a + 23) <= 2^50 of its grid (one digit); squares and products
// of two are exact in double, multiples of 2^(2a - 46) below 2^2b; a difference y - x is exact in double while
// b - a <= 29, below 2^d with d from the largest difference (at most b + 1), and its square, rounded, stays a
// multiple of 2^(2a - 46) not above 2^2d. Each kind takes one digit where its span allows, two otherwise; all fit
// their grids (fixed_point_span) while b - a <= 27.
std::optional<FloatRowGrids> float_row_grids(const FloatRowRange& range) noexcept {
    constexpr std::uint32_t infinity_bits = 0x7f800000U;
    constexpr int widest_range = 27;
    if (range.largest >= infinity_bits) {
        return std::nullopt;
    }
    if (range.largest == 0) {
        return FloatRowGrids{};  // every term is zero
    }
    const int b = std::ilogb(std::bit_cast<float>(range.largest)) + 1;
    const int a = std::ilogb(std::bit_cast<float>(range.smallest));
    if (b - a > widest_range) {
        return std::nullopt;
    }
    static_assert(fixed_point_grid_fits(2 * (-149 - 23), 2 * -149 + 2 * widest_range + 2));
    const int value_bit = a - 23;
    const int product_bit = 2 * value_bit;
    // A difference that overflowed float is still below 2^(b + 1) exactly.
    const int d = range.largest_difference == 0 ? value_bit
                  : range.largest_difference >= infinity_bits
                      ? b + 1
                      : std::ilogb(std::bit_cast<float>(range.largest_difference)) + 1;
    return FloatRowGrids{FixedPointGrid::for_range(value_bit, b), FixedPointGrid::for_range(product_bit, 2 * b),
                         FixedPointGrid::for_range(product_bit, 2 * d)};
}

// Adds a term on a grid of one digit (whole) or two to its digit sums.
template <bool whole>
inline void add_term(double value, double anchor, std::uint64_t& high, std::uint64_t& low) noexcept {
    if constexpr (whole) {
        fixed_point_add_whole(value, anchor, high);
    } else {
        fixed_point_add(value, anchor, high, low);
    }
}

// The digit sums (high, low) of one block's terms, in the order truth, prediction, truth_square,
// prediction_square, difference_square, cross (x for truth, y for prediction): one digit for each value (whole
// multiples of their grid below 2^50), one or two for the squares and products (`products_whole`) and the
// squared differences (`differences_whole`); the squares and products only with `moments`, y's terms only with
// `pair`. `anchors` holds the three grids' anchors. Each term is the engine's expression in double on the masked
// values, the same double the per-row path sums.
template <ValidityPolicy policy, bool pair, bool moments, bool products_whole, bool differences_whole>
GRIDSHARD_KERNEL void fixed_point_terms(const float* x, const float* y, std::int64_t n, const double* anchors,
                                        std::uint64_t* __restrict digits) noexcept {
    const double value_anchor = anchors[0];
    const double product_anchor = anchors[1];
    const double difference_anchor = anchors[2];
    std::uint64_t xh = 0, xl = 0, yh = 0, yl = 0, xxh = 0, xxl = 0, yyh = 0, yyl = 0, ddh = 0, ddl = 0, xyh = 0,
                  xyl = 0;  // the low digits of one-digit terms stay zero
    for (std::int64_t j = 0; j < n; ++j) {
        const float xv = x[j];
        const float yv = pair ? y[j] : 0.0F;
        const bool ok = counts_both<policy>(xv, yv);
        const double xm = ok ? static_cast<double>(xv) : 0.0;
        const double ym = ok ? static_cast<double>(yv) : 0.0;
        add_term<true>(xm, value_anchor, xh, xl);
        if constexpr (pair) {
            add_term<true>(ym, value_anchor, yh, yl);
        }
        if constexpr (moments) {
            add_term<products_whole>(xm * xm, product_anchor, xxh, xxl);
            if constexpr (pair) {
                add_term<products_whole>(ym * ym, product_anchor, yyh, yyl);
                add_term<differences_whole>((ym - xm) * (ym - xm), difference_anchor, ddh, ddl);
                add_term<products_whole>(xm * ym, product_anchor, xyh, xyl);
            }
        }
    }
    const std::uint64_t all[] = {xh, xl, yh, yl, xxh, xxl, yyh, yyl, ddh, ddl, xyh, xyl};
    std::copy(std::begin(all), std::end(all), digits);
}

// The instance of fixed_point_terms for a block: the values only, or with the moments on the row's grids.
template <ValidityPolicy policy>
void fixed_point_terms_of(const float* x, const float* y, std::int64_t n, bool moments, const FloatRowGrids& grids,
                          const double* anchors, std::uint64_t* digits) noexcept {
    const bool products_whole = grids.products.one_digit;
    const bool differences_whole = grids.differences.one_digit;
    if (!moments) {
        y != nullptr ? fixed_point_terms<policy, true, false, true, true>(x, y, n, anchors, digits)
                     : fixed_point_terms<policy, false, false, true, true>(x, y, n, anchors, digits);
    } else if (y == nullptr) {
        products_whole ? fixed_point_terms<policy, false, true, true, true>(x, y, n, anchors, digits)
                       : fixed_point_terms<policy, false, true, false, true>(x, y, n, anchors, digits);
    } else if (products_whole) {
        differences_whole ? fixed_point_terms<policy, true, true, true, true>(x, y, n, anchors, digits)
                          : fixed_point_terms<policy, true, true, true, false>(x, y, n, anchors, digits);
    } else {
        differences_whole ? fixed_point_terms<policy, true, true, false, true>(x, y, n, anchors, digits)
                          : fixed_point_terms<policy, true, true, false, false>(x, y, n, anchors, digits);
    }
}

// Adds the requested terms of the float row x (and y) of weight `factor` through the fixed-point path;
// returns false, adding nothing, when the row's range needs the per-row path.
template <ValidityPolicy policy>
bool add_fixed_point_row_of(PartialSums& sums, const float* x, const float* y, std::int64_t n, double factor,
                            const FixedPointSlots& slots) {
    const FloatRowRange range = policy_row_range<policy>(x, y, n);
    const std::optional<FloatRowGrids> grids = float_row_grids(range);
    const bool moments = slots.moments();
    const FloatRowGrids on = grids.value_or(FloatRowGrids{});
    const std::array<double, 3> anchors{on.values.anchor(), on.products.anchor(), on.differences.anchor()};
    const std::array<const FixedPointGrid*, 6> grid_of{&on.values,   &on.values,      &on.products,
                                                       &on.products, &on.differences, &on.products};
    std::array<std::uint64_t, 12> digits{};
    return add_fixed_point_blocks(
        sums, n, factor, slots, y != nullptr, range, grids, [&](std::int64_t start, std::int64_t length) {
            fixed_point_terms_of<policy>(x + start, y != nullptr ? y + start : nullptr, length, moments, on,
                                         anchors.data(), digits.data());
            for (std::size_t k = 0; k < slots.sums.size(); ++k) {
                if (slots.sums[k] >= 0) {
                    sums.add_fixed_point(slots.sums[k], factor, *grid_of[k], digits[2 * k], digits[2 * k + 1], length);
                }
            }
            return digits.data();
        });
}

}  // namespace

FloatRowRange float_row_range(ValidityPolicy policy, const float* x, const float* y, std::int64_t n) noexcept {
    return with_policy(policy, [&](auto p) { return policy_row_range<p.value>(x, y, n); });
}

std::optional<FixedPointRowSum> fixed_point_row_sum(const float* x, std::int64_t n) {
    constexpr ValidityPolicy policy = ValidityPolicy::skip_nan;
    if (n > fixed_point_block) {
        return std::nullopt;
    }
    const FloatRowRange range = policy_row_range<policy>(x, nullptr, n);
    const std::optional<FloatRowGrids> grids = float_row_grids(range);
    if (!grids) {
        return std::nullopt;
    }
    FixedPointRowSum sum{range.valid, grids->values, 0, 0, 0};
    if (range.largest == 0) {
        return sum;  // every term is zero
    }
    const std::array<double, 3> anchors{grids->values.anchor(), grids->products.anchor(), grids->differences.anchor()};
    std::array<std::uint64_t, 12> digits{};
    fixed_point_terms_of<policy>(x, nullptr, n, false, *grids, anchors.data(), digits.data());
    sum.high = digits[0];
    sum.low = digits[1];
    sum.terms = n;
    return sum;
}

bool add_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const float* x, const float* y, std::int64_t n,
                         double factor, const FixedPointSlots& slots) {
    return with_policy(policy, [&](auto p) { return add_fixed_point_row_of<p.value>(sums, x, y, n, factor, slots); });
}

}  // namespace gridshard::detail
