#pragma once
/// @file
/// How many threads each rank's kernels use, so that several ranks on one node never oversubscribe it.

#include <cstdint>

#include "gridshard/comm/communicator.hpp"

namespace gridshard {

/// Collective over `comm` (one split by node): unless OMP_NUM_THREADS is set, gives OpenMP a default of
/// the cores this rank may use: the CPUs of its affinity mask, but no more than the node's CPUs divided
/// by the ranks of `comm` on the node (at least 1). Returns the threads the kernels will use; 1 when the
/// library was built without OpenMP.
int use_cores_of_this_rank(const Communicator& comm);

/// The fewest points of work the metrics give one thread of a rank (default 32768): waking a thread costs
/// microseconds and a point about a nanosecond, so a small field (an (8, 16) call from Python) runs on one.
/// Results are the same bits whatever it is; tests of that set 1, so that even a small field is shared.
/// No MPI calls.
void set_min_points_per_thread(std::int64_t points) noexcept;
[[nodiscard]] std::int64_t min_points_per_thread() noexcept;

}  // namespace gridshard
