#pragma once
// The fixed-point path (numerics/fixed_point.hpp) of the term engine's rows with a row weight in exact mode: the range
// of the row's masked values proves one grid for each kind of term, and one pass forms every term and adds it to its
// digit sums; a row whose range the grids cannot hold (NaN, infinities, or non-zero magnitudes too far apart) takes
// the per-row path (term_engine.cpp, exact_products.hpp). Both paths are exact, so the bits do not depend on which
// one a row took. Float rows: fixed_point_rows.cpp; double rows: fixed_point_double_rows.cpp. Internal to the
// metrics layer; no MPI calls.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "gridshard/metrics/field.hpp"
#include "partial_sums.hpp"
#include "term_rows.hpp"

namespace gridshard::detail {

/// A float row pair's count of valid points, the largest magnitude among them and among their differences
/// `y - x` (rounded to float, which keeps it a bound: 2^k is a float), and a lower bound of their non-zero
/// magnitudes (bit patterns).
struct FloatRowRange {
    std::int64_t valid = 0;
    std::uint32_t largest = 0;
    std::uint32_t largest_difference = 0;
    std::uint32_t smallest = 0;  // 0 when every value is zero
};

/// The range of the float row `x` (and `y`, unless null) of `n` points under `policy`.
[[nodiscard]] FloatRowRange float_row_range(ValidityPolicy policy, const float* x, const float* y,
                                            std::int64_t n) noexcept;

/// One row's valid values (NaN skipped) as the fixed-point path sums them: their count, and their sum as the biased
/// digit sums of one block on a grid the row's range proves, which `grid.deposit` adds to an ExactSum exactly (`terms`
/// is 0 when every value is zero: nothing to deposit). The zonal means keep these per row and merge them over
/// longitude themselves (zonal_metrics.cpp).
struct FixedPointRowSum {
    std::int64_t count = 0;
    FixedPointGrid grid;
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    std::int64_t terms = 0;
};

/// The FixedPointRowSum of a pair's truth row and prediction row, as the scores' pass hands them to the zonal means
/// (`formed`: the pass summed the pair on the fixed-point path in one block with every point valid, so the sums are
/// those of each row's own valid values as well).
struct RowValueSums {
    FixedPointRowSum truth;
    FixedPointRowSum prediction;
    bool formed = false;
};

/// The slots of a fixed-point row's terms, -1 where not requested: the valid weight, then the six sums in the
/// order truth, prediction, truth_square, prediction_square, difference_square, cross. With `row_sums`, a pair's
/// row of one block whose points are all valid also hands its value sums over there (RowValueSums).
struct FixedPointSlots {
    std::int64_t weight = -1;
    std::array<std::int64_t, 6> sums{-1, -1, -1, -1, -1, -1};
    RowValueSums* row_sums = nullptr;
    [[nodiscard]] bool moments() const noexcept { return sums[2] >= 0 || sums[3] >= 0 || sums[4] >= 0 || sums[5] >= 0; }
};

/// Hands a pair's row value sums over to `slots.row_sums`, when it is set, the row is one block (`n` points) and
/// every point counted: the count `n` and, on `grid`, the truth's digits (high, low) then the prediction's in
/// `digits`, null when every value is zero.
inline void hand_over_row_sums(const FixedPointSlots& slots, std::int64_t n, std::int64_t valid,
                               const FixedPointGrid& grid, const std::uint64_t* digits) noexcept {
    if (slots.row_sums == nullptr || valid != n || n > fixed_point_block) {
        return;
    }
    const auto sum = [&](std::size_t first) {
        return digits == nullptr ? FixedPointRowSum{n, grid, 0, 0, 0}
                                 : FixedPointRowSum{n, grid, digits[first], digits[first + 1], n};
    };
    *slots.row_sums = {sum(0), sum(2), true};
}

/// The steps of every fixed-point row once its range and grids are known (float rows and double rows alike): false
/// without grids; else the count of its valid points into `slots.weight`, then each block's terms by
/// `add_block(start, length)`, which forms and deposits them and returns the block's digits (the truth's high and
/// low, then the prediction's, first), the pair's value sums handed over (hand_over_row_sums). `Range` has `valid`
/// and `largest` (0 when every value is zero: nothing to form), `Grids` has `values`.
template <class Range, class Grids, class AddBlock>
bool add_fixed_point_blocks(PartialSums& sums, std::int64_t n, double factor, const FixedPointSlots& slots, bool pair,
                            const Range& range, const std::optional<Grids>& grids, AddBlock add_block) {
    if (!grids) {
        return false;
    }
    if (slots.weight >= 0) {
        sums.add_count(slots.weight, factor, range.valid);
    }
    if (range.largest == 0) {  // every term is zero
        if (pair) {
            hand_over_row_sums(slots, n, range.valid, grids->values, nullptr);
        }
        return true;
    }
    for (std::int64_t start = 0; start < n; start += fixed_point_block) {
        const std::int64_t length = std::min(fixed_point_block, n - start);
        const std::uint64_t* digits = add_block(start, length);
        if (pair && length == n) {
            hand_over_row_sums(slots, n, range.valid, grids->values, digits);
        }
    }
    return true;
}

/// Adds the requested terms of the float row x (and y, unless null) of weight `factor` through the fixed-point
/// path; returns false, adding nothing, when the row's range needs the per-row path.
bool add_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const float* x, const float* y, std::int64_t n,
                         double factor, const FixedPointSlots& slots);
/// The same for a double row: its terms are the per-row path's (exact_products.hpp), each summed exactly: the values,
/// each square as its rounding and the rounding's error (`fma`), the rounded squares of the rounded differences and
/// the rounded products. False, adding nothing, when the row holds an infinity (or NaN under propagate), or its
/// non-zero magnitudes (or its differences') span more binades than the grids hold: 51 for the values, 25 with the
/// squares and products.
bool add_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const double* x, const double* y, std::int64_t n,
                         double factor, const FixedPointSlots& slots);

/// The FixedPointRowSum of the float row `x` of `n` points, NaN skipped (the terms add_fixed_point_row forms for the
/// request {weight, truth} under skip_nan), or nullopt when the row needs the per-row path or is longer than one
/// block (fixed_point_block). No MPI calls.
[[nodiscard]] std::optional<FixedPointRowSum> fixed_point_row_sum(const float* x, std::int64_t n);
/// The same of a double row: its values on two digits of the grid of its smallest non-zero magnitude's last bit, or
/// nullopt when the row holds an infinity, its non-zero magnitudes span more than 51 binades (the grid's span), or it
/// is longer than one block. No MPI calls.
[[nodiscard]] std::optional<FixedPointRowSum> fixed_point_row_sum(const double* x, std::int64_t n);

/// The fixed-point path of a row when it applies (a row weight, exact sums); false otherwise, or when the row's
/// range needs the per-row path.
template <class V>
bool try_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const V* x, const V* y, const Row<V>& row,
                         const FixedPointSlots& slots) {
    if (!sums.exact_mode() || row.point_weights != nullptr) {
        return false;
    }
    return add_fixed_point_row(policy, sums, x, y, row.cols, row.factor, slots);
}

}  // namespace gridshard::detail
