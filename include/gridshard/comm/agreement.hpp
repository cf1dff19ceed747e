#pragma once
/// @file
/// Collective argument checks, so that an error only some ranks can see is raised on every rank
/// instead of leaving the others waiting in a collective (DESIGN §6).

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gridshard/comm/communicator.hpp"

namespace gridshard::detail {

/// Collective over `comm`: one allreduce of 1 + 2 * values.size() int64 on success.
/// Every rank passes its own error message (empty when its arguments are fine) and values that
/// must be equal on every rank (counts, shapes), named by `what`. If any rank has an error, every
/// rank throws ArgumentError with the lowest such rank's message (one more broadcast); if the
/// values differ, every rank throws ArgumentError naming `what` and the smallest and largest values.
void agree_or_throw(const Communicator& comm, const std::string& local_error,
                    std::initializer_list<std::int64_t> values = {}, std::string_view what = "");

}  // namespace gridshard::detail
