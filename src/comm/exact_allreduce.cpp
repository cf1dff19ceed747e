#include "gridshard/comm/exact_allreduce.hpp"

#include <array>
#include <cstdint>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"

namespace gridshard {

void allreduce_exact(const Communicator& comm, std::span<ExactSum> sums, LimbWindow window) {
    if (window.count > 0) {
        const auto width = static_cast<std::size_t>(window.count) + 3;
        std::vector<std::int64_t> packed(sums.size() * width + 1, 0);  // the last word: sums that did not fit
        for (std::size_t i = 0; i < sums.size(); ++i) {
            if (!sums[i].pack_window(std::span(packed).subspan(i * width, width), window.first)) {
                ++packed.back();
            }
        }
        allreduce_sum_in_place(comm, packed);
        if (packed.back() == 0) {
            for (std::size_t i = 0; i < sums.size(); ++i) {
                sums[i] = ExactSum::unpack_window(std::span(packed).subspan(i * width, width), window.first);
            }
            return;
        }
    }
    std::vector<std::int64_t> full(sums.size() * ExactSum::wire_size, 0);
    for (std::size_t i = 0; i < sums.size(); ++i) {
        sums[i].pack(std::span(full).subspan(i * ExactSum::wire_size, ExactSum::wire_size));
    }
    allreduce_sum_in_place(comm, full);
    for (std::size_t i = 0; i < sums.size(); ++i) {
        sums[i] = ExactSum::unpack(std::span(full).subspan(i * ExactSum::wire_size, ExactSum::wire_size));
    }
}

ExponentRange allreduce_range(const Communicator& comm, ExponentRange range) {
    std::array<int, 2> bounds{range.lowest, -range.highest};
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, bounds.data(), 2, MPI_INT, MPI_MIN, comm.native());
    return {bounds[0], -bounds[1]};
}

}  // namespace gridshard
