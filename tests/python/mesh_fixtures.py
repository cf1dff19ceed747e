"""The fixtures the Python suites of gridshard.Distributed share: `dist`, the Distributed of this run's mesh
(mpi_pytest.mesh_shape) under each split rule in turn, and `serial`, one on this process alone."""
import pytest
from mpi4py import MPI

import gridshard
from mpi_pytest import mesh_shape

_, H, W = mesh_shape()


@pytest.fixture(scope="module", params=["div_up", "balanced"])
def dist(request):
    return gridshard.Distributed(spatial_parallelism=(H, W), split=request.param)


@pytest.fixture(scope="module")
def serial():
    return gridshard.Distributed(MPI.COMM_SELF)
