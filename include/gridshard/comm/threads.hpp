#pragma once
/// @file
/// How many threads each rank's kernels use, so that several ranks on one node never oversubscribe it.

#include "gridshard/comm/communicator.hpp"

namespace gridshard {

/// Collective over `comm` (one split by node): unless OMP_NUM_THREADS is set, gives OpenMP a default of
/// the cores this rank may use: the CPUs of its affinity mask, but no more than the node's CPUs divided
/// by the ranks of `comm` on the node (at least 1). Returns the threads the kernels will use; 1 when the
/// library was built without OpenMP.
int use_cores_of_this_rank(const Communicator& comm);

}  // namespace gridshard
