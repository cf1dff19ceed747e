#include "term_engine.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "../core/kernel_dispatch.hpp"
#include "threads.hpp"

namespace gridshard::detail {
namespace {

// Asks the memory system for `n` values at `values` ahead of their use (a hint; changes no value): the next row's,
// while the terms of this one are formed, so that its first touch (the gradient's row below) does not wait on
// memory.
template <class V>
void prefetch_row(const V* values, std::int64_t n) noexcept {
    constexpr std::int64_t per_line = 64 / static_cast<std::int64_t>(sizeof(V));
    for (std::int64_t j = 0; j < n; j += per_line) {
        __builtin_prefetch(values + j, 0, 3);
    }
}

// Whether a value counts under `policy` (before the weight is looked at).
template <ValidityPolicy policy, class V>
constexpr bool counts(V v) noexcept {
    if constexpr (policy == ValidityPolicy::propagate) {
        return true;
    } else if constexpr (policy == ValidityPolicy::skip_nan) {
        return v == v;
    } else {
        return (v - v) == V{0};  // finite
    }
}

// Whether both values count, both tests evaluated (no branch, so that rows vectorise).
template <ValidityPolicy policy, class V>
constexpr bool counts_both(V x, V y) noexcept {
    return (static_cast<unsigned>(counts<policy>(x)) & static_cast<unsigned>(counts<policy>(y))) != 0U;
}

// The scratch rows of one thread: the masked fields and gradient magnitudes in the field's type (float
// rows take the exact sum's cheaper one-digit path), the weights of the valid points, and rows for the
// term being formed (up to four: the parts of an exact square).
template <class T>
struct RowScratch {
    explicit RowScratch(std::int64_t cols)
        : truth(static_cast<std::size_t>(cols)),
          prediction(static_cast<std::size_t>(cols)),
          truth_gradient(static_cast<std::size_t>(cols)),
          prediction_gradient(static_cast<std::size_t>(cols)),
          weight(static_cast<std::size_t>(cols)),
          term(static_cast<std::size_t>(4 * cols)) {}
    std::vector<T> truth;
    std::vector<T> prediction;
    std::vector<T> truth_gradient;
    std::vector<T> prediction_gradient;
    std::vector<double> weight;
    std::vector<double> term;
    // The grid (its lowest bit) the fused gradient pass of this thread's next row tries: from the range of the
    // magnitudes of its last row, none before the first or after a range one digit cannot hold.
    std::optional<int> gradient_grid;
};

// One (channel, row) of the pass: where its values are and how it is weighted.
template <class T>
struct Row {
    const T* truth;
    const T* prediction;          // null for a one-field pass
    const double* point_weights;  // null for per-row weights
    double factor;                // the row's weight, or 1 with per-point weights
    std::int64_t cols;
};

// The one masking rule: a point counts when its weight is non-zero and every value the pass reads counts
// under the policy. Writes `x` (and `y`) with 0 at the points left out, and with per-point weights their
// weights (0 where left out); returns how many points count. `out_x` may be `x` (and `out_y` `y`).
template <ValidityPolicy policy, bool per_point, bool pair, class V>
GRIDSHARD_KERNEL std::int64_t mask_row(const V* x, const V* y, const double* a, std::int64_t n, V* out_x, V* out_y,
                                       double* out_weight) noexcept {
    std::int64_t valid = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double w = per_point ? a[j] : 1.0;
        const V xv = x[j];
        const V yv = pair ? y[j] : V{0};
        const bool ok = (w != 0.0) && counts<policy>(xv) && counts<policy>(yv);
        out_x[j] = ok ? xv : V{0};
        if constexpr (pair) {
            out_y[j] = ok ? yv : V{0};
        }
        if constexpr (per_point) {
            out_weight[j] = ok ? w : 0.0;
        }
        valid += ok ? 1 : 0;
    }
    return valid;
}

template <ValidityPolicy policy, class V>
std::int64_t mask_dispatch(const V* x, const V* y, const double* a, std::int64_t n, V* out_x, V* out_y,
                           double* out_weight) noexcept {
    if (a != nullptr) {
        return y != nullptr ? mask_row<policy, true, true>(x, y, a, n, out_x, out_y, out_weight)
                            : mask_row<policy, true, false>(x, y, a, n, out_x, out_y, out_weight);
    }
    return y != nullptr ? mask_row<policy, false, true>(x, y, a, n, out_x, out_y, out_weight)
                        : mask_row<policy, false, false>(x, y, a, n, out_x, out_y, out_weight);
}

template <class V>
std::int64_t mask(ValidityPolicy policy, const V* x, const V* y, const double* a, std::int64_t n, V* out_x, V* out_y,
                  double* out_weight) noexcept {
    switch (policy) {
        case ValidityPolicy::propagate:
            return mask_dispatch<ValidityPolicy::propagate>(x, y, a, n, out_x, out_y, out_weight);
        case ValidityPolicy::skip_nan:
            return mask_dispatch<ValidityPolicy::skip_nan>(x, y, a, n, out_x, out_y, out_weight);
        case ValidityPolicy::skip_invalid_pairs:
            break;
    }
    return mask_dispatch<ValidityPolicy::skip_invalid_pairs>(x, y, a, n, out_x, out_y, out_weight);
}

// The fixed-point path (numerics/fixed_point.hpp) of float rows with a row weight in exact mode: the range of
// the row's masked values proves one grid for each kind of term, and one pass forms every term and adds it to
// its digit sums; a row whose range the grids cannot hold (NaN, infinities, or non-zero magnitudes more than
// 2^27 apart) takes the per-row path below. Both paths are exact, so the bits do not depend on which one a row
// took.

// A float row pair's count of valid points, the largest magnitude among them and among their differences
// `y - x` (rounded to float, which keeps it a bound: 2^k is a float), and a lower bound of their non-zero
// magnitudes (bit patterns).
struct FloatRowRange {
    std::int64_t valid = 0;
    std::uint32_t largest = 0;
    std::uint32_t largest_difference = 0;
    std::uint32_t smallest = 0;  // 0 when every value is zero
};

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
FloatRowRange float_row_range(const float* x, const float* y, std::int64_t n) noexcept {
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

// The slots of a fixed-point row's terms, -1 where not requested: the valid weight, then the six sums in
// fixed_point_terms' order.
struct FixedPointSlots {
    std::int64_t weight = -1;
    std::array<std::int64_t, 6> sums{-1, -1, -1, -1, -1, -1};
    [[nodiscard]] bool moments() const noexcept { return sums[2] >= 0 || sums[3] >= 0 || sums[4] >= 0 || sums[5] >= 0; }
};

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
bool add_fixed_point_row(PartialSums& sums, const float* x, const float* y, std::int64_t n, double factor,
                         const FixedPointSlots& slots) {
    const FloatRowRange range = float_row_range<policy>(x, y, n);
    const std::optional<FloatRowGrids> grids = float_row_grids(range);
    if (!grids) {
        return false;
    }
    if (slots.weight >= 0) {
        sums.add_count(slots.weight, factor, range.valid);
    }
    if (range.largest == 0) {
        return true;  // every term is zero
    }
    const std::array<double, 3> anchors{grids->values.anchor(), grids->products.anchor(), grids->differences.anchor()};
    const std::array<const FixedPointGrid*, 6> grid_of{&grids->values,   &grids->values,      &grids->products,
                                                       &grids->products, &grids->differences, &grids->products};
    const bool moments = slots.moments();
    for (std::int64_t start = 0; start < n; start += fixed_point_block) {
        const std::int64_t length = std::min(fixed_point_block, n - start);
        std::array<std::uint64_t, 12> digits{};
        fixed_point_terms_of<policy>(x + start, y != nullptr ? y + start : nullptr, length, moments, *grids,
                                     anchors.data(), digits.data());
        for (std::size_t k = 0; k < slots.sums.size(); ++k) {
            if (slots.sums[k] >= 0) {
                sums.add_fixed_point(slots.sums[k], factor, *grid_of[k], digits[2 * k], digits[2 * k + 1], length);
            }
        }
    }
    return true;
}

// The fused gradient pass: float magnitudes of both fields formed in registers (GradientRows' one unscaled
// formula) and their terms added straight to one-digit sums on a grid guessed from the thread's last row, with no
// row of magnitudes stored or swept again. The pass also measures the magnitudes' range, and its sums are used
// only when that range proves the guessed grid (and no point needed the scaled formula); otherwise the row takes
// the per-row path, which gives the same bits, and the range gives the next row's guess.

// The one-digit sums of one row's gradient terms (common: where both magnitudes count; own: each field's), the
// range of the counted magnitudes, and whether a point needed the scaled formula.
struct FusedGradientSums {
    std::uint32_t common_count = 0;  // counts of one row's points, in 32 bits so that they take 16 lanes
    std::uint64_t common_truth = 0;
    std::uint64_t common_prediction = 0;
    std::uint32_t truth_count = 0;
    std::uint64_t own_truth = 0;
    std::uint32_t prediction_count = 0;
    std::uint64_t own_prediction = 0;
    std::uint32_t largest = 0;
    std::uint32_t smallest_less_one = 0xffffffffU;
    unsigned any_scaled = 0;
    std::int64_t terms = 0;  // values added to each digit sum
};

// Adds one point's magnitudes `gt`, `gp` to the sums (the engine's masking rule: a point counts where the policy
// counts its magnitudes; common terms need both). The sums come as separate scalars, so that the vectoriser
// keeps them in registers.
template <ValidityPolicy policy, bool common, bool own>
[[gnu::always_inline]] inline void add_gradient_point(float gt, float gp, double anchor, std::uint32_t& common_count,
                                                      std::uint64_t& common_truth, std::uint64_t& common_prediction,
                                                      std::uint32_t& truth_count, std::uint64_t& own_truth,
                                                      std::uint32_t& prediction_count, std::uint64_t& own_prediction,
                                                      std::uint32_t& largest,
                                                      std::uint32_t& smallest_less_one) noexcept {
    constexpr std::uint32_t magnitude_mask = 0x7fffffffU;
    const bool truth_counts = counts<policy>(gt);
    const bool prediction_counts = counts<policy>(gp);
    const std::uint32_t tb = std::bit_cast<std::uint32_t>(gt) & magnitude_mask;
    const std::uint32_t pb = std::bit_cast<std::uint32_t>(gp) & magnitude_mask;
    largest = std::max(largest, std::max(tb & (0U - static_cast<std::uint32_t>(truth_counts)),
                                         pb & (0U - static_cast<std::uint32_t>(prediction_counts))));
    smallest_less_one = std::min(smallest_less_one, std::min(tb - 1U, pb - 1U));
    // `value` where `keep`, else +0: a mask of the bits rather than a select, which the vectoriser would turn into
    // a conditional reduction it does not support.
    auto kept = [](float value, bool keep) {
        return static_cast<double>(
            std::bit_cast<float>(std::bit_cast<std::uint32_t>(value) & (0U - static_cast<std::uint32_t>(keep))));
    };
    if constexpr (common) {
        const bool both = truth_counts & prediction_counts;
        common_count += both ? 1U : 0U;
        fixed_point_add_whole(kept(gt, both), anchor, common_truth);
        fixed_point_add_whole(kept(gp, both), anchor, common_prediction);
    }
    if constexpr (own) {
        truth_count += truth_counts ? 1U : 0U;
        fixed_point_add_whole(kept(gt, truth_counts), anchor, own_truth);
        prediction_count += prediction_counts ? 1U : 0U;
        fixed_point_add_whole(kept(gp, prediction_counts), anchor, own_prediction);
    }
}

template <ValidityPolicy policy, bool common, bool own>
inline void add_gradient_point(float gt, float gp, double anchor, FusedGradientSums& f) noexcept {
    add_gradient_point<policy, common, own>(gt, gp, anchor, f.common_count, f.common_truth, f.common_prediction,
                                            f.truth_count, f.own_truth, f.prediction_count, f.own_prediction, f.largest,
                                            f.smallest_less_one);
}

template <ValidityPolicy policy, GradientRows<float>::RowCase row_case, bool common, bool own>
GRIDSHARD_KERNEL void fused_gradient_interior(const GradientRows<float>::Stencil& truth,
                                              const GradientRows<float>::Stencil& prediction, std::int64_t cols,
                                              double anchor, FusedGradientSums& sums) noexcept {
    using Rows = GradientRows<float>;
    // Each sum is kept per lane of a 16-wide step, so that the vectoriser keeps it in registers across the row
    // and reduces it once (integer sums, maxima and minima: the same result in any order).
    constexpr std::int64_t lanes = 16;
    constexpr std::int64_t block = 64;  // four cache lines of each field's row ahead asked for per block
    std::array<std::uint32_t, lanes> common_count{}, truth_count{}, prediction_count{}, largest{};
    std::array<std::uint64_t, lanes> common_truth{}, common_prediction{}, own_truth{}, own_prediction{};
    std::array<std::uint32_t, lanes> smallest_less_one;
    smallest_less_one.fill(0xffffffffU);
    std::array<unsigned, lanes> any_scaled{};
    // `active` false: the point adds zero magnitudes (which count under every policy; the caller takes them back
    // off the counts) and no scaling flag.
    auto add_point = [&](std::int64_t j, std::size_t l, bool active) __attribute__((always_inline)) {
        bool truth_scaled = false;
        bool prediction_scaled = false;
        const std::uint32_t keep = 0U - static_cast<std::uint32_t>(active);
        const float gt = std::bit_cast<float>(
            std::bit_cast<std::uint32_t>(Rows::interior_magnitude<row_case>(truth, j, truth_scaled)) & keep);
        const float gp = std::bit_cast<float>(
            std::bit_cast<std::uint32_t>(Rows::interior_magnitude<row_case>(prediction, j, prediction_scaled)) & keep);
        any_scaled[l] |= ((truth_scaled | prediction_scaled) & active) ? 1U : 0U;
        add_gradient_point<policy, common, own>(gt, gp, anchor, common_count[l], common_truth[l], common_prediction[l],
                                                truth_count[l], own_truth[l], prediction_count[l], own_prediction[l],
                                                largest[l], smallest_less_one[l]);
    };
    const std::int64_t interior = cols - 2;  // columns 1 .. cols - 2
    std::int64_t j = 1;
    for (; j + lanes <= cols - 1; j += lanes) {
        if ((j - 1) % block == 0) {
            Rows::prefetch_ahead(truth, j, block, cols);
            Rows::prefetch_ahead(prediction, j, block, cols);
        }
        for (std::int64_t l = 0; l < lanes; ++l) {
            add_point(j + l, static_cast<std::size_t>(l), true);
        }
    }
    std::int64_t zero_terms = 0;  // inactive lanes' zeros, added to the digit sums (and their biases) as terms
    if (j < cols - 1) {
        if (interior >= lanes) {
            // The last columns as one more whole step ending at column cols - 2, its lanes before j inactive.
            const std::int64_t first = cols - 1 - lanes;
            for (std::int64_t l = 0; l < lanes; ++l) {
                add_point(first + l, static_cast<std::size_t>(l), first + l >= j);
            }
            zero_terms = j - first;
            const auto inactive = static_cast<std::uint32_t>(zero_terms);
            common_count[0] -= common ? inactive : 0U;
            truth_count[0] -= own ? inactive : 0U;
            prediction_count[0] -= own ? inactive : 0U;
        } else {
            for (; j < cols - 1; ++j) {
                add_point(j, 0, true);
            }
        }
    }
    for (std::size_t l = 0; l < lanes; ++l) {
        sums.common_count += common_count[l];
        sums.common_truth += common_truth[l];
        sums.common_prediction += common_prediction[l];
        sums.truth_count += truth_count[l];
        sums.own_truth += own_truth[l];
        sums.prediction_count += prediction_count[l];
        sums.own_prediction += own_prediction[l];
        sums.largest = std::max(sums.largest, largest[l]);
        sums.smallest_less_one = std::min(sums.smallest_less_one, smallest_less_one[l]);
        sums.any_scaled |= any_scaled[l];
    }
    sums.terms += std::max<std::int64_t>(interior, 0) + zero_terms;
}

template <ValidityPolicy policy, bool common, bool own>
FusedGradientSums fused_gradient_row(const GradientRows<float>::Stencil& truth,
                                     const GradientRows<float>::Stencil& prediction, std::int64_t cols,
                                     double anchor) noexcept {
    using RowCase = GradientRows<float>::RowCase;
    FusedGradientSums f;
    switch (truth.row_case) {
        case RowCase::first:
            fused_gradient_interior<policy, RowCase::first, common, own>(truth, prediction, cols, anchor, f);
            break;
        case RowCase::last:
            fused_gradient_interior<policy, RowCase::last, common, own>(truth, prediction, cols, anchor, f);
            break;
        case RowCase::interior:
            fused_gradient_interior<policy, RowCase::interior, common, own>(truth, prediction, cols, anchor, f);
            break;
    }
    // The edge columns (their magnitudes read halo cells; one column when the row has one).
    add_gradient_point<policy, common, own>(truth.first, prediction.first, anchor, f);
    ++f.terms;
    if (cols > 1) {
        add_gradient_point<policy, common, own>(truth.last, prediction.last, anchor, f);
        ++f.terms;
    }
    return f;
}

// How many powers of two above the grid one-digit terms may reach when `terms` of them share a digit sum: below
// 2^51 for the float-to-integer trick, and the sum below 2^62.
int one_digit_limit(std::int64_t terms) noexcept {
    return std::min(51, 62 - static_cast<int>(std::bit_width(static_cast<std::uint64_t>(terms))));
}

// The lowest bit of a one-digit grid for magnitudes in [2^a, 2^b) over `terms` values, midway in the window
// [b - limit, a - 23] so that the next row's range may move either way; none when the window is empty.
std::optional<int> gradient_grid_guess(int a, int b, std::int64_t terms) noexcept {
    const int limit = one_digit_limit(terms);
    const int low = b - limit;
    const int high = a - 23;
    if (low > high) {
        return std::nullopt;
    }
    return low + (high - low) / 2;
}

// Whether the sums of a fused row hold its exact terms on the grid `lowest_bit`: every magnitude the unscaled
// formula's, the counted ones finite, each a whole multiple of the grid below 2^limit of it. Sets `next` to the
// grid the next row should try.
bool fused_gradient_fits(const FusedGradientSums& f, int lowest_bit, std::optional<int>& next) noexcept {
    constexpr std::uint32_t infinity_bits = 0x7f800000U;
    if (f.any_scaled != 0 || f.largest >= infinity_bits) {
        next.reset();
        return false;
    }
    if (f.largest == 0) {
        return true;  // every term is zero
    }
    const int b = std::ilogb(std::bit_cast<float>(f.largest)) + 1;
    const int a = std::ilogb(std::bit_cast<float>(f.smallest_less_one + 1U));
    const int limit = one_digit_limit(f.terms);
    const bool fits = lowest_bit <= a - 23 && b - lowest_bit <= limit;
    if (!fits) {
        next = gradient_grid_guess(a, b, f.terms);
    }
    return fits;
}

// The fixed-point path of a row when it applies (float values, a row weight, exact sums); false otherwise, or
// when the row's range needs the per-row path.
template <class V>
bool try_fixed_point_row(ValidityPolicy policy, PartialSums& sums, const V* x, const V* y, const Row<V>& row,
                         const FixedPointSlots& slots) {
    if constexpr (!std::is_same_v<V, float>) {
        return false;
    } else {
        if (!sums.exact_mode() || row.point_weights != nullptr) {
            return false;
        }
        switch (policy) {
            case ValidityPolicy::propagate:
                return add_fixed_point_row<ValidityPolicy::propagate>(sums, x, y, row.cols, row.factor, slots);
            case ValidityPolicy::skip_nan:
                return add_fixed_point_row<ValidityPolicy::skip_nan>(sums, x, y, row.cols, row.factor, slots);
            case ValidityPolicy::skip_invalid_pairs:
                break;
        }
        return add_fixed_point_row<ValidityPolicy::skip_invalid_pairs>(sums, x, y, row.cols, row.factor, slots);
    }
}

// The rounding error of the product `a * b`, rounded to `product`: exact (std::fma is correctly rounded on
// every CPU, so the same bits with or without an FMA unit), and 0 where the product is not finite, so that an
// infinity stays an infinity instead of meeting its own -inf.
inline double product_error(double a, double b, double product) noexcept {
    const double error = std::fma(a, b, -product);
    return product - product == 0.0 ? error : 0.0;
}

// `a_j x_j` of one row into `work`; with `exact`, its rounding error `fma(a_j, x_j, -work_j)` into
// `work + n`, so the two rows sum exactly to the products.
template <class V>
GRIDSHARD_KERNEL void weight_row(const double* weight, const V* x, std::int64_t n, double* __restrict work,
                                 bool exact) {
    double* __restrict error = work + n;
    for (std::int64_t j = 0; j < n; ++j) {
        work[j] = weight[j] * static_cast<double>(x[j]);
    }
    if (exact) {
        for (std::int64_t j = 0; j < n; ++j) {
            error[j] = product_error(weight[j], static_cast<double>(x[j]), work[j]);
        }
    }
}

// The per-point product `f(x_j, y_j)` (in double) of two rows, times the point weights when there are some.
template <class V, class F>
GRIDSHARD_KERNEL void product_row(const V* x, const V* y, const double* weight, std::int64_t n, double* __restrict work,
                                  F f) {
    if (weight != nullptr) {
        for (std::int64_t j = 0; j < n; ++j) {
            work[j] = weight[j] * f(static_cast<double>(x[j]), static_cast<double>(y[j]));
        }
    } else {
        for (std::int64_t j = 0; j < n; ++j) {
            work[j] = f(static_cast<double>(x[j]), static_cast<double>(y[j]));
        }
    }
}

// The exact parts of the per-point square `a_j x_j^2` (with per-point weights `weight`, else `x_j^2`) of a
// masked row, as rows of `n` doubles in `parts` whose exact sum is the exact term; returns how many. A
// float's square is exact in double; a double's is split as hi + lo (product_error), and a weight times
// each part once more.
template <class V>
GRIDSHARD_KERNEL int exact_square_row(const V* x, const double* weight, std::int64_t n, double* __restrict parts) {
    constexpr bool square_exact = std::numeric_limits<V>::digits * 2 <= std::numeric_limits<double>::digits;
    double* __restrict p0 = parts;
    double* __restrict p1 = parts + n;
    double* __restrict p2 = parts + 2 * n;
    double* __restrict p3 = parts + 3 * n;
    if (weight == nullptr) {
        for (std::int64_t j = 0; j < n; ++j) {
            const auto v = static_cast<double>(x[j]);
            p0[j] = v * v;
            if constexpr (!square_exact) {
                p1[j] = product_error(v, v, p0[j]);
            }
        }
        return square_exact ? 1 : 2;
    }
    for (std::int64_t j = 0; j < n; ++j) {
        const auto v = static_cast<double>(x[j]);
        const double square = v * v;
        p0[j] = weight[j] * square;
        p1[j] = product_error(weight[j], square, p0[j]);
        if constexpr (!square_exact) {
            const double square_low = product_error(v, v, square);
            p2[j] = weight[j] * square_low;
            p3[j] = product_error(weight[j], square_low, p2[j]);
        }
    }
    return square_exact ? 2 : 4;
}

// Adds the weighted sum of the squares of one masked row: exactly with exact sums (so the variance's
// W Q - S^2 loses nothing to an offset, docs/design.md §5), the rounded squares with plain ones.
template <class V>
void add_weighted_square(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                         double* __restrict work) {
    const bool per_point = row.point_weights != nullptr;
    if (!sums.exact_mode()) {
        product_row(x, x, per_point ? weight : nullptr, row.cols, work, [](double v, double) { return v * v; });
        sums.add_row(slot, work, row.cols, per_point ? 1.0 : row.factor);
        return;
    }
    const int parts = exact_square_row(x, per_point ? weight : nullptr, row.cols, work);
    for (int k = 0; k < parts; ++k) {
        sums.add_row(slot, work + k * row.cols, row.cols, per_point ? 1.0 : row.factor);
    }
}

// Adds the weighted sum of one masked row: `a_j x_j` with per-point weights (`weight` holds the masked
// weights), exactly with exact sums (each product and its rounding error), `factor * sum x_j` with a row
// weight (exact as it stands). `work` holds the products.
template <class V>
void add_weighted(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                  double* __restrict work) {
    if (row.point_weights == nullptr) {
        sums.add_row(slot, x, row.cols, row.factor);
        return;
    }
    const bool exact = sums.exact_mode();
    weight_row(weight, x, row.cols, work, exact);
    sums.add_row(slot, work, row.cols, 1.0);
    if (exact) {
        sums.add_row(slot, work + row.cols, row.cols, 1.0);
    }
}

// Adds the weighted sum of a per-point product `f(x_j, y_j)` (in double) of two masked rows.
template <class V, class F>
void add_weighted_product(PartialSums& sums, std::int64_t slot, const V* x, const V* y, const Row<V>& row,
                          const double* weight, double* __restrict work, F f) {
    const bool per_point = row.point_weights != nullptr;
    product_row(x, y, per_point ? weight : nullptr, row.cols, work, f);
    sums.add_row(slot, work, row.cols, per_point ? 1.0 : row.factor);
}

// The weight of the valid points of a row: the masked weights, or the count times the row weight.
template <class V>
void add_valid_weight(PartialSums& sums, std::int64_t slot, const Row<V>& row, const double* weight,
                      std::int64_t valid) {
    if (row.point_weights != nullptr) {
        sums.add_row(slot, weight, row.cols, 1.0);
    } else {
        sums.add_count(slot, row.factor, valid);
    }
}

// Every requested term of one row, added to `sums` at `first_slot` (terms in TermSet order).
template <class T>
class RowTerms {
  public:
    RowTerms(const TermRequest& request, const std::optional<GradientRows<T>>& truth_gradient,
             const std::optional<GradientRows<T>>& prediction_gradient)
        : request_(request), truth_gradient_(truth_gradient), prediction_gradient_(prediction_gradient) {}

    void add(PartialSums& sums, std::int64_t first_slot, std::int64_t c, std::int64_t i, const Row<T>& row,
             RowScratch<T>& s) const {
        const TermSet terms = request_.terms;
        auto slot = [&](Term t) { return first_slot + terms.index(t); };
        if (terms.needs_point_values()) {
            add_point_values(sums, slot, row, s);
        }
        if (terms.needs_gradient()) {
            add_gradient(sums, slot, c, i, row, s);
        }
    }

  private:
    // The slots of the point values' terms for the fixed-point path (the prediction's only with a pair).
    template <class SlotOf>
    FixedPointSlots point_value_slots(SlotOf slot, bool pair) const {
        const TermSet terms = request_.terms;
        auto slot_if = [&](Term t, bool allowed) { return allowed && terms.contains(t) ? slot(t) : std::int64_t{-1}; };
        FixedPointSlots slots;
        slots.weight = slot_if(Term::weight, true);
        slots.sums = {slot_if(Term::truth, true),
                      slot_if(Term::prediction, pair),
                      slot_if(Term::truth_square, true),
                      slot_if(Term::prediction_square, pair),
                      slot_if(Term::difference_square, pair),
                      slot_if(Term::cross, pair)};
        return slots;
    }

    // The terms of the point values, over the points the policy counts.
    template <class SlotOf>
    void add_point_values(PartialSums& sums, SlotOf slot, const Row<T>& row, RowScratch<T>& s) const {
        const TermSet terms = request_.terms;
        const bool pair = row.prediction != nullptr;
        const bool prediction_terms = terms.contains(Term::prediction) || terms.contains(Term::prediction_square) ||
                                      terms.contains(Term::difference_square) || terms.contains(Term::cross);
        if ((pair || !prediction_terms) &&
            try_fixed_point_row(request_.policy, sums, row.truth, row.prediction, row, point_value_slots(slot, pair))) {
            return;
        }
        const std::int64_t valid = mask(request_.policy, row.truth, row.prediction, row.point_weights, row.cols,
                                        s.truth.data(), s.prediction.data(), s.weight.data());
        const T* t = s.truth.data();
        const T* p = s.prediction.data();
        double* work = s.term.data();
        if (terms.contains(Term::weight)) {
            add_valid_weight(sums, slot(Term::weight), row, s.weight.data(), valid);
        }
        if (terms.contains(Term::truth)) {
            add_weighted(sums, slot(Term::truth), t, row, s.weight.data(), work);
        }
        if (terms.contains(Term::prediction)) {
            add_weighted(sums, slot(Term::prediction), p, row, s.weight.data(), work);
        }
        if (terms.contains(Term::truth_square)) {
            add_weighted_square(sums, slot(Term::truth_square), t, row, s.weight.data(), work);
        }
        if (terms.contains(Term::prediction_square)) {
            add_weighted_square(sums, slot(Term::prediction_square), p, row, s.weight.data(), work);
        }
        if (terms.contains(Term::difference_square)) {
            add_weighted_product(sums, slot(Term::difference_square), t, p, row, s.weight.data(), work,
                                 [](double x, double y) { return (y - x) * (y - x); });
        }
        if (terms.contains(Term::cross)) {
            add_weighted_product(sums, slot(Term::cross), t, p, row, s.weight.data(), work,
                                 [](double x, double y) { return x * y; });
        }
    }

    // The gradient terms: each field's magnitudes, masked by the same rule over the pair of magnitudes (the
    // common terms) or over each field's own (the own terms).
    template <class SlotOf>
    void add_gradient(PartialSums& sums, SlotOf slot, std::int64_t c, std::int64_t i, const Row<T>& row,
                      RowScratch<T>& s) const {
        const TermSet terms = request_.terms;
        const bool with_prediction = terms.needs_prediction_gradient();
        if (with_prediction && add_fused_gradient(sums, slot, c, i, row, s)) {
            return;
        }
        const T* gt = s.truth_gradient.data();
        const T* gp = s.prediction_gradient.data();
        truth_gradient_->row(c, i, s.truth_gradient.data());
        if (with_prediction) {
            prediction_gradient_->row(c, i, s.prediction_gradient.data());
            if constexpr (std::is_same_v<T, float>) {
                if (!s.gradient_grid && fused_gradient_applies(sums, row)) {  // the next row's grid from this one's
                    s.gradient_grid = gradient_grid_of(row.cols, gt, gp);
                }
            }
        }
        T* masked_t = s.truth.data();  // free once the point values' terms are added
        T* masked_p = s.prediction.data();
        double* weight = s.weight.data();
        double* work = s.term.data();
        // The terms of x (and y, unless null) over the points `policy` counts in both.
        auto add_masked = [&](const T* x, const T* y, Term weight_term, Term x_term, Term y_term,
                              ValidityPolicy policy) {
            FixedPointSlots fixed;
            fixed.weight = terms.contains(weight_term) ? slot(weight_term) : -1;
            fixed.sums[0] = terms.contains(x_term) ? slot(x_term) : -1;
            fixed.sums[1] = y != nullptr && terms.contains(y_term) ? slot(y_term) : -1;
            if (try_fixed_point_row(policy, sums, x, y, row, fixed)) {
                return;
            }
            const std::int64_t valid = mask(policy, x, y, row.point_weights, row.cols, masked_t, masked_p, weight);
            if (terms.contains(weight_term)) {
                add_valid_weight(sums, slot(weight_term), row, weight, valid);
            }
            if (terms.contains(x_term)) {
                add_weighted(sums, slot(x_term), masked_t, row, weight, work);
            }
            if (y != nullptr && terms.contains(y_term)) {
                add_weighted(sums, slot(y_term), masked_p, row, weight, work);
            }
        };
        if (terms.needs_common_gradient()) {
            add_masked(gt, terms.contains(Term::prediction_gradient) ? gp : nullptr, Term::gradient_weight,
                       Term::truth_gradient, Term::prediction_gradient, request_.policy);
        }
        if (terms.contains(Term::truth_own_gradient) || terms.contains(Term::truth_own_gradient_weight)) {
            add_masked(gt, nullptr, Term::truth_own_gradient_weight, Term::truth_own_gradient, Term::truth_own_gradient,
                       own_gradient_policy(request_.policy));
        }
        if (terms.contains(Term::prediction_own_gradient) || terms.contains(Term::prediction_own_gradient_weight)) {
            add_masked(gp, nullptr, Term::prediction_own_gradient_weight, Term::prediction_own_gradient,
                       Term::prediction_own_gradient, own_gradient_policy(request_.policy));
        }
    }

    // Whether a pair's gradient terms may take the fused pass: float fields, exact sums, a row weight, both fields'
    // magnitudes needed, and common terms (if any) over the points where both count (with the prediction's term;
    // without it the per-row path counts the truth's points alone).
    bool fused_gradient_applies(const PartialSums& sums, const Row<T>& row) const {
        const TermSet terms = request_.terms;
        return std::is_same_v<T, float> && sums.exact_mode() && row.point_weights == nullptr &&
               terms.needs_prediction_gradient() &&
               (!terms.needs_common_gradient() || terms.contains(Term::prediction_gradient)) &&
               (!terms.needs_common_gradient() || !terms.needs_own_gradient() ||
                own_gradient_policy(request_.policy) == request_.policy);
    }

    // The one policy of the fused pass's gradient terms: the common terms' (the request's), or with own terms alone
    // theirs (own_gradient_policy); fused_gradient_applies leaves out a pass that needs both where they differ.
    ValidityPolicy fused_gradient_policy() const {
        return request_.terms.needs_common_gradient() ? request_.policy : own_gradient_policy(request_.policy);
    }

    // The grid guess from a row of stored magnitudes (the first row, or one after a failed guess).
    std::optional<int> gradient_grid_of(std::int64_t cols, const float* gt, const float* gp) const {
        FloatRowRange range;
        switch (fused_gradient_policy()) {
            case ValidityPolicy::propagate:
                range = float_row_range<ValidityPolicy::propagate>(gt, gp, cols);
                break;
            case ValidityPolicy::skip_nan:
                range = float_row_range<ValidityPolicy::skip_nan>(gt, gp, cols);
                break;
            case ValidityPolicy::skip_invalid_pairs:
                range = float_row_range<ValidityPolicy::skip_invalid_pairs>(gt, gp, cols);
                break;
        }
        if (range.largest == 0 || range.largest >= 0x7f800000U) {
            return std::nullopt;
        }
        return gradient_grid_guess(std::ilogb(std::bit_cast<float>(range.smallest)),
                                   std::ilogb(std::bit_cast<float>(range.largest)) + 1, cols);
    }

    // The fused gradient pass of one row when it applies and the thread's grid guess holds; false, adding
    // nothing, otherwise (the caller takes the per-row path).
    template <class SlotOf>
    bool add_fused_gradient(PartialSums& sums, SlotOf slot, std::int64_t c, std::int64_t i, const Row<T>& row,
                            RowScratch<T>& s) const {
        if constexpr (!std::is_same_v<T, float>) {
            return false;
        } else {
            if (!fused_gradient_applies(sums, row) || !s.gradient_grid) {
                return false;
            }
            const TermSet terms = request_.terms;
            const bool common = terms.needs_common_gradient();
            const bool own = terms.needs_own_gradient();
            const int lowest_bit = *s.gradient_grid;
            const double anchor = fixed_point_anchor(lowest_bit);
            const auto truth = truth_gradient_->stencil(c, i);
            const auto prediction = prediction_gradient_->stencil(c, i);
            const FusedGradientSums f = fused_sums(common, own, truth, prediction, row.cols, anchor);
            if (!fused_gradient_fits(f, lowest_bit, s.gradient_grid)) {
                return false;
            }
            const FixedPointGrid grid{lowest_bit, true};
            auto add = [&](Term t, std::uint64_t digits) {
                if (terms.contains(t)) {
                    sums.add_fixed_point(slot(t), row.factor, grid, digits, 0, f.terms);
                }
            };
            auto count = [&](Term t, std::uint64_t n) {
                if (terms.contains(t)) {
                    sums.add_count(slot(t), row.factor, static_cast<std::int64_t>(n));
                }
            };
            if (common) {
                count(Term::gradient_weight, f.common_count);
                add(Term::truth_gradient, f.common_truth);
                add(Term::prediction_gradient, f.common_prediction);
            }
            if (own) {
                count(Term::truth_own_gradient_weight, f.truth_count);
                add(Term::truth_own_gradient, f.own_truth);
                count(Term::prediction_own_gradient_weight, f.prediction_count);
                add(Term::prediction_own_gradient, f.own_prediction);
            }
            return true;
        }
    }

    template <class Stencil>
    FusedGradientSums fused_sums(bool common, bool own, const Stencil& truth, const Stencil& prediction,
                                 std::int64_t cols, double anchor) const {
        auto with_policy = [&]<ValidityPolicy policy>() {
            if (common && own) {
                return fused_gradient_row<policy, true, true>(truth, prediction, cols, anchor);
            }
            return common ? fused_gradient_row<policy, true, false>(truth, prediction, cols, anchor)
                          : fused_gradient_row<policy, false, true>(truth, prediction, cols, anchor);
        };
        switch (fused_gradient_policy()) {
            case ValidityPolicy::propagate:
                return with_policy.template operator()<ValidityPolicy::propagate>();
            case ValidityPolicy::skip_nan:
                return with_policy.template operator()<ValidityPolicy::skip_nan>();
            case ValidityPolicy::skip_invalid_pairs:
                break;
        }
        return with_policy.template operator()<ValidityPolicy::skip_invalid_pairs>();
    }

    TermRequest request_;
    const std::optional<GradientRows<T>>& truth_gradient_;
    const std::optional<GradientRows<T>>& prediction_gradient_;
};

}  // namespace

template <class T>
void add_zonal_terms(const Box& box, const ShardInputs<T>& inputs, const TermRequest& request, PartialSums& sums,
                     std::int64_t first_slot) {
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    const std::int64_t items = inputs.channels * rows;
    const std::int64_t terms = request.terms.size();
    const std::optional<GradientRows<T>> no_gradient;
    const RowTerms<T> row_terms(request, no_gradient, no_gradient);
    // Every (channel, row) has slots of its own, formed by one thread: the same bits for any thread count.
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads_for(items, cols)) if (items > 1)) {
        RowScratch<T> scratch(cols);
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t k = 0; k < items; ++k) {
            const std::int64_t offset = k * cols;
            const Row<T> row{inputs.truth + offset, inputs.prediction != nullptr ? inputs.prediction + offset : nullptr,
                             nullptr, 1.0, cols};
            row_terms.add(sums, first_slot + k * terms, k / rows, k % rows, row, scratch);
        }
    }
}

