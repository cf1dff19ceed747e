"""One rank raises an exception that no one catches, or exits with a non-zero status, while the others wait for it
in a collective (test_uncaught_exception.py runs it under mpirun). ``uncaught_case.py RAISER [off] [exit|caught]``:
world rank RAISER raises; ``off`` builds the Distributed with abort_on_exception=False; ``exit`` calls sys.exit(3)
instead; ``caught`` catches a sys.exit(3) first, makes one more gridshard call with the others and ends normally.
The waiting ranks give up after WAIT_S seconds, print that they were left running, and leave without MPI's
finalisation, which ends the job in bounded time whether or not gridshard ended it first."""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import gridshard

WAIT_S = 10
world = MPI.COMM_WORLD
raiser = int(sys.argv[1])
options = {"abort_on_exception": False} if "off" in sys.argv[2:] else {}
dist = gridshard.Distributed(**options)
dist.barrier()
if "caught" in sys.argv[2:]:
    if world.Get_rank() == raiser:
        try:
            sys.exit(3)
        except SystemExit:
            pass
    dist.spatial_reduce_sum(np.ones(2))  # the program went on
    dist.barrier()
    print(f"rank {world.Get_rank()}: ended normally", flush=True)
    sys.exit(0)
if world.Get_rank() == raiser:
    if "exit" in sys.argv[2:]:
        sys.exit(3)
    raise RuntimeError("raised on purpose by one rank")
waiting = world.Ibarrier()  # the raising rank never comes
start = time.monotonic()
while not waiting.Test() and time.monotonic() - start < WAIT_S:
    time.sleep(0.05)
print(f"rank {world.Get_rank()}: still running {WAIT_S} s after the exception", flush=True)
os._exit(0)
