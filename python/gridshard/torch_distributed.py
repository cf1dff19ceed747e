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

from ._gridshard import ArgumentError
from ._mpi import mpi_errors


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def rendezvous(comm=None, problem=""):
    """``(address, port, rank, world_size, local_rank)`` for torch's ``env://`` start: MASTER_ADDR and
    MASTER_PORT from the environment when set, else rank 0's host address and a free port there; ranks from
    ``comm`` (default ``MPI.COMM_WORLD``); the local rank among the ranks sharing this node. ``problem`` is
    this rank's own argument problem, if any: it, or rank 0's failure to choose an address and port (a
    MASTER_PORT that is not a number, a host name that does not resolve), is raised as ArgumentError on
    every rank, never on one alone. Collective over ``comm``: one allgather, then the node's split."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    chosen = None
    if comm.Get_rank() == 0 and not problem:
        try:
            address = os.environ.get("MASTER_ADDR") or socket.gethostbyname(socket.gethostname())
            port = int(os.environ.get("MASTER_PORT") or _free_port())
            chosen = (address, port)
        except Exception as error:  # noqa: BLE001 - raised on every rank below
            problem = (f"rank 0 cannot choose the rendezvous address (MASTER_ADDR="
                       f"{os.environ.get('MASTER_ADDR')!r}, MASTER_PORT={os.environ.get('MASTER_PORT')!r}): "
                       f"{type(error).__name__}: {error}")
    with mpi_errors():
        everyone = comm.allgather((problem, chosen))
    failed = [(r, text) for r, (text, _) in enumerate(everyone) if text]
    if failed:
        raise ArgumentError(f"rank {failed[0][0]}: {failed[0][1]}")
    address, port = everyone[0][1]
    with mpi_errors():
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_rank = node.Get_rank()
        node.Free()
    return address, port, comm.Get_rank(), comm.Get_size(), local_rank


def init_process_group(backend="gloo", comm=None, timeout_s=300):
    """Starts torch.distributed over the ranks of ``comm`` (default ``MPI.COMM_WORLD``), unless it is started
    already; sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK as torchrun would, so code that
    reads them (ACE's does) sees a torchrun-like launch. A bad ``backend`` or ``timeout_s`` on any rank, or a
    process group started on some ranks only, raises ArgumentError on every rank. Collective over ``comm``."""
    import torch.distributed

    problem, timeout = "", None
    try:
        timeout = datetime.timedelta(seconds=timeout_s)
        if not isinstance(backend, str) or not backend:
            raise ValueError(f"backend={backend!r}: expected a backend name such as 'gloo'")
        started = torch.distributed.is_initialized()
    except Exception as error:  # noqa: BLE001 - raised on every rank by the rendezvous' agreement
        problem, started = f"{type(error).__name__}: {error}", False
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    with mpi_errors():
        states = set(comm.allgather(started))
    if states == {True}:
        return
    if len(states) > 1:
        raise ArgumentError("torch.distributed is started on some ranks of the communicator and not on others")
    address, port, rank, size, local_rank = rendezvous(comm, problem)
    os.environ.update(
        MASTER_ADDR=address, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(local_rank)
    )
    torch.distributed.init_process_group(backend, init_method="env://", rank=rank, world_size=size, timeout=timeout)
