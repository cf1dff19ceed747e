"""Under mpirun -n 2: rank 1's main thread waits in a barrier rank 0 never joins; another thread of rank 1 calls
ACE's abort() (gridshard's backend) after a second, as ACE's termination listener would. The job must end at once
(the barrier never returns); rank 0 sleeps, and says so if it ever wakes."""
import threading
import time

from mpi4py import MPI

from gridshard.ace import GridshardBackend

backend = GridshardBackend()  # collective over the world, 1x1 spatial: every rank data-parallel
if MPI.COMM_WORLD.Get_rank() == 1:
    threading.Timer(1.0, backend.abort).start()
    MPI.COMM_WORLD.Barrier()  # rank 0 never comes: only abort ends this
    print("rank 1: the barrier returned", flush=True)
else:
    time.sleep(60)
    print("rank 0: still running after 60 s", flush=True)
