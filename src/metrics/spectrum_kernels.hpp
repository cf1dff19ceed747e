#pragma once
// The Legendre stage of the spherical power spectrum (spherical_transform.cpp, docs/spectrum.md): one step of the
// recurrence over the rows of one hemisphere, and the sums `sum_k p[k] column[k]` of many columns against one
// or two Legendre functions, each sum in one summation order that neither the instruction set nor the columns
// and functions summed along with it change. Internal; no MPI calls.

#include <cstddef>

namespace gridshard::detail {

/// One degree up the recurrence: `out[k] = x[k] * a * p[k] - b * previous[k]` for k < n, the expression of
/// torch-harmonics' _precompute_legpoly evaluated as written, each row on its own (any vector width gives the
/// same bits). `out` may be `previous`.
void legendre_step(const double* x, double a, double b, const double* p, const double* previous, double* out,
                   std::size_t n) noexcept;

/// `out[j] = sum_{k < n} p[k] * columns[j][k]` for j < count, each sum in this order (the fixed order):
///
///   eight partial sums from +0, lane r adding the products of rows k = r, r + 8, r + 16, ... in ascending k,
///   then the tree `((lane0 + lane1) + (lane2 + lane3)) + ((lane4 + lane5) + (lane6 + lane7))`.
///
/// The columns are summed a few at a time so that `p` is loaded once for several of them, and each lane is one
/// element of a vector register, but nothing of one sum mixes with another: every sum is the one it is alone,
/// whatever `count`, the grouping or the instruction set. `n` is a multiple of 8: pad the rows with zeros (a
/// lane that starts at +0 is never -0, so adding +0 leaves it as it is: a padded sum is the sum of the rows,
/// bit for bit).
void fixed_order_dots(const double* p, const double* const* columns, std::size_t count, std::size_t n,
                      double* out) noexcept;

/// fixed_order_dots of the same columns against two functions at once: `out_p[j]` as fixed_order_dots(p) and
/// `out_q[j]` as fixed_order_dots(q), the same bits, each column value loaded once for both.
void fixed_order_dot_pairs(const double* p, const double* q, const double* const* columns, std::size_t count,
                           std::size_t n, double* out_p, double* out_q) noexcept;

}  // namespace gridshard::detail
