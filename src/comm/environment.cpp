#include "gridshard/comm/environment.hpp"

#include <mpi.h>

#include <cstdlib>

#include "gridshard/comm/mpi_check.hpp"

namespace gridshard {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
    int initialized = 0;
    GRIDSHARD_MPI(MPI_Initialized, &initialized);
    if (!initialized) {
        int provided = 0;
        GRIDSHARD_MPI(MPI_Init_thread, argc, argv, MPI_THREAD_FUNNELED, &provided);
        initialized_here_ = true;
    }
    GRIDSHARD_MPI(MPI_Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiEnvironment::~MpiEnvironment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialized_here_ && !finalized) {
        MPI_Finalize();
    }
}

void MpiEnvironment::abort(int exit_code) noexcept {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

}  // namespace gridshard
