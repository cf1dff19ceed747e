#pragma once
/// @file
/// Exact fixed-point accumulation on a grid chosen per block: the fast path of the exact sums
/// (docs/design.md §5). No MPI calls.
///
/// ## Algorithm
/// A grid is a power of two `2^lowest_bit`. A term `v` fits the grid when it is a multiple of
/// `2^lowest_bit` and `|v| < 2^(lowest_bit + fixed_point_span)`. The grid's anchor is `A = 1.5 * 2^(lowest_bit + 52)`,
/// whose binade has the spacing `2^lowest_bit`: for a multiple `v` of the grid with `|v| < 2^(lowest_bit + 51)`,
/// `v + A` is exact and `bits(v + A) - bits(A)` is `v / 2^lowest_bit` (the float-to-integer trick, with the scaling
/// folded into the anchor: one addition). A term of the whole span splits exactly into two digits: `high`, `v`
/// rounded to the grid `2^(lowest_bit + 52)` by the same trick with the anchor `A * 2^52`, and `low`, the remainder
/// `v - high` (exact, at most `2^(lowest_bit + 51)`), on the anchor `A`. Each digit is summed as the bit pattern of
/// its biased double in a 64-bit integer: four vector operations and two integer additions per term, no branch, and
/// integer addition is associative, so the digits' sums are the same whatever the order, the vector width or the
/// thread count. Up to `fixed_point_block` terms fit a pair of 64-bit digit sums without overflow;
/// `add_fixed_point` then adds `factor` times their exact value to an ExactSum, exactly.
///
/// Terms that are integer multiples of the grid below `2^(lowest_bit + 51)` (a float value on the grid of its
/// row's smallest magnitude) need one digit: `fixed_point_add_whole`, one addition and an integer addition.
///
/// ## The check
/// The caller proves that every term of a block fits the grid: before it accumulates, from the exponent range of
/// the inputs the terms are formed from (the term engine's point terms; see `fixed_point_grid_fits`), or after,
/// from the range of the terms it measured while accumulating on a guessed grid, discarding the digits when the
/// guess does not hold (the term engine's fused gradient pass). A block that does not fit, or that holds NaN or
/// infinities, goes down the per-block path of `add_exact_sum`. Since both paths are exact, the sum, and every
/// rounding of it, is the same bits whichever path a block took.

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>

#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {

/// How many powers of two above its grid a term may reach (`|v| < 2^(lowest_bit + fixed_point_span)`).
inline constexpr int fixed_point_span = 103;
/// The most terms one pair of digit sums holds: 2^11 digits of at most 2^51 each stay below 2^63.
inline constexpr std::int64_t fixed_point_block = 2048;

/// The anchor of the grid `2^lowest_bit` (see the file comment), which terms on that grid are added to.
/// `lowest_bit` must lie in [-1074, 909], so that this anchor is normal and a full block's digits on the grid
/// `2^(lowest_bit + 52)` stay finite (fixed_point_grid_fits); every grid of float terms does.
[[nodiscard]] inline double fixed_point_anchor(int lowest_bit) noexcept {
    return std::ldexp(1.5, lowest_bit + 52);
}

/// Adds the term `value` (which fits the grid whose anchor is `anchor`) to the biased digit sums.
/// Inline and branch-free, for the vectorised loops that form terms.
inline void fixed_point_add(double value, double anchor, std::uint64_t& high, std::uint64_t& low) noexcept {
    const double high_anchor = anchor * 0x1p52;                // exact; hoisted out of a loop
    const double rounded = value + high_anchor;                // value rounded to 2^(lowest_bit + 52), biased
    const double remainder = value - (rounded - high_anchor);  // exact, |remainder| <= 2^(lowest_bit + 51)
    high += std::bit_cast<std::uint64_t>(rounded);
    low += std::bit_cast<std::uint64_t>(remainder + anchor);  // an exact integer of the grid, biased
}

/// Adds the term `value`, an integer multiple of the grid `2^lowest_bit` below `2^(lowest_bit + 51)`, to one biased
/// digit sum; `anchor` is `fixed_point_anchor(lowest_bit)` (the one-digit form: one addition and an integer
/// addition).
inline void fixed_point_add_whole(double value, double anchor, std::uint64_t& digits) noexcept {
    digits += std::bit_cast<std::uint64_t>(value + anchor);  // exact: value's integer on the anchor's binade
}

namespace detail {
/// The sum of `terms` digits' biases: each added term carries the bits of its anchor.
inline std::int64_t fixed_point_digits(std::uint64_t digits, std::int64_t terms, int lowest_bit) noexcept {
    const std::uint64_t bias =
        static_cast<std::uint64_t>(terms) * std::bit_cast<std::uint64_t>(fixed_point_anchor(lowest_bit));
    return static_cast<std::int64_t>(digits - bias);
}
}  // namespace detail

