#include "gridshard/comm/memory_check.hpp"

#include <algorithm>
#include <cstdint>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/memory.hpp"

namespace gridshard {

void check_memory_fits(const Communicator& comm, std::uint64_t bytes, const std::string& description) {
    const Communicator node = comm.split_shared_memory();
    // Sum and maximum of the ranks' needs on this node, and what the node has (read once, by its first rank).
    std::uint64_t need[2] = {bytes, bytes};
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, &need[0], 1, MPI_UINT64_T, MPI_SUM, node.native());
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, &need[1], 1, MPI_UINT64_T, MPI_MAX, node.native());
    std::uint64_t available[2] = {0, 0};  // {known, bytes}
    if (node.rank() == 0) {
        if (const auto free = available_memory_bytes()) {
            available[0] = 1;
            available[1] = *free;
        }
    }
    GRIDSHARD_MPI(MPI_Bcast, available, 2, MPI_UINT64_T, 0, node.native());
    std::string error;
    if (node.rank() == 0 && available[0] != 0 && need[0] > available[1]) {
        error = "not enough memory for " + description + ": it needs " + format_bytes(need[0]) + " on this node (" +
                std::to_string(node.size()) + " rank" + (node.size() == 1 ? "" : "s") + ", up to " +
                format_bytes(need[1]) + " per rank) but " + format_bytes(available[1]) +
                " are available; use more nodes, a finer mesh or fewer steps";
    }
    check_collectively(comm, error);
}

}  // namespace gridshard
