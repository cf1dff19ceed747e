#pragma once
/// @file
/// Exact sums over a group of ranks (numerics/exact_sum.hpp): the merge of every rank's accumulators is an integer
/// sum of their limbs, so the result does not depend on the order of ranks, the mesh or the threads that formed
/// them (docs/design.md §5).

#include <span>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {

/// Replaces each of `sums` by its exact sum over every rank of `comm`; every rank must hold as many sums (agree on
/// the count first). Collective over `comm`: one MPI_Allreduce of every sum's full limbs (ExactSum::wire_size words
/// each), or, with a `window` of some limbs, of those limbs only (ExactSum::pack_window's compact form, one word more
/// counting the sums that did not fit it), followed by a second one of the full limbs should some rank's sum not
/// fit. Every rank holds the merged sums.
void allreduce_exact(const Communicator& comm, std::span<ExactSum> sums, LimbWindow window = {});

/// `range` merged over every rank of `comm` (the lowest of the lowest exponents, the highest of the highest), for
/// a window every rank's sums fit (window_for_range). Collective over `comm`: one MPI_Allreduce of two int.
[[nodiscard]] ExponentRange allreduce_range(const Communicator& comm, ExponentRange range);

}  // namespace gridshard
