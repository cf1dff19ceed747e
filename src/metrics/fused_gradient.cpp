// The term engine's fused gradient pass (fused_gradient.hpp).

#include "fused_gradient.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "../core/kernel_dispatch.hpp"
#include "fixed_point_rows.hpp"
#include "term_rows.hpp"

namespace gridshard::detail {
namespace {

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

// The one policy of the fused pass's gradient terms: the common terms' (the request's), or with own terms alone
// theirs (own_gradient_policy); fused_gradient_applies leaves out a pass that needs both where they differ.
ValidityPolicy fused_gradient_policy(const TermRequest& request) noexcept {
    return request.terms.needs_common_gradient() ? request.policy : own_gradient_policy(request.policy);
}

FusedGradientSums fused_sums(ValidityPolicy policy, bool common, bool own, const GradientRows<float>::Stencil& truth,
                             const GradientRows<float>::Stencil& prediction, std::int64_t cols, double anchor) {
    return with_policy(policy, [&](auto p) {
        if (common && own) {
            return fused_gradient_row<p.value, true, true>(truth, prediction, cols, anchor);
        }
        return common ? fused_gradient_row<p.value, true, false>(truth, prediction, cols, anchor)
                      : fused_gradient_row<p.value, false, true>(truth, prediction, cols, anchor);
    });
}

}  // namespace

bool fused_gradient_applies(const TermRequest& request, const PartialSums& sums, bool per_point_weights) noexcept {
    const TermSet terms = request.terms;
    return sums.exact_mode() && !per_point_weights && terms.needs_prediction_gradient() &&
           (!terms.needs_common_gradient() || terms.contains(Term::prediction_gradient)) &&
           (!terms.needs_common_gradient() || !terms.needs_own_gradient() ||
            own_gradient_policy(request.policy) == request.policy);
}

std::optional<int> gradient_grid_of(const TermRequest& request, std::int64_t cols, const float* gt,
                                    const float* gp) noexcept {
    const FloatRowRange range = float_row_range(fused_gradient_policy(request), gt, gp, cols);
    if (range.largest == 0 || range.largest >= 0x7f800000U) {
        return std::nullopt;
    }
    return gradient_grid_guess(std::ilogb(std::bit_cast<float>(range.smallest)),
                               std::ilogb(std::bit_cast<float>(range.largest)) + 1, cols);
}

bool add_fused_gradient(const TermRequest& request, PartialSums& sums, std::int64_t first_slot,
                        const GradientRows<float>::Stencil& truth, const GradientRows<float>::Stencil& prediction,
                        double factor, std::int64_t cols, std::optional<int>& grid) {
    const TermSet terms = request.terms;
    const bool common = terms.needs_common_gradient();
    const bool own = terms.needs_own_gradient();
    const int lowest_bit = *grid;
    const double anchor = fixed_point_anchor(lowest_bit);
    const FusedGradientSums f =
        fused_sums(fused_gradient_policy(request), common, own, truth, prediction, cols, anchor);
    if (!fused_gradient_fits(f, lowest_bit, grid)) {
        return false;
    }
    const FixedPointGrid fixed{lowest_bit, true};
    auto add = [&](Term t, std::uint64_t digits) {
        if (terms.contains(t)) {
            sums.add_fixed_point(first_slot + terms.index(t), factor, fixed, digits, 0, f.terms);
        }
    };
    auto count = [&](Term t, std::uint64_t n) {
        if (terms.contains(t)) {
            sums.add_count(first_slot + terms.index(t), factor, static_cast<std::int64_t>(n));
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

}  // namespace gridshard::detail
