#include "gridshard/comm/agreement.hpp"

#include <limits>
#include <vector>

#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {

namespace {

std::string join(const std::vector<std::int64_t>& values) {
    std::string text;
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (k > 0) {
            text += ',';
        }
        text += std::to_string(values[k]);
    }
    return text;
}

}  // namespace

void check_collectively(const Communicator& comm, const std::string& local_error) {
    agree_or_throw(comm, LocalFailure{local_error, ErrorKind::argument});
}

void check_collectively(const Communicator& comm, const LocalFailure& failure) {
    agree_or_throw(comm, failure);
}

void agree_or_throw(const Communicator& comm, const LocalFailure& failure, std::initializer_list<std::int64_t> values,
                    std::string_view what) {
    const std::string& local_error = failure.message;
    constexpr std::int64_t no_error = std::numeric_limits<std::int64_t>::max();
    // One MIN-allreduce carries: the lowest failing rank, min(values), min(-values) = -max(values).
    std::vector<std::int64_t> buffer;
    buffer.reserve(1 + 2 * values.size());
    buffer.push_back(local_error.empty() ? no_error : comm.rank());
    for (std::int64_t v : values) {
        buffer.push_back(v);
    }
    for (std::int64_t v : values) {
        buffer.push_back(-v);
    }
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_INT64_T, MPI_MIN,
                  comm.native());

    if (buffer[0] != no_error) {
        const int failing_rank = static_cast<int>(buffer[0]);
        std::string message = local_error;
        int header[2] = {static_cast<int>(message.size()), static_cast<int>(failure.kind)};
        GRIDSHARD_MPI(MPI_Bcast, header, 2, MPI_INT, failing_rank, comm.native());
        message.resize(static_cast<std::size_t>(header[0]));
        GRIDSHARD_MPI(MPI_Bcast, message.data(), header[0], MPI_CHAR, failing_rank, comm.native());
        if (header[1] == static_cast<int>(ErrorKind::system)) {
            throw SystemError(message);
        }
        throw ArgumentError(message);
    }
    const std::size_t n = values.size();
    std::vector<std::int64_t> lowest(buffer.begin() + 1, buffer.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    std::vector<std::int64_t> highest(n);
    for (std::size_t k = 0; k < n; ++k) {
        highest[k] = -buffer[1 + n + k];
    }
    if (lowest != highest) {
        throw ArgumentError(std::string(what) + " must be the same on every rank, got values from (" + join(lowest) +
                            ") to (" + join(highest) + ")");
    }
}

void allreduce_sum_in_place(const Communicator& comm, std::span<std::int64_t> values) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_SUM,
                  comm.native());
}

void allreduce_sum_in_place(const Communicator& comm, std::span<std::int32_t> values) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT32_T, MPI_SUM,
                  comm.native());
}

void allreduce_min_in_place(const Communicator& comm, std::span<std::int64_t> values) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MIN,
                  comm.native());
}

void allreduce_sum_in_place(const Communicator& comm, std::span<double> values) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                  comm.native());
}

}  // namespace gridshard
