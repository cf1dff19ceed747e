"""Exact quantiles on shards (``Distributed.quantile``, the library's sample_quantiles) under mpirun on the mesh
GRIDSHARD_TEST_MESH: every result is the bits of numpy's ``nanquantile`` of the gathered field (its dtype included),
for float32 and float64, numpy arrays and torch tensors, both methods, every set of dims, and fields with ties, NaN
holes, an all-NaN channel, infinities, signed zeros, subnormals and a constant channel."""
import sys
import warnings
from fractions import Fraction
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


def weighted_reference(data, weights, q, dim):
    """The weighted "inverted_cdf" in rational arithmetic on the gathered field: per sample, of the values that are
    not NaN, the smallest (-0 before +0) whose cumulative weight is >= q times the sample's weight and > 0."""
    ndim = data.ndim
    dims = list(range(ndim)) if dim is None else sorted(d % ndim for d in dim)
    kept = [d for d in range(ndim) if d not in dims]
    moved = np.moveaxis(data, dims, list(range(len(kept), ndim)))
    w = np.moveaxis(np.broadcast_to(weights, data.shape), dims, list(range(len(kept), ndim)))
    shape = moved.shape[:len(kept)]
    samples = int(np.prod(shape, dtype=np.int64))
    values, w = moved.reshape(samples, -1), w.reshape(samples, -1)
    qs = np.atleast_1d(q)
    out = np.empty((qs.size, values.shape[0]), dtype=data.dtype)
    for s in range(values.shape[0]):
        pairs = sorted(((float(v), not np.signbit(v), Fraction(float(x))) for v, x in zip(values[s], w[s])
                        if not np.isnan(v)), key=lambda p: (p[0], p[1]))
        total = sum((p[2] for p in pairs), Fraction(0))
        for k, probability in enumerate(qs):
            out[k, s] = np.nan
            cumulative, target = Fraction(0), Fraction(float(probability)) * total
            for value, _, weight in pairs if total > 0 else []:
                cumulative += weight
                if cumulative >= target and cumulative > 0:
                    out[k, s] = value  # -0.0 stays -0.0
                    break
    out = out.reshape((qs.size,) + shape)
    return out if np.ndim(q) > 0 else out[0]


WEIGHTS = ["cos lat per row", "integers with zeros per point", "ones", "rows 2^-300 apart"]


def cell_weights(kind):
    """Global (lat, lon) weights: area weights per row; small integers with zeros (+0 and -0, a mask), whose
    cumulative weights meet q times the total exactly at q = 0.25, 0.5; all ones (the unweighted rule); rows 2^-300
    apart (too wide a range for the 128-bit bins)."""
    if kind == "cos lat per row":
        return np.cos(np.deg2rad(np.linspace(-88.0, 88.0, GRID[0])))[:, None] * np.ones((1, GRID[1]))
    if kind == "ones":
        return np.ones(GRID)
    if kind == "rows 2^-300 apart":  # too wide for 128-bit integers: the exact sums' path
        return np.where(np.arange(GRID[0]) % 2 == 0, 1.0, 2.0 ** -300)[:, None] * np.ones((1, GRID[1]))
    weights = np.random.default_rng(5).integers(0, 4, GRID).astype(np.float64)
    weights[:, ::2] = np.where(weights[:, ::2] == 0, -0.0, weights[:, ::2])  # -0 among the zeros: no weight either
    return weights


@pytest.mark.parametrize("weights_kind,kind", [
    ("cos lat per row", "normal"), ("cos lat per row", "signed zeros"), ("integers with zeros per point", "ties"),
    ("integers with zeros per point", "holes"), ("ones", "holes"), ("ones", "infinities"),
    ("rows 2^-300 apart", "normal"), ("rows 2^-300 apart", "holes")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weighted_quantiles_are_the_exact_weighted_inverted_cdf(dist, weights_kind, kind, dtype):
    data = field(kind, dtype)
    weights = cell_weights(weights_kind)
    lat, lon = dist.get_local_slices(GRID)
    shard = data[dist.get_local_slices(data.shape)]
    per_row = weights_kind in ("cos lat per row", "rows 2^-300 apart")
    local = weights[lat, :1] if per_row else weights[lat, lon]  # (h, 1) per row
    for dim in DIMS + [(0,)]:
        for q in [QUANTILES[0] + [0.75], 0.5]:
            want = np.asarray(weighted_reference(data, weights, q, dim))[local_slice(dist, data.ndim, dim,
                                                                                     np.ndim(q) > 0)]
            got = dist.quantile(shard, q, dim=dim, method="inverted_cdf", weights=local)
            assert bits(got) == bits(want), (kind, dim, q, got, want)
            if weights_kind == "ones":  # the unweighted rule's bits
                plain = dist.quantile(shard, q, dim=dim, method="inverted_cdf")
                assert bits(got) == bits(plain), (kind, dim, q)


def test_weighted_quantiles_of_tensors_and_without_weight(dist):
    torch = pytest.importorskip("torch")
    data = field("holes", np.float32)
    weights = cell_weights("integers with zeros per point")
    weights[:, :] = 0.0
    weights[2, 3] = 1.0  # one cell weighs: every sample over the grid is its value, or NaN where it is NaN
    lat, lon = dist.get_local_slices(GRID)
    shard = torch.from_numpy(data[dist.get_local_slices(data.shape)].copy())
    got = dist.quantile(shard, [0.0, 0.5, 1.0], method="inverted_cdf", weights=torch.from_numpy(weights[lat, lon]))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    want = np.broadcast_to(data[:, :, 2, 3], (3,) + data.shape[:2])
    assert bits(got.numpy()) == bits(want.astype(np.float32))
    nothing = dist.quantile(shard.numpy(), 0.5, method="inverted_cdf", weights=np.zeros((lat.stop - lat.start, 1)))
    assert np.isnan(nothing).all() and nothing.dtype == np.float32


@pytest.mark.parametrize("case,message", [
    (dict(method="linear"), "only method 'inverted_cdf' takes weights"),
    (dict(weights=-1.0), "finite and >= 0, got -1"), (dict(weights=np.nan), "finite and >= 0, got nan"),
    (dict(weights=np.ones((2, 2, 2))), "does not broadcast"),
])
def test_bad_weights_raise_on_every_rank(dist, case, message):
    shard = field("normal", np.float64)[dist.get_local_slices((3, 2) + GRID)]
    arguments = dict(q=0.5, method="inverted_cdf", weights=np.ones(shard.shape[-2:]))
    if dist._mesh.coords[1] + dist._mesh.coords[2] == 0:  # one rank only: the others raise with it
        arguments.update(case)
    with pytest.raises(gridshard.ArgumentError, match=message):
        dist.quantile(shard, **arguments)
    assert dist.quantile(shard, 0.5, dim=None) == np.nanquantile(field("normal", np.float64), 0.5)  # still in step
