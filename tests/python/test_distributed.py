"""gridshard.Distributed under mpirun on the mesh GRIDSHARD_TEST_MESH, under both split rules.

Every rank builds the same global fields from one seed and takes its own slices. Each metric is compared
two ways: bit for bit with gridshard run serially (COMM_SELF) on the global field, which is what makes the
results independent of the mesh, and against a numpy reference of ACE's formula on the global field. The
collectives are checked exactly on integer fills (value = a function of the global index)."""
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import gridshard

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402
from torch_split import compute_split_shapes  # noqa: E402

pytest_plugins = ["mesh_fixtures"]  # the fixtures dist and serial

try:
    import torch
except ImportError:  # the numpy half still runs; GRIDSHARD_TEST_TORCH=1 makes a missing torch a failure
    if os.environ.get("GRIDSHARD_TEST_TORCH") == "1":
        raise
    torch = None

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD
KINDS = ["numpy"] + (["torch"] if torch is not None else [])
DTYPES = [np.float32, np.float64]
# Grids whose splits are uneven under both rules, with one-cell shards at 4 ranks along an axis (5 over 4
# is 1,1,1,2 under div_up and 2,1,1,1 balanced).
GRIDS = [(9, 14), (5, 7)]


def as_kind(array, kind):
    return torch.from_numpy(np.array(array)) if kind == "torch" else array


def to_numpy(value):
    return value.numpy() if torch is not None and isinstance(value, torch.Tensor) else np.asarray(value)


def assert_same_bits(got, want):
    got, want = to_numpy(got), to_numpy(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)) or np.array_equal(got, want, equal_nan=True), (
        got,
        want,
    )


def fields(grid, dtype, seed=0, nan=False):
    """Truth and prediction (2, 3, nlat, nlon), and per-point weights, the same on every rank."""
    rng = np.random.default_rng(seed)
    shape = (2, 3) + grid
    truth = (280 + 10 * rng.standard_normal(shape)).astype(dtype)
    prediction = (truth + rng.standard_normal(shape)).astype(dtype)
    if nan:
        truth[0, 1, grid[0] // 2, 1:3] = np.nan
        prediction[1, 2, 0, :] = np.nan
    weights = rng.uniform(0.5, 2.0, grid)
    weights[0, 0] = 0.0
    return truth, prediction, weights


def local(dist, array):
    return array[dist.get_local_slices(array.shape)]


# ---------------------------------------------------------------- references: ACE's formulas in float64


def ref_weighted_sum(x, w):
    w = np.broadcast_to(w, x.shape)
    return (np.where(w != 0, x.astype(np.float64), 0.0) * w).sum(axis=(-2, -1))


def ref_weighted_mean(x, w):
    return ref_weighted_sum(x, w) / np.broadcast_to(w, x.shape).sum(axis=(-2, -1))


def ref_weighted_nanmean(x, w):
    x = x.astype(np.float64)
    w = np.broadcast_to(w, x.shape)
    return np.nansum(x * w, axis=(-2, -1)) / np.where(np.isnan(x), 0.0, w).sum(axis=(-2, -1))


def ref_weighted_std(x, w):
    mean = ref_weighted_mean(x, w)[..., None, None]
    return np.sqrt(ref_weighted_mean((x.astype(np.float64) - mean) ** 2, w))


def ref_gradient_magnitude(x):
    gy, gx = np.gradient(x.astype(np.float64), axis=(-2, -1))
    return np.sqrt(gy**2 + gx**2)


def ref_gradient_percent_diff(t, p, w):
    # ACE's rule: each field's magnitudes averaged over that field's own non-NaN points.
    mt, mp = ref_weighted_nanmean(ref_gradient_magnitude(t), w), ref_weighted_nanmean(ref_gradient_magnitude(p), w)
    return 100 * (mp - mt) / mt


def close(got, want, dtype):
    tolerance = 2e-5 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(to_numpy(got).astype(np.float64), want, rtol=tolerance, atol=tolerance * 1e-3)


# ---------------------------------------------------------------- metrics

FIELD_METRICS = {
    "weighted_sum": ref_weighted_sum,
    "weighted_mean": ref_weighted_mean,
    "weighted_nanmean": ref_weighted_nanmean,
    "weighted_std": ref_weighted_std,
}


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FIELD_METRICS))
@pytest.mark.parametrize("weighting", ["per_point", "per_row", "none"])
def test_field_metrics_match_serial_bits_and_the_reference(dist, serial, name, dtype, kind, grid, weighting):
    truth, _, weights = fields(grid, dtype, nan=name == "weighted_nanmean")
    if weighting == "per_row":
        weights = gridshard.spherical_area_weights(np.linspace(-80, 80, grid[0]), grid[1])
    global_w = None if weighting == "none" else np.asarray(weights)
    local_w = None if global_w is None else as_kind(local(dist, weights), kind)
    got = getattr(dist, name)(as_kind(local(dist, truth), kind), local_w)
    want = getattr(serial, name)(as_kind(truth, kind), None if global_w is None else as_kind(weights, kind))
    assert_same_bits(got, want)
    assert type(got) is type(as_kind(truth, kind))  # noqa: E721 - the very type, not a subclass
    assert to_numpy(got).dtype == dtype and got.shape == (2, 3)
    close(got, FIELD_METRICS[name](truth, 1.0 if global_w is None else global_w), dtype)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_keepdim_and_dim_spellings(dist, kind, dtype):
    truth, _, weights = fields((9, 14), dtype)
    x, w = as_kind(local(dist, truth), kind), as_kind(local(dist, weights), kind)
    plain = dist.weighted_mean(x, w)
    kept = dist.weighted_mean(x, w, dim=(2, 3), keepdim=True)
    assert kept.shape == (2, 3, 1, 1)
    assert_same_bits(kept.reshape(2, 3), plain)
    assert_same_bits(dist.weighted_mean(x, w, dim=(-1, -2)), plain)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_paired_metrics(dist, serial, dtype, kind, grid):
    truth, prediction, weights = fields(grid, dtype)
    t, p, w = (as_kind(local(dist, a), kind) for a in (truth, prediction, weights))
    T, P, Wg = (as_kind(a, kind) for a in (truth, prediction, weights))
    bias = dist.weighted_mean_bias(t, p, w)
    assert_same_bits(bias, serial.weighted_mean_bias(T, P, Wg))
    close(bias, ref_weighted_mean(prediction.astype(np.float64) - truth, weights), dtype)
    rmse = dist.root_mean_squared_error(t, p, w)
    assert_same_bits(rmse, serial.root_mean_squared_error(T, P, Wg))
    close(rmse, np.sqrt(ref_weighted_mean((prediction.astype(np.float64) - truth) ** 2, weights)), dtype)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nan", [False, True])
