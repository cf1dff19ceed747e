"""An argument that fails on one rank before the call's first collective raises on every rank of the call's
group, never on that rank alone while the others wait (issue 18, item 6): an img_shape beyond int64, an
object whose __array__ raises, a MemoryError from one rank's copy, and the same for the torch path (the
rendezvous of gridshard.torch_distributed, the ACE backend's environment). Runs under mpirun at 2 to 4
ranks; before the fix each case left the other ranks waiting until mpi_pytest's deadline ended the run."""
import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import gridshard
from mpi_pytest import mesh_shape

try:
    import torch
except ImportError:
    if os.environ.get("GRIDSHARD_TEST_TORCH") == "1":
        raise
    torch = None

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD
GRID = (11, 14)  # shards of at least 2 x 2 points at up to 4 ranks along an axis (div_up)
KINDS = ["numpy"] + (["torch"] if torch is not None else [])


@pytest.fixture(scope="module")
def dist():
    return gridshard.Distributed(spatial_parallelism=(H, W))


def last_rank():
    return WORLD.Get_rank() == WORLD.Get_size() - 1


def in_last_ranks_group(dist):
    """Whether this rank shares a spatial group (the metrics' group) with the last world rank."""
    return dist.data_parallel_rank == D - 1


def shards(dist, kind="numpy"):
    rng = np.random.default_rng(7)
    truth = rng.standard_normal((2,) + GRID)
    weights = rng.random(GRID) + 0.5
    t = np.array(truth[dist.get_local_slices(truth.shape)], order="C")
    w = np.array(weights[dist.get_local_slices(GRID)], order="C")
    if kind == "torch":
        return torch.from_numpy(t), torch.from_numpy(w)
    return t, w


def strided(array):
    """The same values as a view that is not C-contiguous (every other column of a wider array)."""
    if torch is not None and torch.is_tensor(array):
        return torch.from_numpy(np.repeat(array.numpy(), 2, axis=-1))[..., ::2]
    return np.repeat(array, 2, axis=-1)[..., ::2]


def expect_on_group(dist, call, match, error=gridshard.ArgumentError):
    """``call()`` raises ``error`` matching ``match`` on every rank of the last rank's spatial group and
    returns elsewhere."""
    if in_last_ranks_group(dist):
        with pytest.raises(error, match=match):
            call()
    else:
        call()


class Unreadable:
    """An argument whose conversion to an array raises something other than TypeError or ValueError."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("this object cannot be read")


def test_an_img_shape_beyond_int64_on_one_rank_raises_on_every_rank(dist):
    t, w = shards(dist)
    img = (2**63, 12) if last_rank() else GRID
    expect_on_group(dist, lambda: dist.gradient_magnitude_percent_diff(t, t + 1, w, img_shape=img),
                    r"img_shape=\(9223372036854775808, 12\)")
    img = (GRID[0], -(2**63) - 1) if last_rank() else GRID
    expect_on_group(dist, lambda: dist.gradient_magnitude_percent_diff(t, t + 1, w, img_shape=img), "img_shape")
    # The group is usable afterwards: every rank raised at the same point.
    assert np.isfinite(dist.gradient_magnitude_percent_diff(t, t + 1, w, img_shape=GRID)).all()


def test_a_halo_width_that_differs_on_one_rank_raises_on_every_rank(dist):
    """The halo exchange's plan is kept per (grid, width, periodic_lon, pole), its parameters agreed with the grid:
    a rank that asks for another width raises with the rest, whether the others' plan is kept already or not."""
    if H * W == 1:
        pytest.skip("a spatial group of one rank")
    t, _ = shards(dist)
    first = dist.halo_exchange(t, width=1)  # the width-1 plan is kept from here on
    for width in (1, 2):
        other = width + 1 if last_rank() else width
        expect_on_group(dist, lambda: dist.halo_exchange(t, width=other), "width, periodic_lon or pole")
    # The group is usable afterwards, and the kept plan gives what it gave.
    np.testing.assert_array_equal(dist.halo_exchange(t, width=1), first)
    assert dist.halo_exchange(t, width=2, pole="replicate").shape[-1] == t.shape[-1] + 4


@pytest.mark.parametrize("kind", KINDS)
def test_weights_whose_array_raises_on_one_rank_raise_on_every_rank(dist, kind):
    t, w = shards(dist, kind)
    bad = Unreadable() if last_rank() else w
    expect_on_group(dist, lambda: dist.weighted_mean(t, bad), "weights: .*RuntimeError.*cannot be read")
    expect_on_group(dist, lambda: dist.root_mean_squared_error(t, t, bad), "RuntimeError")
    # Over the world: every rank raises, naming the rank whose tensor could not be read.
    with pytest.raises(gridshard.ArgumentError, match=f"rank {WORLD.Get_size() - 1}: .*RuntimeError"):
        dist.gather(Unreadable() if last_rank() else np.zeros(3))
    assert np.isfinite(dist.weighted_mean(t, w)).all()


@pytest.fixture
def copies_fail_on_the_last_rank(monkeypatch):
    """On the last rank only, numpy's C-order copy of a strided view raises MemoryError, as when that rank's
    memory is exhausted (a broadcast view's copy is the size of the whole shard)."""
    if last_rank():
        real = np.ascontiguousarray

        def failing(a, *args, **kwargs):
            if isinstance(a, np.ndarray) and a.ndim >= 1 and not a.flags.c_contiguous:
                raise MemoryError("simulated: no memory for the copy")
            return real(a, *args, **kwargs)

        monkeypatch.setattr(np, "ascontiguousarray", failing)


