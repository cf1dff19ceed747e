"""A deliberately stuck run for the deadlock guard's own test: rank 0 waits in a barrier the others never
enter. The guard (mpi_pytest's deadline) must end it with a traceback instead of a hang."""
from mpi4py import MPI


def test_rank_zero_waits_alone():
    if MPI.COMM_WORLD.Get_rank() == 0:
        MPI.COMM_WORLD.Barrier()