def test_gradient_metrics_by_halo_exchange(dist, serial, dtype, kind, grid, nan):
    truth, prediction, weights = fields(grid, dtype, nan=nan)
    t, p, w = (as_kind(local(dist, a), kind) for a in (truth, prediction, weights))
    T, P, Wg = (as_kind(a, kind) for a in (truth, prediction, weights))
    magnitudes = dist.gradient_magnitude(t)
    assert_same_bits(magnitudes, local(dist, to_numpy(serial.gradient_magnitude(T))))
    assert to_numpy(magnitudes).dtype == dtype and magnitudes.shape == t.shape
    close(magnitudes, local(dist, ref_gradient_magnitude(truth)), dtype)
    mean = dist.weighted_mean_gradient_magnitude(t, w)
    assert_same_bits(mean, serial.weighted_mean_gradient_magnitude(T, Wg))
    close(mean, ref_weighted_nanmean(ref_gradient_magnitude(truth), weights), dtype)
    diff = dist.gradient_magnitude_percent_diff(t, p, w, dim=(-2, -1), img_shape=grid)
    assert_same_bits(diff, serial.gradient_magnitude_percent_diff(T, P, Wg, img_shape=grid))
    close(diff, ref_gradient_percent_diff(truth, prediction, weights), dtype)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("time_dim", [0, 1])
