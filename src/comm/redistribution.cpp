#include "gridshard/comm/redistribution.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

// Displacements of counts laid out one after another (each within MPI's int counts).
std::vector<int> displacements_of(std::span<const int> counts, const char* what) {
    std::vector<int> displacements(counts.size(), 0);
    std::int64_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
        displacements[r] = as_int_count(at, what);
        at += counts[r];
    }
    return displacements;
}

}  // namespace

int as_int_count(std::int64_t count, const char* what) {
    if (count > std::numeric_limits<int>::max()) {
        throw ArgumentError(std::string(what) + ": " + std::to_string(count) +
                            " values to move to one rank exceed MPI's int counts");
    }
    return static_cast<int>(count);
}

template <class T>
OwnedRows<T> rows_to_owners(const Communicator& comm, const std::vector<Box>& boxes, GridShape grid,
                            std::span<const T> shard, std::int64_t channels, const std::vector<int>& owner) {
    const auto ranks = static_cast<std::size_t>(comm.size());
    const int me = comm.rank();
    const Box& mine = boxes[static_cast<std::size_t>(me)];
    std::vector<int> send_counts(ranks, 0);
    std::vector<int> receive_counts(ranks, 0);
    OwnedRows<T> owned;
    for (std::int64_t key = 0; key < channels * grid.nlat; ++key) {
        if (owner[static_cast<std::size_t>(key)] == me) {
            owned.keys.push_back(key);
        }
    }
    owned.in_shard.assign(owned.keys.size(), nullptr);
    owned.assembled.assign(owned.keys.size(), 0);
    std::vector<std::int64_t> slot(static_cast<std::size_t>(channels * grid.nlat), -1);
    for (std::size_t s = 0; s < owned.keys.size(); ++s) {
        slot[static_cast<std::size_t>(owned.keys[s])] = static_cast<std::int64_t>(s);
    }
    // The packing order is (destination, c, k) on the sender and (source, c, k) on the receiver.
    std::vector<std::vector<std::int64_t>> to(ranks);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = mine.lat.begin; k < mine.lat.end; ++k) {
            const int r = owner[static_cast<std::size_t>(c * grid.nlat + k)];
            to[static_cast<std::size_t>(r)].push_back(c * mine.lat.size() + (k - mine.lat.begin));
        }
    }
    // A rank's own rows are read in its shard when it holds them whole, or copied, not sent to itself.
    const auto self = static_cast<std::size_t>(me);
    const auto cols = static_cast<std::size_t>(mine.lon.size());
    const bool whole_rows = mine.lon.begin == 0 && mine.lon.end == grid.nlon;
    const auto key_of_local_row = [&](std::int64_t local_row) {
        return (local_row / mine.lat.size()) * grid.nlat + mine.lat.begin + local_row % mine.lat.size();
    };
    for (const std::int64_t local_row : to[self]) {
        if (whole_rows) {
            owned.in_shard[static_cast<std::size_t>(slot[static_cast<std::size_t>(key_of_local_row(local_row))])] =
                shard.data() + static_cast<std::size_t>(local_row) * cols;
        }
    }
    std::size_t assembled_rows = 0;
    for (std::size_t s = 0; s < owned.keys.size(); ++s) {
        if (owned.in_shard[s] == nullptr) {
            owned.assembled[s] = assembled_rows++;
        }
    }
    std::int64_t send_total = 0;
    std::int64_t receive_total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        if (r == self) {
            continue;
        }
        send_counts[r] = as_int_count(static_cast<std::int64_t>(to[r].size()) * mine.lon.size(), "rows to owners");
        send_total += send_counts[r];
        const Box& theirs = boxes[r];
        std::int64_t rows = 0;
        for (const std::int64_t key : owned.keys) {
            const std::int64_t k = key % grid.nlat;
            rows += (k >= theirs.lat.begin && k < theirs.lat.end) ? 1 : 0;
        }
        receive_counts[r] = as_int_count(rows * theirs.lon.size(), "rows to owners");
        receive_total += receive_counts[r];
    }
    std::vector<T> send(static_cast<std::size_t>(send_total));
    std::vector<int> send_displacements(ranks, 0);
    std::vector<int> receive_displacements(ranks, 0);
    std::size_t at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        send_displacements[r] = static_cast<int>(at);
        if (r == self) {
            continue;
        }
        for (const std::int64_t local_row : to[r]) {
            std::copy_n(shard.data() + static_cast<std::size_t>(local_row) * cols, cols, send.data() + at);
            at += cols;
        }
    }
    for (std::size_t r = 1; r < ranks; ++r) {
        receive_displacements[r] = receive_displacements[r - 1] + receive_counts[r - 1];
    }
    std::vector<T> received(static_cast<std::size_t>(receive_total));
    GRIDSHARD_MPI(MPI_Alltoallv, send.data(), send_counts.data(), send_displacements.data(), detail::mpi_datatype<T>(),
                  received.data(), receive_counts.data(), receive_displacements.data(), detail::mpi_datatype<T>(),
                  comm.native());
    owned.values.assign(assembled_rows * static_cast<std::size_t>(grid.nlon), 0.0);
    at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        const Box& theirs = boxes[r];
        if (r == self) {
            continue;
        }
        for (std::size_t s = 0; s < owned.keys.size(); ++s) {
            const std::int64_t k = owned.keys[s] % grid.nlat;
            if (k < theirs.lat.begin || k >= theirs.lat.end) {
                continue;
            }
            double* row = owned.values.data() + owned.assembled[s] * static_cast<std::size_t>(grid.nlon);
            for (std::int64_t j = theirs.lon.begin; j < theirs.lon.end; ++j) {
                row[j] = static_cast<double>(received[at++]);
            }
        }
    }
    for (const std::int64_t local_row : to[self]) {
        if (whole_rows) {
            break;
        }
        const auto s = static_cast<std::size_t>(slot[static_cast<std::size_t>(key_of_local_row(local_row))]);
        const T* from = shard.data() + static_cast<std::size_t>(local_row) * cols;
        double* row = owned.values.data() + owned.assembled[s] * static_cast<std::size_t>(grid.nlon) + mine.lon.begin;
        for (std::size_t j = 0; j < cols; ++j) {
            row[j] = static_cast<double>(from[j]);
        }
    }
    return owned;
}

