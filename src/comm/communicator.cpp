#include "gridshard/comm/communicator.hpp"

#include <utility>

#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {

Communicator::Communicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    if (comm == MPI_COMM_NULL) {
        throw ArgumentError("communicator must not be MPI_COMM_NULL");
    }
    GRIDSHARD_MPI(MPI_Comm_rank, comm_, &rank_);
    GRIDSHARD_MPI(MPI_Comm_size, comm_, &size_);
}

Communicator Communicator::world() {
    return Communicator(MPI_COMM_WORLD, false);
}
Communicator Communicator::borrow(MPI_Comm comm) {
    return Communicator(comm, false);
}
Communicator Communicator::adopt(MPI_Comm comm) {
    return Communicator(comm, true);
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      owned_(std::exchange(other.owned_, false)),
      rank_(other.rank_),
      size_(other.size_) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
    if (this != &other) {
        release();
        comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
        owned_ = std::exchange(other.owned_, false);
        rank_ = other.rank_;
        size_ = other.size_;
    }
    return *this;
}

Communicator::~Communicator() {
    release();
}

void Communicator::release() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && comm_ != MPI_COMM_NULL && !finalized) {
        MPI_Comm_free(&comm_);  // a destructor cannot throw; a failed free only leaks the handle
    }
    comm_ = MPI_COMM_NULL;
    owned_ = false;
}

Communicator Communicator::duplicate() const {
    MPI_Comm copy = MPI_COMM_NULL;
    GRIDSHARD_MPI(MPI_Comm_dup, comm_, &copy);
    Communicator result(copy, true);
    GRIDSHARD_MPI(MPI_Comm_set_errhandler, copy, MPI_ERRORS_RETURN);
    return result;
}

Communicator Communicator::split(int color, int key) const {
    MPI_Comm part = MPI_COMM_NULL;
    GRIDSHARD_MPI(MPI_Comm_split, comm_, color, key, &part);
    Communicator result(part, true);
    GRIDSHARD_MPI(MPI_Comm_set_errhandler, part, MPI_ERRORS_RETURN);
    return result;
}

Communicator Communicator::split_shared_memory() const {
    MPI_Comm part = MPI_COMM_NULL;
    GRIDSHARD_MPI(MPI_Comm_split_type, comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &part);
    Communicator result(part, true);
    GRIDSHARD_MPI(MPI_Comm_set_errhandler, part, MPI_ERRORS_RETURN);
    return result;
}

void Communicator::barrier() const {
    GRIDSHARD_MPI(MPI_Barrier, comm_);
}

}  // namespace gridshard
