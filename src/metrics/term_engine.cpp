// The one accumulation engine (term_engine.hpp): the pass over (channel, row) items and the masking rule. The
// terms of a row take one of three paths, each exact, so the bits do not depend on which: the fixed-point rows
// (fixed_point_rows.hpp), the fused gradient pass (fused_gradient.hpp), and the per-row path of masked rows and
// their exact products (exact_products.hpp).

#include "term_engine.hpp"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"
#include "exact_products.hpp"
#include "fixed_point_rows.hpp"
#include "fused_gradient.hpp"
#include "term_rows.hpp"

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

// Every requested term of one row, added to `sums` at `first_slot` (terms in TermSet order).
template <class T>
class RowTerms {
  public:
    RowTerms(const TermRequest& request, const std::optional<GradientRows<T>>& truth_gradient,
             const std::optional<GradientRows<T>>& prediction_gradient)
        : request_(request), truth_gradient_(truth_gradient), prediction_gradient_(prediction_gradient) {}

    // `row_sums`: where this row hands its value sums over (form_terms), or null.
    void add(PartialSums& sums, std::int64_t first_slot, std::int64_t c, std::int64_t i, const Row<T>& row,
             RowScratch<T>& s, RowValueSums* row_sums = nullptr) const {
        const TermSet terms = request_.terms;
        auto slot = [&](Term t) { return first_slot + terms.index(t); };
        if (terms.needs_point_values()) {
            add_point_values(sums, slot, row, s, row_sums);
        }
        if (terms.needs_gradient()) {
            add_gradient(sums, first_slot, c, i, row, s);
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
    void add_point_values(PartialSums& sums, SlotOf slot, const Row<T>& row, RowScratch<T>& s,
                          RowValueSums* row_sums) const {
        const TermSet terms = request_.terms;
        const bool pair = row.prediction != nullptr;
        const bool prediction_terms = terms.contains(Term::prediction) || terms.contains(Term::prediction_square) ||
                                      terms.contains(Term::difference_square) || terms.contains(Term::cross);
        FixedPointSlots slots = point_value_slots(slot, pair);
        slots.row_sums = row_sums;
        if ((pair || !prediction_terms) &&
            try_fixed_point_row(request_.policy, sums, row.truth, row.prediction, row, slots)) {
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
                                 PointProduct::difference_square);
        }
        if (terms.contains(Term::cross)) {
            add_weighted_product(sums, slot(Term::cross), t, p, row, s.weight.data(), work, PointProduct::cross);
        }
    }

    // The gradient terms: each field's magnitudes, masked by the same rule over the pair of magnitudes (the
    // common terms) or over each field's own (the own terms).
    void add_gradient(PartialSums& sums, std::int64_t first_slot, std::int64_t c, std::int64_t i, const Row<T>& row,
                      RowScratch<T>& s) const {
        const TermSet terms = request_.terms;
        auto slot = [&](Term t) { return first_slot + terms.index(t); };
        const bool with_prediction = terms.needs_prediction_gradient();
        if constexpr (std::is_same_v<T, float>) {
            // The fused pass when it applies and the thread's grid guess holds.
            if (with_prediction && s.gradient_grid &&
                fused_gradient_applies(request_, sums, row.point_weights != nullptr) &&
                add_fused_gradient(request_, sums, first_slot, truth_gradient_->stencil(c, i),
                                   prediction_gradient_->stencil(c, i), row.factor, row.cols, s.gradient_grid)) {
                return;
            }
        }
        const T* gt = s.truth_gradient.data();
        const T* gp = s.prediction_gradient.data();
        truth_gradient_->row(c, i, s.truth_gradient.data());
        if (with_prediction) {
            prediction_gradient_->row(c, i, s.prediction_gradient.data());
            if constexpr (std::is_same_v<T, float>) {
                if (!s.gradient_grid && fused_gradient_applies(request_, sums, row.point_weights != nullptr)) {
                    s.gradient_grid = gradient_grid_of(request_, row.cols, gt, gp);  // the next row's, from this one
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
                       const TermRequest& request, RowValueSums* row_sums) {
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
            row_terms.add(sums, 1 + (k / rows) * terms.size(), k / rows, k % rows, row, scratch,
                          row_sums != nullptr ? row_sums + k : nullptr);
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
                                       const TermRequest&, RowValueSums*);
template PartialSums form_terms<double>(const GridShape&, const Box&, const ShardInputs<double>&, const RowWeights&,
                                        const TermRequest&, RowValueSums*);

}  // namespace gridshard::detail