/// Adds `factor` times the exact sum of the `terms` values added by fixed_point_add_whole to `digits` on the
/// grid `2^lowest_bit` (`terms <= fixed_point_block`) to `sum_out`, exactly.
inline void add_fixed_point_whole(ExactSum& sum_out, double factor, std::uint64_t digits, std::int64_t terms,
                                  int lowest_bit) noexcept {
    sum_out.add_product(factor, detail::fixed_point_digits(digits, terms, lowest_bit), lowest_bit);
}

/// Adds `factor * sum` exactly to `sum_out`, where `sum` is the exact sum of the `terms` values added to
/// the digit sums `high` and `low` on the grid `2^lowest_bit` (`terms <= fixed_point_block`).
inline void add_fixed_point(ExactSum& sum_out, double factor, std::uint64_t high, std::uint64_t low, std::int64_t terms,
                            int lowest_bit) noexcept {
    sum_out.add_product(factor, detail::fixed_point_digits(high, terms, lowest_bit + 52), lowest_bit + 52);
    sum_out.add_product(factor, detail::fixed_point_digits(low, terms, lowest_bit), lowest_bit);
}

/// The grid of terms that are multiples of `2^lowest_bit` below `2^top`: one digit (fixed_point_add_whole) when
/// `top - lowest_bit <= 51`, else two (fixed_point_add; `top - lowest_bit <= fixed_point_span`).
struct FixedPointGrid {
    int lowest_bit = 0;
    bool one_digit = true;

    [[nodiscard]] static constexpr FixedPointGrid for_range(int lowest_bit, int top) noexcept {
        return {lowest_bit, top - lowest_bit <= 51};
    }
    /// The anchor the terms are added to (fixed_point_anchor), in either form.
    [[nodiscard]] double anchor() const noexcept { return fixed_point_anchor(lowest_bit); }
    /// Adds `factor` times the exact sum of `terms` values accumulated on this grid (`low` unused for one digit)
    /// to `sum_out`, exactly.
    void deposit(ExactSum& sum_out, double factor, std::uint64_t high, std::uint64_t low,
                 std::int64_t terms) const noexcept {
        if (one_digit) {
            add_fixed_point_whole(sum_out, factor, high, terms, lowest_bit);
        } else {
            add_fixed_point(sum_out, factor, high, low, terms, lowest_bit);
        }
    }
};

/// The exact sum of the `terms` values accumulated on `grid` (the digits FixedPointGrid::deposit takes) as a multiple
/// of `2^grid.lowest_bit`: below 2^116 in magnitude.
[[nodiscard]] inline detail::Int128 fixed_point_multiple(FixedPointGrid grid, std::uint64_t high, std::uint64_t low,
                                                         std::int64_t terms) noexcept {
    if (grid.one_digit) {
        return detail::fixed_point_digits(high, terms, grid.lowest_bit);
    }
    return detail::Int128{detail::fixed_point_digits(high, terms, grid.lowest_bit + 52)} * (detail::Int128{1} << 52) +
           detail::fixed_point_digits(low, terms, grid.lowest_bit);
}

/// `multiple * 2^lowest_bit` to 106 bits as ExactSum::to_double_double gives it (`hi` rounded to nearest, ties to even;
/// `lo` the remainder rounded), without an ExactSum, where neither part can be subnormal or overflow: |multiple| below
/// 2^120 and `lowest_bit` in [-1022, 902]. Nothing otherwise.
[[nodiscard]] inline std::optional<DoubleDouble> round_fixed_point_multiple(detail::Int128 multiple,
                                                                            int lowest_bit) noexcept {
    constexpr detail::Int128 bound = detail::Int128{1} << 120;
    if (lowest_bit < -1022 || lowest_bit > 902 || multiple >= bound || multiple <= -bound) {
        return std::nullopt;
    }
    const auto hi = static_cast<double>(multiple);  // rounded to nearest, ties to even; an integer, below 2^121
    const auto lo = static_cast<double>(multiple - static_cast<detail::Int128>(hi));
    // Each part is 0 or at least 1, so scaled by 2^lowest_bit >= 2^-1022 it stays normal, and below 2^1023: exact.
    return DoubleDouble{std::ldexp(hi, lowest_bit), std::ldexp(lo, lowest_bit)};
}

/// Whether every term on the grid `2^lowest_bit` whose magnitude is below `2^top` fits it.
[[nodiscard]] constexpr bool fixed_point_grid_fits(int lowest_bit, int top) noexcept {
    return top - lowest_bit <= fixed_point_span && lowest_bit >= -1074 && lowest_bit <= 909;
}

}  // namespace gridshard