std::vector<double> alltoallv(const Communicator& comm, std::span<const double> send, std::span<const int> send_counts,
                              std::span<const int> receive_counts) {
    const std::vector<int> send_displacements = displacements_of(send_counts, "all-to-all");
    const std::vector<int> receive_displacements = displacements_of(receive_counts, "all-to-all");
    std::int64_t total = 0;
    for (const int count : receive_counts) {
        total += count;
    }
    std::vector<double> received(static_cast<std::size_t>(total));
    GRIDSHARD_MPI(MPI_Alltoallv, send.data(), send_counts.data(), send_displacements.data(), MPI_DOUBLE,
                  received.data(), receive_counts.data(), receive_displacements.data(), MPI_DOUBLE, comm.native());
    return received;
}

template <class T>
std::vector<T> allgatherv(const Communicator& comm, std::span<const T> mine, std::span<const int> counts) {
    const std::vector<int> displacements = displacements_of(counts, "all-gather");
    std::int64_t total = 0;
    for (const int count : counts) {
        total += count;
    }
    std::vector<T> gathered(static_cast<std::size_t>(total));
    GRIDSHARD_MPI(MPI_Allgatherv, mine.data(), static_cast<int>(mine.size()), detail::mpi_datatype<T>(),
                  gathered.data(), counts.data(), displacements.data(), detail::mpi_datatype<T>(), comm.native());
    return gathered;
}

std::vector<std::int64_t> allgather(const Communicator& comm, std::span<const std::int64_t> mine) {
    std::vector<std::int64_t> gathered(mine.size() * static_cast<std::size_t>(comm.size()));
    GRIDSHARD_MPI(MPI_Allgather, mine.data(), as_int_count(static_cast<std::int64_t>(mine.size()), "all-gather"),
                  MPI_INT64_T, gathered.data(), as_int_count(static_cast<std::int64_t>(mine.size()), "all-gather"),
                  MPI_INT64_T, comm.native());
    return gathered;
}

template std::vector<double> allgatherv<double>(const Communicator&, std::span<const double>, std::span<const int>);
template std::vector<std::uint32_t> allgatherv<std::uint32_t>(const Communicator&, std::span<const std::uint32_t>,
                                                              std::span<const int>);
template std::vector<std::uint64_t> allgatherv<std::uint64_t>(const Communicator&, std::span<const std::uint64_t>,
                                                              std::span<const int>);

template OwnedRows<float> rows_to_owners<float>(const Communicator&, const std::vector<Box>&, GridShape,
                                                std::span<const float>, std::int64_t, const std::vector<int>&);
template OwnedRows<double> rows_to_owners<double>(const Communicator&, const std::vector<Box>&, GridShape,
                                                  std::span<const double>, std::int64_t, const std::vector<int>&);

}  // namespace gridshard
