#pragma once
/// @file
/// Collective argument checks, so that an error only some ranks can see is raised on every rank
/// instead of leaving the others waiting in a collective (DESIGN §6).

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "gridshard/comm/communicator.hpp"

namespace gridshard {

/// Collective over `comm`: raises ArgumentError on every rank when any rank passes a non-empty message
/// (the lowest such rank's message), so an error only some ranks can see does not leave the others
/// waiting in a later collective. One small allreduce; a broadcast more on error.
void check_collectively(const Communicator& comm, const std::string& local_error);

}  // namespace gridshard

namespace gridshard::detail {

/// Collective over `comm`: one allreduce of 1 + 2 * values.size() int64 on success.
/// Every rank passes its own error message (empty when its arguments are fine) and values that
/// must be equal on every rank (counts, shapes), named by `what`. If any rank has an error, every
/// rank throws ArgumentError with the lowest such rank's message (one more broadcast); if the
/// values differ, every rank throws ArgumentError naming `what` and the smallest and largest values.
void agree_or_throw(const Communicator& comm, const std::string& local_error,
                    std::initializer_list<std::int64_t> values = {}, std::string_view what = "");

/// Collective over `comm`: one MPI_Allreduce(MPI_SUM) of `values`, in place, without an argument check.
/// For callers that have agreed on the length already (with agree_or_throw); every rank holds the sums.
void allreduce_sum_in_place(const Communicator& comm, std::span<std::int64_t> values);
void allreduce_sum_in_place(const Communicator& comm, std::span<double> values);

}  // namespace gridshard::detail
