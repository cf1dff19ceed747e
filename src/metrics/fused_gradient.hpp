#pragma once
// The term engine's fused gradient pass: float magnitudes of both fields formed in registers (GradientRows' one
// unscaled formula, row_kernels.hpp) and their terms added straight to one-digit sums on a grid guessed from the
// thread's last row, with no row of magnitudes stored or swept again. The pass also measures the magnitudes'
// range, and its sums are used only when that range proves the guessed grid (and no point needed the scaled
// formula); otherwise the row takes the per-row path (term_engine.cpp), which gives the same bits, and the range
// gives the next row's guess. Internal to the metrics layer; no MPI calls.

#include <cstdint>
#include <optional>

#include "partial_sums.hpp"
#include "row_kernels.hpp"
#include "term_engine.hpp"

namespace gridshard::detail {

/// Whether the gradient terms of `request` over a pair of float fields may take the fused pass into `sums` on a
/// row with (`per_point_weights`) or without point weights: exact sums, a row weight, both fields' magnitudes
/// needed, and common terms (if any) over the points where both count (with the prediction's term; without it the
/// per-row path counts the truth's points alone) under the same policy as the own terms (if any).
[[nodiscard]] bool fused_gradient_applies(const TermRequest& request, const PartialSums& sums,
                                          bool per_point_weights) noexcept;

/// The grid (its lowest bit) the fused pass of the next row tries, from a row of `cols` stored magnitudes `gt`,
/// `gp` of a pass that fused_gradient_applies to (the first row, or one after a failed guess); none when the row
/// cannot tell (all zero, or a magnitude not finite).
[[nodiscard]] std::optional<int> gradient_grid_of(const TermRequest& request, std::int64_t cols, const float* gt,
                                                  const float* gp) noexcept;

/// The fused pass of one row of weight `factor` on the grid `*grid`: adds the gradient terms of `request` to
/// `sums` at `first_slot` (terms in TermSet order) and returns true when the row's range proves the grid; else
/// adds nothing, sets `grid` to the next row's guess and returns false (the caller takes the per-row path). Needs
/// fused_gradient_applies and a guess.
bool add_fused_gradient(const TermRequest& request, PartialSums& sums, std::int64_t first_slot,
                        const GradientRows<float>::Stencil& truth, const GradientRows<float>::Stencil& prediction,
                        double factor, std::int64_t cols, std::optional<int>& grid);

}  // namespace gridshard::detail
