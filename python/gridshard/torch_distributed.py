"""torch.distributed beside gridshard in the same ranks, for programs launched by mpirun or srun.

MPI knows the ranks; torch.distributed needs a rendezvous. ``init_process_group`` takes rank and world size
from the MPI communicator, lets rank 0 pick a free TCP port on its host, broadcasts address and port over
MPI, and starts torch's process group (gloo by default, the CPU backend) on them. gridshard keeps talking
MPI, torch its own backend; neither waits for the other.

    from mpi4py import MPI
    import gridshard, gridshard.torch_distributed
    gridshard.torch_distributed.init_process_group()            # collective over COMM_WORLD
    dist = gridshard.Distributed(spatial_parallelism=(2, 2))      # gridshard over MPI
    torch.distributed.all_reduce(loss)                            # torch over gloo
"""

import datetime
import os
import socket

from ._mpi import mpi_errors


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def rendezvous(comm=None):
    """``(address, port, rank, world_size, local_rank)`` for torch's ``env://`` start: MASTER_ADDR and
    MASTER_PORT from the environment when set, else rank 0's host address and a free port there; ranks from
    ``comm`` (default ``MPI.COMM_WORLD``); the local rank among the ranks sharing this node. Collective over
    ``comm``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    with mpi_errors():
        if comm.Get_rank() == 0:
            address = os.environ.get("MASTER_ADDR") or socket.gethostbyname(socket.gethostname())
            port = int(os.environ.get("MASTER_PORT") or _free_port())
            chosen = (address, port)
        else:
            chosen = None
        address, port = comm.bcast(chosen, root=0)
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_rank = node.Get_rank()
        node.Free()
    return address, port, comm.Get_rank(), comm.Get_size(), local_rank


def init_process_group(backend="gloo", comm=None, timeout_s=300):
    """Starts torch.distributed over the ranks of ``comm`` (default ``MPI.COMM_WORLD``), unless it is started
    already; sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK as torchrun would, so code that
    reads them (ACE's does) sees a torchrun-like launch. Collective over ``comm``."""
    import torch.distributed

    if torch.distributed.is_initialized():
        return
    address, port, rank, size, local_rank = rendezvous(comm)
    os.environ.update(
        MASTER_ADDR=address, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(local_rank)
    )
    torch.distributed.init_process_group(
        backend, init_method="env://", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=timeout_s)
    )
