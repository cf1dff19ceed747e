#pragma once
// The per-row path of the term engine's weighted terms (term_engine.cpp): the sums of a masked row's values, squares
// and products, times its row weight or its point weights, exact with exact sums (each product and its rounding
// error summed, docs/design.md §5), rounded once per point with plain ones. Internal to the metrics layer; no MPI
// calls.

#include <cstdint>

#include "partial_sums.hpp"
#include "term_rows.hpp"

namespace gridshard::detail {

/// A per-point product of two masked rows, in double: `(y - x)^2` or `x y`.
enum class PointProduct { difference_square, cross };

/// Adds the weighted sum of the squares of one masked row `x` to `slot`: exactly with exact sums (so the variance's
/// W Q - S^2 loses nothing to an offset, docs/design.md §5), the rounded squares with plain ones. `weight` holds
/// the masked point weights (with point weights); `work` has room for 4 rows of `row.cols` doubles.
template <class V>
void add_weighted_square(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                         double* __restrict work);

/// Adds the weighted sum of one masked row to `slot`: `a_j x_j` with per-point weights (`weight` holds the masked
/// weights), exactly with exact sums (each product and its rounding error), `factor * sum x_j` with a row weight
/// (exact as it stands). `work` (2 rows) holds the products.
template <class V>
void add_weighted(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                  double* __restrict work);

/// Adds the weighted sum of the per-point `product` (in double) of two masked rows to `slot`. `work`: 1 row.
template <class V>
void add_weighted_product(PartialSums& sums, std::int64_t slot, const V* x, const V* y, const Row<V>& row,
                          const double* weight, double* __restrict work, PointProduct product);

/// Adds the weight of the `valid` points of a row to `slot`: the masked weights, or the count times the row weight.
template <class V>
void add_valid_weight(PartialSums& sums, std::int64_t slot, const Row<V>& row, const double* weight,
                      std::int64_t valid);

}  // namespace gridshard::detail
