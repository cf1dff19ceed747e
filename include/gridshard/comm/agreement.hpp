#pragma once
/// @file
/// Collective argument checks, so that an error only some ranks can see is raised on every rank
/// instead of leaving the others waiting in a collective (docs/design.md §6).

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {

/// What kind of failure a rank saw: bad input or arguments (ArgumentError, exit status 2) or a failure
/// of the system (SystemError, MpiError, memory exhausted: exit status 1).
enum class ErrorKind : int { argument = 0, system = 1 };

/// A failure one rank saw, to be agreed on with check_collectively. Empty when the rank is fine.
struct LocalFailure {
    std::string message;
    ErrorKind kind = ErrorKind::argument;
    [[nodiscard]] bool failed() const noexcept { return !message.empty(); }
};

/// Runs `work()` and returns what it threw as a LocalFailure (nothing when it returned): ArgumentError
/// is ErrorKind::argument; SystemError, MpiError, std::bad_alloc and any other exception are
/// ErrorKind::system. No MPI calls of its own.
template <class Work>
[[nodiscard]] LocalFailure attempt(Work&& work) noexcept {
    try {
        work();
        return {};
    } catch (const ArgumentError& error) {
        return {error.what(), ErrorKind::argument};
    } catch (const std::bad_alloc&) {
        return {"out of memory", ErrorKind::system};
    } catch (const std::exception& error) {
        return {error.what(), ErrorKind::system};
    } catch (...) {
        return {"unknown failure", ErrorKind::system};
    }
}

/// Collective over `comm`: raises ArgumentError on every rank when any rank passes a non-empty message
/// (the lowest such rank's message), so an error only some ranks can see does not leave the others
/// waiting in a later collective. One small allreduce; two broadcasts more on error.
void check_collectively(const Communicator& comm, const std::string& local_error);

/// Collective over `comm`: as above, raising on every rank the lowest failing rank's failure as
/// ArgumentError or SystemError, by its kind.
void check_collectively(const Communicator& comm, const LocalFailure& failure);

/// Collective over `comm`: every rank passes its own failure (empty when its arguments are fine) and
/// `values` that must be equal on every rank (counts, shapes, hashes of options), named by `what` in the
/// message. If any rank failed, every rank throws the lowest such rank's failure (ArgumentError, or
/// SystemError for ErrorKind::system); else, if the values differ between ranks, every rank throws
/// ArgumentError naming `what` and the smallest and largest values. Every rank must pass the same number of
/// values. One MPI_Allreduce of 1 + 2 * values.size() int64 on success; two broadcasts more on failure.
/// check_collectively is the same without values.
/// @code
///   void open_inputs(const gridshard::Communicator& comm, const std::string& problem, std::int64_t nlat,
///                    std::int64_t nlon) {
///       // Throws on every rank when any rank saw a problem or the ranks' grids differ.
///       gridshard::agree_or_throw(comm, problem, {nlat, nlon}, "the grid (nlat, nlon)");
///   }
/// @endcode
void agree_or_throw(const Communicator& comm, const LocalFailure& failure,
                    std::initializer_list<std::int64_t> values = {}, std::string_view what = "");
/// The same with an argument error's message (empty when this rank's arguments are fine).
inline void agree_or_throw(const Communicator& comm, const std::string& local_error,
                           std::initializer_list<std::int64_t> values = {}, std::string_view what = "") {
    agree_or_throw(comm, LocalFailure{local_error, ErrorKind::argument}, values, what);
}

/// Collective over `comm`: the elementwise sum of `values` over every rank, in place (one
/// MPI_Allreduce(MPI_SUM)); every rank holds the sums. No argument check of its own: the ranks must have
/// agreed on the length already (with agree_or_throw), or the call may hang or fail in MPI. The int64 sums
/// are exact (an overflow is the caller's to rule out); the double ones are in MPI's order of summation.
void allreduce_sum_in_place(const Communicator& comm, std::span<std::int64_t> values);
void allreduce_sum_in_place(const Communicator& comm, std::span<std::int32_t> values);
void allreduce_sum_in_place(const Communicator& comm, std::span<double> values);
/// Collective over `comm`: the elementwise least of `values` over every rank, in place (one MPI_Allreduce(MPI_MIN));
/// the same contract as allreduce_sum_in_place.
void allreduce_min_in_place(const Communicator& comm, std::span<std::int64_t> values);

}  // namespace gridshard

namespace gridshard::detail {

// The names the library's own code has used for the agreement (kept so that it need not change; the
// front ends use gridshard::agree_or_throw and gridshard::allreduce_sum_in_place).
using ::gridshard::agree_or_throw;
using ::gridshard::allreduce_sum_in_place;

}  // namespace gridshard::detail
