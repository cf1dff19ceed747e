#include "gridshard/comm/environment.hpp"

#include <mpi.h>

#include <stdlib.h>  // setenv (POSIX)
#include <cstdlib>

#include "gridshard/comm/mpi_check.hpp"

namespace gridshard {

namespace {

// True when no launcher (mpirun, mpiexec, srun, a PMI/PMIx process manager) started this process.
bool started_without_launcher() {
    for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"}) {
        if (std::getenv(variable) != nullptr) {
            return false;
        }
    }
    return true;
}

}  // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
    int initialized = 0;
    GRIDSHARD_MPI(MPI_Initialized, &initialized);
    if (!initialized) {
        if (started_without_launcher()) {
            // A process started plainly runs alone: Open MPI then needs neither its helper daemon nor
            // its network transports, and probing them costs ~0.3 s of a ~0.02 s start. Settings the
            // user made win (setenv does not overwrite); other MPI implementations ignore these.
            setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
            setenv("OMPI_MCA_pml", "ob1", 0);
        }
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

bool MpiEnvironment::launched() noexcept {
    return !started_without_launcher();
}

void MpiEnvironment::abort(int exit_code) noexcept {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

}  // namespace gridshard
