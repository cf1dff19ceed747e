"""gridshard over MPI and torch.distributed over gloo in the same ranks, started by mpirun: the same sum by
both, and a metric by gridshard between torch collectives."""
import sys
from pathlib import Path

import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch")

import gridshard  # noqa: E402
import gridshard.torch_distributed  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD


@pytest.fixture(scope="module")
def process_group():
    gridshard.torch_distributed.init_process_group("gloo")
    yield
    torch.distributed.destroy_process_group()


def test_torch_and_gridshard_talk_in_the_same_ranks(process_group):
    assert torch.distributed.get_rank() == WORLD.Get_rank()
    assert torch.distributed.get_world_size() == WORLD.Get_size()
    dist = gridshard.Distributed(spatial_parallelism=(H, W))
    x = torch.full((4,), float(WORLD.Get_rank() + 1), dtype=torch.float64)
    by_torch = x.clone()
    torch.distributed.all_reduce(by_torch)
    by_gridshard = gridshard.Distributed().reduce_sum(x.clone())
    assert torch.equal(by_torch, by_gridshard)
    field = torch.arange(5 * 7, dtype=torch.float64).reshape(1, 5, 7)
    mean = dist.weighted_mean(field[dist.get_local_slices(field.shape)], None)
    torch.distributed.barrier()
    assert mean.item() == field.mean().item()