template <class T>
PartialSums form_terms(const GridShape& grid, const Box& box, const ShardInputs<T>& inputs, const RowWeights& weights,
                       const TermRequest& request) {
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    const std::int64_t items = inputs.channels * rows;
    const TermSet terms = request.terms;
    std::optional<GradientRows<T>> truth_gradient;
    std::optional<GradientRows<T>> prediction_gradient;
    if (terms.needs_gradient()) {
        const std::span<const T> truth(inputs.truth, static_cast<std::size_t>(items * cols));
        truth_gradient.emplace(grid, box, *inputs.gradient, truth, inputs.channels, *inputs.halo, 0);
        if (terms.needs_prediction_gradient()) {
            const std::span<const T> prediction(inputs.prediction, static_cast<std::size_t>(items * cols));
            prediction_gradient.emplace(grid, box, *inputs.gradient, prediction, inputs.channels, *inputs.halo, 1);
        }
    }
    const RowTerms<T> row_terms(request, truth_gradient, prediction_gradient);
    auto row_of = [&](std::int64_t c, std::int64_t i) {
        const std::int64_t offset = (c * rows + i) * cols;
        return Row<T>{inputs.truth + offset, inputs.prediction != nullptr ? inputs.prediction + offset : nullptr,
                      weights.per_point() ? weights.points(i) : nullptr, weights.per_point() ? 1.0 : weights.row(i),
                      cols};
    };
    // Per channel: each thread forms exact partial sums of its own (channel, row) items, merged exactly,
    // so the sums are the same bits for any number of threads.
    const std::int64_t slots = 1 + inputs.channels * terms.size();
    const int threads = threads_for(items, cols);
    std::vector<PartialSums> partial(static_cast<std::size_t>(threads), PartialSums(slots, request.summation));
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads) if (threads > 1)) {
        PartialSums& sums = partial[static_cast<std::size_t>(thread_index())];
        RowScratch<T> scratch(cols);
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t k = 0; k < items; ++k) {
            const Row<T> row = row_of(k / rows, k % rows);
            if (k + 1 < items && !truth_gradient) {  // the gradient's stencil asks for its rows ahead itself
                prefetch_row(row.truth + cols, cols);
                if (row.prediction != nullptr) {
                    prefetch_row(row.prediction + cols, cols);
                }
            }
            if (row.factor == 0.0) {
                continue;  // a row of zero weight adds nothing (NaN included)
            }
            row_terms.add(sums, 1 + (k / rows) * terms.size(), k / rows, k % rows, row, scratch);
        }
    }
    PartialSums& sums = partial.front();
    for (std::size_t k = 1; k < partial.size(); ++k) {
        sums.merge(partial[k]);
    }
    weights.add_total(sums, 0);
    return sums;
}

template void add_zonal_terms<float>(const Box&, const ShardInputs<float>&, const TermRequest&, PartialSums&,
                                     std::int64_t);
template void add_zonal_terms<double>(const Box&, const ShardInputs<double>&, const TermRequest&, PartialSums&,
                                      std::int64_t);
template PartialSums form_terms<float>(const GridShape&, const Box&, const ShardInputs<float>&, const RowWeights&,
                                       const TermRequest&);
template PartialSums form_terms<double>(const GridShape&, const Box&, const ShardInputs<double>&, const RowWeights&,
                                        const TermRequest&);

}  // namespace gridshard::detail
