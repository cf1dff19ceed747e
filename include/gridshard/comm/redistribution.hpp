#pragma once
/// @file
/// Moving a sharded field's data to the ranks that work on it: whole rows to their owners, and the all-to-all and
/// all-gather of variable counts the power spectra use (metrics/spectrum.hpp, docs/spectrum.md). A rank never sends
/// to itself: what it keeps is read or copied where it is.

#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {

/// `count` as an MPI count; throws ArgumentError naming `what` when it exceeds int. No MPI calls.
[[nodiscard]] int as_int_count(std::int64_t count, const char* what);

/// The whole rows `(channel, global row)` a rank owns, in (c, k) order: a row this rank's shard holds whole is read
/// where it is (`in_shard`), the others are assembled in `values`, as doubles (converted exactly).
template <class T>
struct OwnedRows {
    std::vector<std::int64_t> keys;      ///< c * nlat + k
    std::vector<const T*> in_shard;      ///< per row: the row in this rank's shard, or null
    std::vector<std::size_t> assembled;  ///< per row not in the shard: its index in `values`
    std::vector<double> values;          ///< the assembled rows, nlon values each
};

/// Whole rows of the shards `(channels, box)` of a `grid`-sized field at their owners: `owner[c * nlat + k]` is a
/// rank of `comm`, `boxes[r]` the box of rank r of `comm`; `shard` is this rank's. Collective over `comm`: one
/// MPI_Alltoallv of T (this rank's rows that others own, and theirs that it owns). The result points into `shard`.
template <class T>
[[nodiscard]] OwnedRows<T> rows_to_owners(const Communicator& comm, const std::vector<Box>& boxes, GridShape grid,
                                          std::span<const T> shard, std::int64_t channels,
                                          const std::vector<int>& owner);

/// `send` holds, rank after rank, `send_counts[r]` values for rank r of `comm`; returns, rank after rank, the
/// `receive_counts[r]` values rank r sent this one. Collective over `comm`: one MPI_Alltoallv of double.
[[nodiscard]] std::vector<double> alltoallv(const Communicator& comm, std::span<const double> send,
                                            std::span<const int> send_counts, std::span<const int> receive_counts);

/// Every rank's `mine`, rank after rank (`counts[r]` values from rank r of `comm`), on every rank. Collective over
/// `comm`: one MPI_Allgatherv of T (double, std::uint32_t or std::uint64_t).
template <class T>
[[nodiscard]] std::vector<T> allgatherv(const Communicator& comm, std::span<const T> mine, std::span<const int> counts);

/// Every rank's `mine`, rank after rank, on every rank; every rank gives as many. Collective over `comm`: one
/// MPI_Allgather of int64.
[[nodiscard]] std::vector<std::int64_t> allgather(const Communicator& comm, std::span<const std::int64_t> mine);

}  // namespace gridshard
