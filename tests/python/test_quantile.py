"""Exact quantiles on shards (``Distributed.quantile``, the library's sample_quantiles) under mpirun on the mesh
GRIDSHARD_TEST_MESH: every result is the bits of numpy's ``nanquantile`` of the gathered field (its dtype included),
for float32 and float64, numpy arrays and torch tensors, both methods, every set of dims, and fields with ties, NaN
holes, an all-NaN channel, infinities, signed zeros, subnormals and a constant channel."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402

import gridshard  # noqa: E402

D, H, W = mesh_shape()
if D > 1 and (D, H, W) != (2, 2, 1):  # quantiles are spatial: data ranks beside a split once, at 2x2x1
    pytest.skip("data-parallel copies of the spatial meshes run elsewhere", allow_module_level=True)
GRID = (9, 14)  # uneven on every mesh of up to four ranks a dim, both split rules
# numpy forms each q's result alone, so one call with all of them checks each; and a float's own result shape.
QUANTILES = [[0.0, 1e-6, 0.25, 0.5, 0.99, 0.9999, 1.0], 0.5]
DIMS = [(-2, -1), None, (0, -2, -1), (-1,)]
MORE_DIMS = [(-2,), (0,)]  # the lat group alone, and no spatial dim: on the fields with NaN holes
KINDS = ["normal", "ties", "holes", "first channel all NaN", "infinities", "signed zeros", "subnormal", "constant"]


def field(kind, dtype):
    """A (3, 2) x GRID field: six channels, the same on every rank."""
    rng = np.random.default_rng(KINDS.index(kind))
    x = rng.standard_normal((3, 2) + GRID)
    if kind == "ties":
        x = np.round(x * 2) + 0.0  # +0 for round's -0: zeros of one sign
    elif kind == "holes":
        x[rng.random(x.shape) < 0.3] = np.nan
        x[1, 1] = np.nan  # an all-NaN channel, not the first
    elif kind == "first channel all NaN":  # numpy then gives a float32 result for float32 data
        x[0, 0] = np.nan
        x[2, 1, :, :3] = np.nan
    elif kind == "infinities":
        x[0, :, 0, :4] = np.inf
        x[1, :, 2, 3] = -np.inf
        x[2, 0] = np.inf
    elif kind == "signed zeros":  # -0 only (ties holds +0): numpy's order among equal values cannot matter
        x[0] = np.where(rng.random(x[0].shape) < 0.5, -0.0, np.abs(x[0]))
        x[1] = np.where(rng.random(x[1].shape) < 0.5, -0.0, -np.abs(x[1]))
        x[2, 1] = -0.0
    elif kind == "subnormal":
        x = np.sign(x) * (1 + np.floor(np.abs(x) * 100)) * float(np.finfo(dtype).smallest_subnormal)  # no zeros
    elif kind == "constant":
        x[:] = 3.25
        x[1] = -7.0
    return x.astype(dtype)


def bits(array):
    array = np.asarray(array)
    return array.dtype, array.shape, np.where(np.isnan(array), np.nan, array).astype(array.dtype).tobytes()


def local_slice(dist, ndim, dims, with_q):
    """The slice of numpy's global result that this rank's result is: its shard of the kept spatial dims."""
    reduced = set(range(ndim)) if dims is None else {d % ndim for d in dims}
    lat, lon = dist.get_local_slices(GRID)
    index = [{ndim - 2: lat, ndim - 1: lon}.get(d, slice(None)) for d in range(ndim) if d not in reduced]
    return tuple([slice(None)] * with_q + index)


@pytest.fixture(scope="module")
def dist():
    return gridshard.Distributed(spatial_parallelism=(H, W))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["linear", "inverted_cdf"])
def test_quantiles_are_numpys_bits_on_every_mesh(dist, kind, dtype, method):
    data = field(kind, dtype)
    shard = data[dist.get_local_slices(data.shape)]
    for dim in DIMS + (MORE_DIMS if kind == "holes" else []):
        for q in QUANTILES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # numpy's all-NaN slices and inf - inf
                want = np.nanquantile(data, q, axis=dim, method=method)
            want = np.asarray(want)[local_slice(dist, data.ndim, dim, np.ndim(q) > 0)]
            got = dist.quantile(shard, q, dim=dim, method=method)
            assert bits(got) == bits(want), (kind, dim, q, got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_tensors_give_tensors_of_the_same_bits(dist, dtype):
    torch = pytest.importorskip("torch")
    data = field("holes", np.dtype(dtype).type)
    shard = torch.from_numpy(data[dist.get_local_slices(data.shape)].copy())
    for dim, q in (((-2, -1), [0.1, 0.9]), (None, 0.5), ((-1,), 0.99)):
        got = dist.quantile(shard, q, dim=dim)
        assert isinstance(got, torch.Tensor)
        want = dist.quantile(shard.numpy(), q, dim=dim)
        assert bits(got.numpy()) == bits(want), (dim, q)


def test_a_scalar_result_is_a_numpy_scalar_as_numpys(dist):
    data = field("normal", np.float64)
    got = dist.quantile(data[dist.get_local_slices(data.shape)], 0.5, dim=None)
    assert isinstance(got, np.float64) and got == np.nanquantile(data, 0.5)


@pytest.mark.parametrize("case,message", [
    (dict(q=1.5), "range"), (dict(q=[[0.5]]), "2-dim"), (dict(q="x"), "not a float"),
    (dict(method="nearest"), "method"), (dict(dim=(0, 0)), "twice"), (dict(dim=5), "out of range"),
])
def test_bad_arguments_raise_on_every_rank(dist, case, message):
    shard = field("normal", np.float64)[dist.get_local_slices((3, 2) + GRID)]
    arguments = dict(q=0.5, dim=(-2, -1), method="linear")
    if dist._mesh.coords[1] + dist._mesh.coords[2] == 0:  # one rank only: the others raise with it
        arguments.update(case)
    with pytest.raises(gridshard.ArgumentError, match=message):
        dist.quantile(shard, **arguments)
    assert dist.quantile(shard, 0.5, dim=None) == np.nanquantile(field("normal", np.float64), 0.5)  # still in step
