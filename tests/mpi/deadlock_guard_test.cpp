// Checks the harness itself: a test that deadlocks must end the run with a DEADLOCK message within the
// deadline instead of hanging. ctest passes this binary only when that message appears.

#include <gtest/gtest.h>
#include <mpi.h>

namespace {

TEST(DeadlockGuard, ARankWaitingForAMessageThatNeverComes) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        int value = 0;
        MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    // The other ranks go on to the harness's end-of-test combination and wait there too.
}

}  // namespace