def test_time_mean_metrics(dist, serial, dtype, kind, time_dim):
    truth, prediction, weights = fields((9, 14), dtype)
    t, p, w = (as_kind(local(dist, a), kind) for a in (truth, prediction, weights))
    T, P, Wg = (as_kind(a, kind) for a in (truth, prediction, weights))
    rmse = dist.rmse_of_time_mean(t, p, w, time_dim=time_dim)
    assert rmse.shape == (3,) if time_dim == 0 else (2,)
    assert_same_bits(rmse, serial.rmse_of_time_mean(T, P, Wg, time_dim=time_dim))
    tm = truth.astype(np.float64).mean(axis=time_dim)
    pm = prediction.astype(np.float64).mean(axis=time_dim)
    close(rmse, np.sqrt(ref_weighted_mean((pm - tm) ** 2, weights)), dtype)
    bias = dist.time_and_global_mean_bias(t, p, w, time_dim=time_dim)
    assert_same_bits(bias, serial.time_and_global_mean_bias(T, P, Wg, time_dim=time_dim))
    close(bias, ref_weighted_mean(pm - tm, weights), dtype)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_regional_weighted_mean(dist, serial, dtype, kind):
    truth, _, weights = fields((9, 14), dtype)
    region = np.zeros((9, 14))
    region[2:6, 3:11] = 1.0
    region[1, 1] = 0.5
    got = dist.regional_weighted_mean(
        as_kind(local(dist, truth), kind), as_kind(local(dist, weights), kind), as_kind(local(dist, region), kind)
    )
    assert_same_bits(got, serial.regional_weighted_mean(as_kind(truth, kind), weights, region))
    close(got, ref_weighted_mean(truth, weights * region), dtype)
    # An empty region (zero everywhere) is refused on every rank,
    # naming the region.
    with pytest.raises(gridshard.ArgumentError, match="regional_weights .*empty region"):
        dist.regional_weighted_mean(as_kind(local(dist, truth), kind), as_kind(local(dist, weights), kind),
                                    as_kind(local(dist, np.zeros((9, 14))), kind))


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_zonal_mean_is_nan_aware_and_local_in_rows(dist, serial, dtype, kind, grid):
    truth, _, _ = fields(grid, dtype)
    truth[0, 0, 1, :] = np.nan  # an all-NaN row
    truth[1, 2, 0, ::2] = np.nan
    got = dist.zonal_mean(as_kind(local(dist, truth), kind))
    rows = dist.get_local_slices(truth.shape)[-2]
    assert got.shape == (2, 3, rows.stop - rows.start)
    assert_same_bits(got, to_numpy(serial.zonal_mean(as_kind(truth, kind)))[..., rows])
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "mean of empty slice" for the NaN row
        want = np.nanmean(truth.astype(np.float64), axis=-1)[..., rows]
    close(got, want, dtype)
    assert np.isnan(to_numpy(got)[0, 0, 1 - rows.start]) if rows.start <= 1 < rows.stop else True


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_power_spectra_are_serial_bits(dist, serial, dtype, kind, grid):
    truth, _, _ = fields(grid, dtype)
    x = as_kind(local(dist, truth), kind)
    for sphere in ["legendre-gauss", "equiangular", "lobatto"]:
        for mode in ["field-owners", "transposes"]:
            got = dist.spherical_power_spectrum(x, grid=sphere, mode=mode, convention="full")
            assert got.shape == (2, 3, grid[0] - (sphere == "lobatto"))
            assert_same_bits(got, to_numpy(serial.spherical_power_spectrum(as_kind(truth, kind), grid=sphere,
                                                                           convention="full")))
    rows = dist.get_local_slices(truth.shape)[-2]
    got = dist.zonal_power_spectrum(x)
    assert got.shape == (2, 3, rows.stop - rows.start, grid[1] // 2 + 1)
    assert_same_bits(got, to_numpy(serial.zonal_power_spectrum(as_kind(truth, kind)))[..., rows, :])
    # The input's dtype, the float64 result rounded once; float64 on request.
    for spectrum in (dist.spherical_power_spectrum, dist.zonal_power_spectrum):
        got, double = to_numpy(spectrum(x)), to_numpy(spectrum(x, dtype=np.float64))
        assert got.dtype == np.dtype(dtype) and double.dtype == np.float64, spectrum.__name__
        assert_same_bits(got, double.astype(dtype))
    with pytest.raises(ValueError, match="dtype="):
        dist.spherical_power_spectrum(x, dtype="int32")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_smooth_flood_fill_is_serial_bits(dist, serial, dtype, kind):
    truth, _, _ = fields((9, 14), dtype, nan=True)
    truth[1, 0, 2:7, 3:11] = np.nan  # a block with an interior beyond one step
    x = as_kind(local(dist, truth), kind)
    for steps in (4, 1):
        got = dist.smooth_flood_fill(x, num_steps=steps)
        assert type(got) is type(x) and got.dtype == x.dtype and tuple(got.shape) == tuple(x.shape)
        want = serial.smooth_flood_fill(as_kind(truth, kind), num_steps=steps)
        assert_same_bits(got, to_numpy(want)[dist.get_local_slices(truth.shape)])
        assert np.isfinite(to_numpy(got)).all()
    untouched = to_numpy(dist.smooth_flood_fill(x))[0, 0]  # a field without NaN is returned as it is
    assert_same_bits(untouched, to_numpy(x)[0, 0])
    with pytest.raises(ValueError, match="num_steps=-1 must be >= 0"):
        dist.smooth_flood_fill(x, num_steps=-1)
    with pytest.raises(ValueError, match="blur_kernel_size=4 must be odd"):
        dist.smooth_flood_fill(x, blur_kernel_size=4)


def test_the_aggregator_says_when_the_latitudes_are_not_the_spectrum_grids(dist):
    for lat, expected in ((np.linspace(-80.0, 80.0, 9), 1),
                          (np.degrees(np.arcsin(np.polynomial.legendre.leggauss(9)[0]))[::-1], 0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gridshard.Aggregator(dist, ["x"], lat, 14, initial_conditions=D, lead_times=2, spectrum=True)
        said = [w for w in caught if "not the legendre-gauss grid's nodes" in str(w.message)]
        assert len(said) == (expected if dist.rank == 0 else 0), [str(w.message) for w in caught]


def test_weighted_nanmean_of_an_all_nan_channel_is_nan(dist):
    x = np.full((2, 9, 14), np.nan)
    x[1] = 1.0
    got = dist.weighted_nanmean(local(dist, x), None)
    assert np.isnan(got[0]) and got[1] == 1.0


def test_spherical_area_weights_are_aces():
    lats = np.linspace(-89.5, 89.5, 180)
    w = gridshard.spherical_area_weights(lats, 360)
    assert w.shape == (180, 360) and w.dtype == np.float64
    want = np.cos(np.deg2rad(lats))[:, None].repeat(360, 1)
    np.testing.assert_allclose(w, want / want.sum(), rtol=1e-13)
    if torch is not None:
        t = gridshard.spherical_area_weights(torch.tensor(lats, dtype=torch.float32), 360)
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.shape == (180, 360)


# ---------------------------------------------------------------- slices, reductions and gathers


def index_fill(shape):
    """value = a function of the global index, exact in float64 and int64."""
    return np.arange(math.prod(shape), dtype=np.float64).reshape(shape)


def test_identity(dist):
    assert dist.world_size == WORLD.Get_size() and dist.rank == WORLD.Get_rank()
    assert dist.total_data_parallel_ranks == D and dist.data_parallel_rank == WORLD.Get_rank() // (H * W)
    assert dist.is_root() == (WORLD.Get_rank() == 0) and dist.is_distributed() == (WORLD.Get_size() > 1)
    assert dist.local_batch_size(16 * D) == 16
    dist.barrier()


@pytest.mark.parametrize("grid", GRIDS)
def test_local_slices_cover_every_point_once(dist, grid):
    shape = (2 * D, 3) + grid
    slices = dist.get_local_slices(shape, data_parallel_dim=0)
    canvas = np.zeros(shape, dtype=np.int64)
    canvas[slices] = 1
    WORLD.Allreduce(MPI.IN_PLACE, canvas, op=MPI.SUM)
    assert (canvas == 1).all()
    assert dist.get_local_slices(shape)[0] == slice(None, None)
    assert len(dist.get_local_slices(grid)) == 2
    i, j = (WORLD.Get_rank() % (H * W)) // W, WORLD.Get_rank() % W
    lat, lon = dist.get_local_slices(grid)
    if dist._mesh.split == "div_up":  # torch-harmonics 0.8's rule, as ACE splits
        assert lat.stop - lat.start == compute_split_shapes(grid[0], H)[i]
        assert lon.stop - lon.start == compute_split_shapes(grid[1], W)[j]


def test_local_slices_raise_aces_errors(dist):
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        dist.get_local_slices((5,))
    with pytest.raises(ValueError, match="cannot be specified for 2D"):
        dist.get_local_slices((24, 7), data_parallel_dim=0)
    with pytest.raises(ValueError, match="reserved"):
        dist.get_local_slices((2, 5, 24), data_parallel_dim=-1)
    if D > 1:
        with pytest.raises(ValueError, match="divisible by data parallel"):
            dist.get_local_slices((D + 1, 5, 7), data_parallel_dim=0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_reductions_over_the_data_group(dist, kind, dtype):
    d = dist.data_parallel_rank
    base = np.arange(6, dtype=dtype).reshape(2, 3) + WORLD.Get_rank() % (H * W)
    x = as_kind(base + d, kind)
    out = dist.reduce_sum(x)
    assert out is x and np.array_equal(to_numpy(x), base * D + D * (D - 1) // 2)
    x = as_kind(base + d, kind)
    assert np.array_equal(to_numpy(dist.reduce_min(x)), base) and np.array_equal(to_numpy(x), base)
    x = as_kind(base + d, kind)
    assert np.array_equal(to_numpy(dist.reduce_max(x)), base + D - 1)
    if np.dtype(dtype).kind == "f":
        x = as_kind(base + d, kind)
        mean = dist.reduce_mean(x)
        np.testing.assert_allclose(to_numpy(mean), base + (D - 1) / 2)
        assert np.array_equal(to_numpy(x), base * D + D * (D - 1) // 2), "reduce_mean leaves the sum in place, as ACE"


def test_reduce_of_a_strided_view_writes_back(dist):
    x = np.zeros((4, 6))
    view = x[:, ::2]
    view[...] = 1.0
    dist.reduce_sum(view)
    assert (x[:, ::2] == D).all() and (x[:, 1::2] == 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_spatial_sum_and_broadcast(dist, kind):
    spatial_rank = WORLD.Get_rank() % (H * W)
    x = as_kind(np.full((3,), float(spatial_rank + 1)), kind)
    total = dist.spatial_reduce_sum(x)
    assert np.array_equal(to_numpy(total), np.full(3, H * W * (H * W + 1) / 2))
    assert to_numpy(x)[0] == spatial_rank + 1, "the input is left alone"
    root = WORLD.Get_rank() - spatial_rank
    assert np.array_equal(to_numpy(dist.broadcast_spatial(as_kind(np.full(3, float(WORLD.Get_rank())), kind))),
                          np.full(3, float(root)))


@pytest.mark.parametrize("kind", KINDS)
def test_data_parallel_gather_and_scatter(dist, kind):
    d = dist.data_parallel_rank
    got = dist.data_parallel_gather(as_kind(np.full((2, 3), d, dtype=np.float32), kind))
    assert [to_numpy(g)[0, 0] for g in got] == list(range(D)) if d == 0 else got is None
    target = as_kind(np.zeros(4), kind)
    pieces = [as_kind(np.full(4, 10.0 * k), kind) for k in range(D)] if d == 0 else None
    assert dist.data_parallel_scatter(target, pieces) is target and (to_numpy(target) == 10.0 * d).all()


@pytest.mark.parametrize("kind", KINDS)
def test_gather_and_gather_irregular(dist, kind):
    rank = WORLD.Get_rank()
    got = dist.gather(as_kind(np.full((2, 3), rank, dtype=np.int64), kind))
    irregular = dist.gather_irregular(as_kind(np.full((rank % 3 + 1, 2), float(rank)), kind))
    if rank == 0:
        assert [to_numpy(g)[0, 0] for g in got] == list(range(WORLD.Get_size()))
        assert [g.shape for g in irregular] == [(r % 3 + 1, 2) for r in range(WORLD.Get_size())]
        assert all((to_numpy(g) == r).all() for r, g in enumerate(irregular))
    else:
        assert got is None and irregular is None
    if WORLD.Get_size() > 1:
        with pytest.raises(ValueError, match="shapes differ"):
            dist.gather(np.zeros((rank % 2 + 1,)))


def test_gather_and_scatter_objects(dist):
    got = dist.gather_object(("r", WORLD.Get_rank()))
    assert got == [("r", r) for r in range(WORLD.Get_size())] if WORLD.Get_rank() == 0 else got is None
    mine = ["a", WORLD.Get_rank()] if WORLD.Get_rank() == 0 else None
    assert dist.scatter_object(mine) == ["a", 0]
    with pytest.raises(ValueError, match="Root process must provide"):
        dist.scatter_object(None)
    unpicklable = (lambda: 0) if WORLD.Get_rank() == WORLD.Get_size() - 1 else 1
    with pytest.raises(gridshard.ArgumentError, match="cannot be pickled"):
        dist.gather_object(unpicklable)
    d_got = dist.data_parallel_gather_object(dist.data_parallel_rank)
    assert d_got == list(range(D)) if dist.is_data_parallel_root() else d_got is None
    assert dist.data_parallel_broadcast_object({"d": dist.data_parallel_rank}) == {"d": 0}


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
def test_gather_global(dist, grid, kind):
    shape = (2 * D, 3) + grid
    whole = index_fill(shape)
    got = dist.gather_global(as_kind(whole[dist.get_local_slices(shape, 0)], kind), shape, data_parallel_dim=0)
    # Spatial only: each data replica holds its own field (here offset by d); rank 0 gets replica 0's.
    replica = index_fill((3,) + grid) + 1000 * dist.data_parallel_rank
    spatial = dist.gather_global(as_kind(replica[dist.get_local_slices(replica.shape)], kind), replica.shape, None)
    if WORLD.Get_rank() == 0:
        assert np.array_equal(to_numpy(got), whole)
        assert np.array_equal(to_numpy(spatial), index_fill((3,) + grid))
    else:
        assert got is None and spatial is None


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("kind", KINDS)
def test_gather_and_scatter_spatial(dist, grid, kind):
    whole = index_fill((2, 3) + grid).astype(np.float32)
    shard = as_kind(local(dist, whole), kind)
    assert np.array_equal(to_numpy(dist.gather_spatial_tensor(shard, grid)), whole)
    already = as_kind(whole, kind)
    assert dist.gather_spatial_tensor(already, grid) is already
    scattered = dist.scatter_spatial({"x": as_kind(whole, kind)}, grid)
    assert np.array_equal(to_numpy(scattered["x"]), local(dist, whole))
    assert np.array_equal(to_numpy(dist.gather_spatial(scattered, grid)["x"]), whole)


# ---------------------------------------------------------------- errors: on every rank, never a hang


def test_a_bad_argument_on_one_rank_raises_on_every_rank(dist):
    truth, _, weights = fields((9, 14), np.float64)
    x = local(dist, truth)
    if WORLD.Get_rank() == WORLD.Get_size() - 1:
        x = x.astype(np.float16)
    if dist.data_parallel_rank == D - 1:  # the metric's group: the spatial ranks of the last data replica
        with pytest.raises(gridshard.ArgumentError, match="float16"):
            dist.weighted_mean(x, local(dist, weights))
    else:
        dist.weighted_mean(x, local(dist, weights))
    with pytest.raises(ValueError, match=r"dim=\(-1,\)"):
        dist.weighted_mean(local(dist, truth), None, dim=(-1,))
    with pytest.raises(ValueError, match=r"dim=\(1, 2, 3\)"):
        dist.weighted_mean(local(dist, truth), None, dim=(1, 2, 3))
    if WORLD.Get_size() > 1:
        w = local(dist, weights)
        if WORLD.Get_rank() == 0:
            w = w[:1, :1][:, :0]  # weights that cannot broadcast to the shard
        if dist.data_parallel_rank == 0 and H * W > 1 or WORLD.Get_rank() == 0:
            with pytest.raises(gridshard.ArgumentError, match="weights"):
                dist.weighted_mean(local(dist, truth), w)
        else:
            dist.weighted_mean(local(dist, truth), w)


def test_shards_that_are_not_a_split_raise_on_every_rank(dist):
    truth, _, _ = fields((9, 14), np.float64)
    x = local(dist, truth)
    # Spatial rank 0 holds one row (or, with one column of ranks, one column) more than the ranks that share
    # its mesh row (column): no split of any grid gives that.
    if WORLD.Get_rank() % (H * W) == 0:
        axis = -2 if W > 1 else -1
        x = np.concatenate([x, np.take(x, [0], axis=axis)], axis=axis)
    if H * W > 1:
        with pytest.raises(gridshard.ArgumentError, match="hold shards of"):
            dist.weighted_mean(x, None)
    with pytest.raises(gridshard.ArgumentError, match="img_shape"):
        dist.gradient_magnitude_percent_diff(local(dist, truth), local(dist, truth), None, img_shape=(9, 15))


@pytest.mark.skipif(torch is None, reason="torch is not importable")
def test_a_tensor_without_data_is_refused_on_every_rank(dist):
    # Tensors on other devices are staged through host memory (docs/python.md); a meta tensor has nothing to stage.
    x = torch.empty((2, 9, 14), device="meta")
    with pytest.raises(gridshard.ArgumentError, match=r"data: .*meta"):
        dist.weighted_mean(x, None)


def test_errors_are_value_and_runtime_errors():
    assert issubclass(gridshard.ArgumentError, ValueError)
    assert issubclass(gridshard.MpiError, RuntimeError)


def test_from_env(monkeypatch):
    monkeypatch.setenv("FME_DISTRIBUTED_BACKEND", "model")
    monkeypatch.setenv("FME_DISTRIBUTED_H", str(H))
    monkeypatch.setenv("FME_DISTRIBUTED_W", str(W))
    assert gridshard.Distributed.from_env().mesh_shape == (D, H, W)
    monkeypatch.setenv("FME_DISTRIBUTED_BACKEND", "torch")
    assert gridshard.Distributed.from_env().mesh_shape == (WORLD.Get_size(), 1, 1)
    monkeypatch.setenv("FME_DISTRIBUTED_BACKEND", "none")
    none = gridshard.Distributed.from_env()
    assert none.world_size == 1 and none.rank == 0
    monkeypatch.setenv("FME_DISTRIBUTED_BACKEND", "nccl")
    with pytest.raises(ValueError, match="Unknown FME_DISTRIBUTED_BACKEND value 'nccl'"):
        gridshard.Distributed.from_env()
    if WORLD.Get_size() > 1:
        monkeypatch.setenv("FME_DISTRIBUTED_BACKEND", "model")
        monkeypatch.setenv("FME_DISTRIBUTED_H", str(WORLD.Get_size() + 1))
        with pytest.raises(ValueError, match="divisible by h_size"):
            gridshard.Distributed.from_env()


# ---------------------------------------------------------------- what one rank alone gets wrong


def last_rank():
    return WORLD.Get_rank() == WORLD.Get_size() - 1


@pytest.mark.skipif(WORLD.Get_size() == 1, reason="needs two ranks that disagree")
def test_ranks_that_disagree_raise_on_every_rank(dist):
    in_group = dist.data_parallel_rank == D - 1  # the last rank's data replica or spatial group
    x = np.ones((2, 3), dtype=np.int32 if last_rank() else np.float32)
    # A reduction over the data group: the last rank's group disagrees on the dtype.
    same_data_group = WORLD.Get_rank() % (H * W) == (WORLD.Get_size() - 1) % (H * W)
    if same_data_group and D > 1:
        with pytest.raises(gridshard.ArgumentError, match="differ|dtype"):
            dist.reduce_sum(x)
    elif D > 1:
        dist.reduce_sum(x)
    truth, _, weights = fields((9, 14), np.float64)
    t = local(dist, truth)
    if H * W > 1:
        swapped = np.ascontiguousarray(t.transpose(1, 0, 2, 3)) if last_rank() else t  # (3, 2) against (2, 3)
        if in_group:
            with pytest.raises(gridshard.ArgumentError, match="leading dims"):
                dist.weighted_mean(swapped, local(dist, weights))
        else:
            dist.weighted_mean(swapped, local(dist, weights))
        w = None if last_rank() else local(dist, weights)
        if in_group:
            with pytest.raises(gridshard.ArgumentError, match="weights are given"):
                dist.weighted_mean(t, w)
        else:
            dist.weighted_mean(t, w)
    with pytest.raises(gridshard.ArgumentError, match="different arguments"):
        gridshard.Distributed(spatial_parallelism=(H, W), split="bogus" if last_rank() else "div_up")
    img = "9x14" if last_rank() else (9, 14)
    if in_group:
        with pytest.raises(gridshard.ArgumentError, match="img_shape"):
            dist.gradient_magnitude_percent_diff(t, t, None, img_shape=img)
    else:
        dist.gradient_magnitude_percent_diff(t, t, None, img_shape=img)


def test_reductions_refuse_what_they_cannot_write_into(dist):
    with pytest.raises(gridshard.ArgumentError, match="numpy array or a torch tensor"):
        dist.reduce_sum(float(WORLD.Get_rank()))


@pytest.mark.parametrize("per_point", [False, True])
@pytest.mark.parametrize("grid", [(5, W), (5, 1), (3, 5), (5, 3)])
def test_one_column_and_empty_shards_keep_the_serial_bits(dist, serial, grid, per_point):
    """Shards one column wide (or empty, under div_up) take the weights' form of the whole field."""
    if dist._mesh.split == "balanced" and (grid[0] < H or grid[1] < W):
        pytest.skip("balanced needs a point per rank")
    truth, prediction, point_weights = fields(grid, np.float64)
    weights = gridshard.spherical_area_weights(np.linspace(-60, 60, grid[0]), grid[1])
    if per_point:
        weights = point_weights
    got = dist.weighted_mean(local(dist, truth), weights[dist.get_local_slices(grid)])
    assert_same_bits(got, serial.weighted_mean(truth, weights))
    got = dist.rmse_of_time_mean(local(dist, truth), local(dist, prediction), weights[dist.get_local_slices(grid)])
    assert_same_bits(got, serial.rmse_of_time_mean(truth, prediction, weights))


# ---------------------------------------------------------------- std far from zero, against exact rationals


def exact_weighted_std(x, w):
    """The weighted population std of the values x (as stored) with weights w, from exact rational arithmetic
    (fractions) and a 40-digit square root, per leading index."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    w = np.broadcast_to(np.asarray(w, dtype=np.float64), x.shape[-2:]).ravel()
    out = []
    for field in x.reshape(-1, x.shape[-2] * x.shape[-1]):
        values = [Fraction(float(v)) for v in field]
        weights = [Fraction(float(a)) for a in w]
        total = sum(weights)
        mean = sum(a * v for a, v in zip(weights, values)) / total
        variance = sum(a * (v - mean) ** 2 for a, v in zip(weights, values)) / total
        with localcontext() as context:
            context.prec = 40
            out.append(float((Decimal(variance.numerator) / Decimal(variance.denominator)).sqrt()))
    return np.array(out).reshape(x.shape[:-2])


@pytest.mark.parametrize("weighting", ["per_point", "per_row", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_weighted_std_far_from_zero_is_right_and_the_same_bits_at_every_mesh(dist, serial, dtype, weighting):
    # 1e8 + 1e-3 noise in float64 (std / mean ~ 1e-11), 1e6 + noise in float32 (~ 1e-6): a sum of a x^2
    # rounded per term, or a variance finalised in 106 bits, loses the std entirely.
    grid = (9, 14)
    rng = np.random.default_rng(5)
    offset, noise = (1e8, 1e-3) if dtype == np.float64 else (1e6, 0.5)
    x = (offset + noise * rng.standard_normal((2,) + grid)).astype(dtype)
    x[1] = x[1, 0, 0]  # a constant field: exactly 0
    weights = {"per_point": rng.uniform(0.5, 2.0, grid),
               "per_row": np.asarray(gridshard.spherical_area_weights(np.linspace(-80, 80, grid[0]), grid[1])),
               "none": None}[weighting]
    got = dist.weighted_std(local(dist, x), None if weights is None else local(dist, weights))
    assert_same_bits(got, serial.weighted_std(x, weights))
    want = exact_weighted_std(x, 1.0 if weights is None else weights)
    assert got[1] == 0.0
    if dtype == np.float64:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=0)
    else:  # a float32 result: the exact std, correctly rounded to float32 within an ulp
        assert abs(float(got[0]) - want[0]) <= float(np.spacing(np.float32(want[0]))), (got[0], want[0])
    # One point of non-zero weight: exactly 0.
    if weights is not None:
        single = np.zeros(grid)
        single[grid[0] // 2, 3] = 0.7
        assert dist.weighted_std(local(dist, x), local(dist, single))[0] == 0.0