@pytest.mark.parametrize("kind", KINDS)
def test_a_memory_error_in_one_ranks_copy_raises_on_every_rank(dist, kind, copies_fail_on_the_last_rank):
    t, w = shards(dist, kind)
    if dist._device.takes(t):  # GRIDSHARD_DEVICE_PATH=always: tensors are read in place, never copied through numpy
        pytest.skip("the device path makes no copy (test_device_path.py covers its failures)")
    columns = np.linspace(1, 2, t.shape[-1])  # per-longitude weights: copied as a (rows, cols) broadcast view
    if kind == "torch":
        columns = torch.from_numpy(columns)
    # Memory exhausted is the system's failure, not the arguments': SystemFailure (a RuntimeError) on every rank.
    expect_on_group(dist, lambda: dist.weighted_mean(t, columns), "weights: out of memory.*simulated",
                    gridshard.SystemFailure)
    expect_on_group(dist, lambda: dist.weighted_mean(strided(t), w), "data: out of memory.*simulated",
                    gridshard.SystemFailure)
    # The world's gather copies a strided tensor before it sends: every rank raises.
    with pytest.raises(gridshard.SystemFailure, match=f"rank {WORLD.Get_size() - 1}: .*out of memory.*simulated"):
        dist.gather(np.broadcast_to(np.arange(3.0), (2, 3)))


def test_a_rank_zero_that_cannot_choose_the_rendezvous_raises_on_every_rank(monkeypatch):
    pytest.importorskip("torch")
    from gridshard import torch_distributed

    if WORLD.Get_rank() == 0:
        monkeypatch.setenv("MASTER_PORT", "not-a-port")
    with pytest.raises(gridshard.ArgumentError, match="rank 0: .*MASTER_PORT='not-a-port'"):
        torch_distributed.rendezvous()


def test_the_ace_backend_compares_its_environment_before_it_raises(monkeypatch):
    from gridshard.ace import GridshardBackend

    monkeypatch.setenv("FME_DISTRIBUTED_H", "two" if last_rank() else "1")
    monkeypatch.setenv("FME_DISTRIBUTED_W", "1")
    with pytest.raises(ValueError):
        GridshardBackend.from_env()
    monkeypatch.setenv("FME_DISTRIBUTED_H", "two")
    with pytest.raises(ValueError, match="FME_DISTRIBUTED_H, got 'two'"):
        GridshardBackend.from_env()


def test_the_abort_on_an_uncaught_exception_is_on_by_default_and_can_be_turned_off(monkeypatch):
    """(The abort itself: test_uncaught_exception.py.) Once a Distributed spans more than one rank the hook is
    in place; abort_on_exception=False or GRIDSHARD_ABORT_ON_EXCEPTION=0 leaves the hook as it was."""
    from gridshard import _abort

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.delenv(_abort.ENV, raising=False)
    gridshard.Distributed(MPI.COMM_SELF)
    assert not _abort.installed()  # one rank: nothing to end
    gridshard.Distributed(abort_on_exception=False)
    assert not _abort.installed()
    gridshard.Distributed()
    assert _abort.installed() == (WORLD.Get_size() > 1)
    gridshard.Distributed(abort_on_exception=False)
    assert not _abort.installed()
    monkeypatch.setenv(_abort.ENV, "0")
    gridshard.Distributed()
    assert not _abort.installed()


def test_annual_reference_data_without_a_year_of_the_run_raises_on_every_rank(dist):
    """ACE's R2 needs the reference's mean of every year of the run (its reference.sel raises otherwise): a reference
    of 1999 alone against a run of 2000 and 2001 raises at finish on every rank, as does reference data of a variable
    on one rank only, before the first collective."""
    rows, cols = dist.get_local_slices(GRID)
    box = (rows.stop - rows.start, cols.stop - cols.start)
    lat = np.linspace(-80.0, 80.0, GRID[0])
    local, leads = 1, 30  # 30-day steps: 2000 and 2001 each hold more than 350 days of them
    ics = local * dist.total_data_parallel_ranks
    reference = {"values": {"a": np.full((1, 12) + box, 281.0)}, "counts": np.ones((1, 12)), "years": np.full(12, 1999)}
    times = np.datetime64("2000-01-01") + np.arange(leads)[None, :] * np.timedelta64(30, "D")
    fields = np.full((local, leads) + box, 280.0, dtype=np.float32)
    aggregator = gridshard.Aggregator(dist, ["a"], lat, GRID[1], ics, leads,
                                      annual={"timestep": 30 * 86400.0, "reference": reference})
    aggregator.record({"a": fields}, {"a": fields[:, None]}, first_lead=0, times=times)
    with pytest.raises(gridshard.ArgumentError, match="the reference data has no year 2000 .it has 1999 to 1999."):
        aggregator.finish()
    one_rank = reference if last_rank() else {**reference, "values": {}}
    with pytest.raises(gridshard.ArgumentError, match="annual: the ranks give reference data of different variables"):
        gridshard.Aggregator(dist, ["a"], lat, GRID[1], ics, leads,
                             annual={"timestep": 30 * 86400.0, "reference": one_rank})
