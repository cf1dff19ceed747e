"""One rank raises an exception that no one catches while the others wait for it in a collective
(test_uncaught_exception.py runs it under mpirun). ``uncaught_case.py RAISER [off]``: world rank RAISER
raises; ``off`` builds the Distributed with abort_on_exception=False. The waiting ranks give up after
WAIT_S seconds, print that they were left running, and leave without MPI's finalisation, which ends the job
in bounded time whether or not gridshard ended it first."""
import os
import sys
import time

from mpi4py import MPI

import gridshard

WAIT_S = 10
world = MPI.COMM_WORLD
raiser = int(sys.argv[1])
options = {"abort_on_exception": False} if "off" in sys.argv[2:] else {}
dist = gridshard.Distributed(**options)
dist.barrier()
if world.Get_rank() == raiser:
    raise RuntimeError("raised on purpose by one rank")
waiting = world.Ibarrier()  # the raising rank never comes
start = time.monotonic()
while not waiting.Test() and time.monotonic() - start < WAIT_S:
    time.sleep(0.05)
print(f"rank {world.Get_rank()}: still running {WAIT_S} s after the exception", flush=True)
os._exit(0)
