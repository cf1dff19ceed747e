#pragma once
/// @file
/// Refusing, before anything is allocated, a run whose working set would not fit in memory.

#include <cstdint>
#include <string>

#include "gridshard/comm/communicator.hpp"

namespace gridshard {

/// Collective over `comm`: every rank passes the bytes it is about to allocate and a description of what
/// for (e.g. "grid 721 x 1440, 4 steps, 3 channels"). The ranks that share a node add up their bytes and
/// compare the total with the memory available there (available_memory_bytes(), read by each node's
/// first rank); when any node's total does not fit, every rank raises ArgumentError naming the
/// description, the bytes needed on that node and per rank, and the bytes available. Unknown available
/// memory passes. One split of `comm` by node, a reduce and a broadcast within each node, then the
/// agreement of check_collectively.
void check_memory_fits(const Communicator& comm, std::uint64_t bytes, const std::string& description);

}  // namespace gridshard
