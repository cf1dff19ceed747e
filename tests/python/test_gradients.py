"""Gradients through gridshard.Distributed on shards, under mpirun on the mesh of GRIDSHARD_TEST_MESH, both split rules.

Every rank builds the same global float64 fields and takes its slices. For each reduction and each complete loss, the
loss (replicated on the spatial group) is the library's value, bit for bit the serial one, and close to the same loss
written in torch on the global field in one process; each rank's gradient is the slice of torch.autograd's gradient
of that global loss, to 1e-12 relative; the gradients of the exact reductions are the same bits on every layout (the
serial gridshard gradient, sliced); a loss that is a sum of per-rank parts (a halo-exchanged stencil summed over this
rank's points) gets, after every rank's backward, the gradient of the sum of the parts (the adjoint exchange carries
the neighbours' parts). torch.autograd.gradcheck passes on small cases, serially."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402

pytest_plugins = ["mesh_fixtures"]  # the fixtures dist and serial

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD
# GRIDSHARD_TEST_DEVICE=cuda runs the suite on the GPU (tests/device/run_device_check.sh); the CPU by default.
DEVICE = torch.device(os.environ.get("GRIDSHARD_TEST_DEVICE", "cpu"))
GRIDS = [(9, 14), (5, 8)]  # uneven under both rules; one-row shards at 4 ranks along an axis
RTOL = 1e-12


def fields(grid, seed=0, channels=(2, 3)):
    rng = np.random.default_rng(seed)
    shape = channels + grid
    lat = np.deg2rad(np.linspace(-80, 80, grid[0]))[:, None]
    truth = 280 + 20 * np.cos(lat) + rng.standard_normal(shape)
    prediction = truth + rng.standard_normal(shape)
    weights = np.broadcast_to(np.cos(lat), grid) * rng.uniform(0.5, 1.5, grid)
    return (torch.from_numpy(truth).to(DEVICE), torch.from_numpy(prediction).to(DEVICE),
            torch.from_numpy(np.ascontiguousarray(weights)).to(DEVICE))


def local(dist, tensor):
    return tensor[dist.get_local_slices(tuple(tensor.shape))]


def leaf(tensor):
    return tensor.detach().clone().requires_grad_(True)


def close(got, want, what):
    got, want = got.detach(), want.detach()
    scale = want.abs().max().clamp_min(1e-300)
    assert torch.allclose(got, want, rtol=RTOL, atol=RTOL * float(scale), equal_nan=True), (
        what, float(((got - want).abs() / scale).nan_to_num().max()))


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.shape)
    bits = {8: torch.int64, 4: torch.int32, 2: torch.int16}[got.element_size()]
    assert torch.equal(got.contiguous().view(bits), want.contiguous().view(bits)), what


# ---------------------------------------------------------------- references: the global losses written in torch


def ref_weighted_mean(x, w):
    return (torch.where(w != 0, x, 0) * w).sum(dim=(-2, -1)) / w.sum()


def ref_gradient_magnitude(x):
    g_lat, g_lon = torch.gradient(x, dim=(-2, -1))
    return torch.sqrt(g_lat ** 2 + g_lon ** 2)


def ref_halo(x, width, periodic_lon=True):
    """The global field padded as halo_exchange pads every shard: rows beyond the poles zero."""
    padded = torch.cat([x[..., -width:], x, x[..., :width]], dim=-1) if periodic_lon else torch.nn.functional.pad(
        x, (width, width))
    return torch.nn.functional.pad(padded, (0, 0, width, width))


def finite_difference(padded):
    """A loss's stencil: squared differences with the four neighbours, at every point of the padded middle."""
    middle = padded[..., 1:-1, 1:-1]
    return ((padded[..., 2:, 1:-1] - middle) ** 2 + (padded[..., 1:-1, 2:] - middle) ** 2)


def patch_sum(padded, width):
    rows, cols = padded.shape[-2] - 2 * width, padded.shape[-1] - 2 * width
    total = 0
    for di in range(2 * width + 1):
        for dj in range(2 * width + 1):
            total = total + padded[..., di:di + rows, dj:dj + cols]
    return total


# Each case: (name, distributed loss(dist, t, p, w, region) -> replicated scalar, global torch loss(t, p, w, region),
# exact?); the distributed loss takes this rank's shards of t, p and w, and the global region.
def _k(x):
    return torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device)  # a coefficient per channel


CASES = [
    ("weighted_sum", lambda d, t, p, w, r: (d.weighted_sum(p, w) * _k(p)).sum(),
     lambda t, p, w, r: ((torch.where(w != 0, p, 0) * w).sum(dim=(-2, -1)) * _k(p)).sum(), True),
    ("weighted_mean", lambda d, t, p, w, r: (d.weighted_mean(p, w) * _k(p)).sum(),
     lambda t, p, w, r: (ref_weighted_mean(p, w) * _k(p)).sum(), True),
    ("weighted_std", lambda d, t, p, w, r: d.weighted_std(p, w).sum(),
     lambda t, p, w, r: ((ref_weighted_mean(p * p, w) - ref_weighted_mean(p, w) ** 2).sqrt()).sum(), True),
    ("bias", lambda d, t, p, w, r: (d.weighted_mean_bias(t, p, w) ** 2).sum(),
     lambda t, p, w, r: (ref_weighted_mean(p - t, w) ** 2).sum(), True),
    ("area_weighted_mse (ACE's loss)", lambda d, t, p, w, r: d.weighted_mean((p - t) ** 2, w).mean(),
     lambda t, p, w, r: ref_weighted_mean((p - t) ** 2, w).mean(), True),
    ("rmse", lambda d, t, p, w, r: d.root_mean_squared_error(t, p, w).sum(),
     lambda t, p, w, r: ref_weighted_mean((p - t) ** 2, w).sqrt().sum(), True),
    ("global_mean MSE", lambda d, t, p, w, r: d.global_mean((p - t) ** 2).mean(),
     lambda t, p, w, r: ((p - t) ** 2).mean(), True),
    ("global_mean L1", lambda d, t, p, w, r: d.global_mean((p - t).abs()).mean(),
     lambda t, p, w, r: (p - t).abs().mean(), True),
    ("regional_weighted_mean",
     lambda d, t, p, w, r: d.regional_weighted_mean(p, w, local(d, r)).sum(),
     lambda t, p, w, r: ref_weighted_mean(p, w * r).sum(), True),
    ("spatial_reduce_sum", lambda d, t, p, w, r: d.spatial_reduce_sum(((p - t) ** 2).sum()),
     lambda t, p, w, r: ((p - t) ** 2).sum(), False),
    ("gradient_magnitude", lambda d, t, p, w, r: d.global_mean(d.gradient_magnitude(p) * _k(p)[:, None, None]).sum(),
     lambda t, p, w, r: (ref_gradient_magnitude(p) * _k(p)[:, None, None]).mean(dim=(-2, -1)).sum(), True),
    ("weighted_mean_gradient_magnitude", lambda d, t, p, w, r: d.weighted_mean_gradient_magnitude(p, w).sum(),
     lambda t, p, w, r: ref_weighted_mean(ref_gradient_magnitude(p), w).sum(), True),
    ("gradient_magnitude_percent_diff", lambda d, t, p, w, r: d.gradient_magnitude_percent_diff(t, p, w).sum(),
     lambda t, p, w, r: (100 * (ref_weighted_mean(ref_gradient_magnitude(p), w)
                                - ref_weighted_mean(ref_gradient_magnitude(t), w))
                         / ref_weighted_mean(ref_gradient_magnitude(t), w)).sum(), True),
    ("finite-difference loss (periodic halo)",
     lambda d, t, p, w, r: d.global_mean(finite_difference(d.halo_exchange(p - t, 1, periodic_lon=True))).sum(),
     lambda t, p, w, r: finite_difference(ref_halo(p - t, 1)).mean(dim=(-2, -1)).sum(), False),
    ("3x3 patch sum", lambda d, t, p, w, r: d.global_mean(patch_sum(d.halo_exchange(p, 1), 1) ** 2).sum(),
     lambda t, p, w, r: (patch_sum(ref_halo(p, 1), 1) ** 2).mean(dim=(-2, -1)).sum(), False),
    ("5x5 patch sum, width 2", lambda d, t, p, w, r: d.global_mean(patch_sum(d.halo_exchange(p, 2), 2) ** 2).sum(),
     lambda t, p, w, r: (patch_sum(ref_halo(p, 2), 2) ** 2).mean(dim=(-2, -1)).sum(), False),
]


def region_of(w):
    rows, cols = w.shape
    i, j = torch.meshgrid(torch.arange(rows, device=w.device), torch.arange(cols, device=w.device), indexing="ij")
    return ((i < rows // 2) & (j % 3 != 0)).to(w.dtype)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("name,loss,reference,exact", CASES, ids=[c[0] for c in CASES])
def test_loss_and_gradient_are_the_global_ones(dist, serial, grid, name, loss, reference, exact):
    t, p, w = fields(grid)
    region = region_of(w)
    tl, pl = leaf(local(dist, t)), leaf(local(dist, p))
    value = loss(dist, tl, pl, local(dist, w), region)
    value.backward()
    tg, pg = leaf(t), leaf(p)
    want = reference(tg, pg, w, region)
    want.backward()
    close(value, want, name + ": the loss")
    if exact:  # the library's value: the serial one, bit for bit
        ts, ps = leaf(t), leaf(p)
        alone = loss(serial, ts, ps, w, region)
        same_bits(value.detach(), alone.detach(), name + ": the value against one rank")
        alone.backward()
        for got, whole in ((tl.grad, ts.grad), (pl.grad, ps.grad)):
            if whole is not None:
                same_bits(got, local(dist, whole), name + ": the gradient against one rank")
    for got, whole in ((tl.grad, tg.grad), (pl.grad, pg.grad)):
        if whole is None:
            assert got is None or not got.abs().any(), name
            continue
        assert got is not None, name
        close(got, local(dist, whole), name + ": the gradient")


def test_weighted_nanmean_and_zonal_mean_leave_nan_points_out(dist, serial):
    t, p, w = fields((9, 14))
    p[0, 1, 3:6, 2:9] = float("nan")
    x = leaf(local(dist, p))
    rows = dist.get_local_slices((9, 14))[0]
    coefficient = torch.arange(1, 10, dtype=torch.float64, device=DEVICE)
    # The rows' part of the loss summed over the spatial group counts each row once per lon rank: / W.
    zonal_part = dist.spatial_reduce_sum((dist.zonal_mean(x) * coefficient[rows]).sum()) / W
    loss = dist.weighted_nanmean(x, local(dist, w)).sum() + zonal_part
    loss.backward()
    g = leaf(p)
    valid = ~torch.isnan(g)
    nanmean = (torch.where(valid, g, 0) * w).sum(dim=(-2, -1)) / (valid * w).sum(dim=(-2, -1))
    zonal = torch.where(valid, g, 0).sum(-1) / valid.sum(-1)
    (nanmean.sum() + (zonal * coefficient).sum()).backward()
    close(x.grad, local(dist, g.grad), "nanmean and zonal mean")
    assert not x.grad[~valid[dist.get_local_slices(tuple(p.shape))]].any()


def _zonal_fields(grid):
    """A field with NaN holes in some rows (none all NaN), a per-point coefficient c and a per-row one d."""
    t, p, w = fields(grid)
    p[0, 1, 2:4, 3:9] = float("nan")
    p[1, 2, grid[0] - 1, ::3] = float("nan")
    rng = np.random.default_rng(11)
    c = torch.from_numpy(rng.uniform(0.5, 2.0, grid)).to(DEVICE)
    d = torch.from_numpy(rng.uniform(0.5, 2.0, grid[0])).to(DEVICE)
    return p, c, d


def _global_zonal(x):
    valid = ~torch.isnan(x)
    return torch.where(valid, x, 0).sum(-1) / valid.sum(-1)


# The losses of a zonal mean that docs/python.md supports: the rows' means (replicated over the lon group) broadcast
# back over the rank's own columns and reduced by a spatial reduction, or a per-row sum over the spatial group divided
# by the lon ranks (each row is held by W of them). (distributed loss(dist, x, c, d), global loss(x, c, d))
ZONAL_LOSSES = [
    ("global_mean(zonal_mean(x)[..., None] ** 2 * c)",
     lambda dt, x, c, d: dt.global_mean(dt.zonal_mean(x)[..., None] ** 2 * local(dt, c)).sum(),
     lambda x, c, d: (_global_zonal(x)[..., None] ** 2 * c).mean(dim=(-2, -1)).sum()),
    ("spatial_reduce_sum(sum_i d_i zm_i ** 2) / w",
     lambda dt, x, c, d: dt.spatial_reduce_sum((d[dt.get_local_slices(tuple(c.shape))[0]]
                                                * dt.zonal_mean(x) ** 2).sum()) / W,
     lambda x, c, d: (d * _global_zonal(x) ** 2).sum()),
    ("weighted_mean(zonal_mean(x)[..., None] * c, a)",
     lambda dt, x, c, d: dt.weighted_mean(dt.zonal_mean(x)[..., None] * local(dt, c), local(dt, c)).sum(),
     lambda x, c, d: ref_weighted_mean(_global_zonal(x)[..., None] * c, c).sum()),
]


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("name,loss,reference", ZONAL_LOSSES, ids=[z[0] for z in ZONAL_LOSSES])
def test_zonal_mean_losses_get_the_global_gradient(dist, grid, name, loss, reference):
    """Every rank's gradient is that of the global loss with respect to its shard, the lon group's replicas of the
    rows' means adding their upstream gradients (the adjoint of the forward's allreduce over lon), NaN points left
    out; against torch.autograd on the gathered field."""
    p, c, d = _zonal_fields(grid)
    x = leaf(local(dist, p))
    value = loss(dist, x, c, d)
    value.backward()
    g = leaf(p)
    want = reference(g, c, d)
    want.backward()
    close(value, want, name + ": the loss")
    close(x.grad, local(dist, g.grad), name + ": the gradient")
    assert not x.grad[torch.isnan(x.detach())].any(), name


class _ShardOf(torch.autograd.Function):
    """This rank's shard of a global tensor that every rank holds alike; its backward puts the shard's gradient in its
    place and adds every spatial rank's (an allreduce over the spatial group): the gradient with respect to the global
    tensor, so torch's gradcheck, perturbing the same global entry on every rank, checks every rank's gradient."""

    @staticmethod
    def forward(ctx, dist, whole):
        ctx.dist, ctx.shape = dist, whole.shape
        return whole[dist.get_local_slices(tuple(whole.shape))].clone()

    @staticmethod
    def backward(ctx, grad):
        full = torch.zeros(ctx.shape, dtype=grad.dtype)
        full[ctx.dist.get_local_slices(tuple(ctx.shape))] = grad.cpu()
        total = ctx.dist._spatial_comm.allreduce(full.numpy(), op=MPI.SUM)
        return None, torch.from_numpy(total).to(grad.device)


@pytest.mark.parametrize("name,loss,reference", ZONAL_LOSSES, ids=[z[0] for z in ZONAL_LOSSES])
def test_gradcheck_on_shards(dist, name, loss, reference):
    p, c, d = _zonal_fields((5, 6))
    p = p[:1, :2]
    assert torch.autograd.gradcheck(lambda whole: loss(dist, _ShardOf.apply(dist, whole), c, d), (leaf(p),),
                                    eps=1e-6, atol=1e-7)


def test_gradient_scores_leave_invalid_magnitudes_out(dist, serial):
    """NaN values in both fields, in different places: each field's mean magnitude is over its own valid magnitudes
    (ACE's rule), and no gradient reaches a point from a magnitude that is not valid. The reference fills the NaN
    points before differencing (torch's own gradient of an unselected NaN branch is NaN) and masks the magnitudes
    by those of the field with its NaN."""
    t, p, w = fields((9, 14))
    t[1, 0, 0:2, 10:13] = float("nan")  # at the pole row and at the grid's edge
    p[0, 2, 4:6, 0:3] = float("nan")
    p[1, 1, 7, 5] = float("nan")
    xt, xp = leaf(local(dist, t)), leaf(local(dist, p))
    wl = local(dist, w)
    loss = dist.gradient_magnitude_percent_diff(xt, xp, wl).sum() + dist.weighted_mean_gradient_magnitude(xp, wl).sum()
    loss.backward()
    gt, gp = leaf(t), leaf(p)

    def nanmean_magnitude(x):
        valid = ~torch.isnan(ref_gradient_magnitude(x.detach()))
        magnitude = ref_gradient_magnitude(torch.where(torch.isnan(x), 0, x))
        return (torch.where(valid, magnitude, 0) * w).sum(dim=(-2, -1)) / (valid * w).sum(dim=(-2, -1))

    want = (100 * (nanmean_magnitude(gp) - nanmean_magnitude(gt)) / nanmean_magnitude(gt)).sum() + \
        nanmean_magnitude(gp).sum()
    want.backward()
    close(loss, want, "gradient scores with NaN: the value")
    same_bits(loss, serial.gradient_magnitude_percent_diff(t, p, w).sum() +
              serial.weighted_mean_gradient_magnitude(p, w).sum(), "the plain calls' bits")
    for name, got, whole in (("truth", xt.grad, gt.grad), ("prediction", xp.grad, gp.grad)):
        assert torch.isfinite(got).all(), name
        close(got, local(dist, whole), f"gradient scores with NaN: the {name}'s gradient")


@pytest.mark.parametrize("score", ["crps", "fair_crps", "spread", "ensemble_mean_rmse", "spread_skill_ratio"])
def test_ensemble_scores(dist, score):
    t, p, w = fields((9, 14))
    rng = np.random.default_rng(4)
    ensemble = torch.from_numpy(np.stack([p.cpu().numpy() + rng.standard_normal(p.shape) for _ in range(4)]))
    ensemble = ensemble.to(DEVICE)
    y, x = leaf(local(dist, t)), leaf(ensemble[(slice(None),) + dist.get_local_slices(tuple(p.shape))])
    call = {"crps": lambda d, a, b, v: d.crps(a, b, v), "fair_crps": lambda d, a, b, v: d.crps(a, b, v, fair=True),
            "spread": lambda d, a, b, v: d.ensemble_spread(a, b, v),
            "ensemble_mean_rmse": lambda d, a, b, v: d.ensemble_mean_rmse(a, b, v),
            "spread_skill_ratio": lambda d, a, b, v: d.spread_skill_ratio(a, b, v)}[score]
    call(dist, y, x, local(dist, w)).sum().backward()
    yg, xg = leaf(t), leaf(ensemble)
    m = xg.shape[0]
    mean = xg.mean(0)
    pointwise = {
        "crps": (xg - yg).abs().mean(0) - (xg[:, None] - xg[None]).abs().sum((0, 1)) / (2 * m * m),
        "fair_crps": (xg - yg).abs().mean(0) - (xg[:, None] - xg[None]).abs().sum((0, 1)) / (2 * m * (m - 1)),
        "spread": ((xg - mean) ** 2).sum(0) / (m - 1), "ensemble_mean_rmse": (mean - yg) ** 2,
        "spread_skill_ratio": None}[score]
    if score == "spread_skill_ratio":
        value = (ref_weighted_mean(((xg - mean) ** 2).sum(0) / (m - 1), w)
                 / ref_weighted_mean((mean - yg) ** 2, w)).sqrt()
    else:
        value = ref_weighted_mean(pointwise, w)
        value = value.sqrt() if score in ("spread", "ensemble_mean_rmse") else value
    value.sum().backward()
    if yg.grad is None:  # the spread does not depend on the truth
        assert y.grad is None or not y.grad.any(), score
    else:
        close(y.grad, local(dist, yg.grad), score + ": the truth's gradient")
    close(x.grad, xg.grad[(slice(None),) + dist.get_local_slices(tuple(p.shape))], score + ": the members'")


class _CountingLibrary:
    """The compiled module with each function call it serves recorded by name."""

    def __init__(self, core):
        self._core, self.calls = core, []

    def __getattr__(self, name):
        served = getattr(self._core, name)
        if not callable(served) or isinstance(served, type):
            return served

        def counted(*args, **kwargs):
            self.calls.append(name)
            return served(*args, **kwargs)
        return counted


# Each differentiated reduction: its call on shards (d, t, p, e, w, r), and the library calls its forward may make
# beside its one reduction (the gradient magnitude's adjoint, formed in the forward pass, one per field; on the device
# path one for both).
ONE_CALL_CASES = [
    ("weighted_sum", lambda d, t, p, e, w, r: d.weighted_sum(p, w), 0),
    ("weighted_mean", lambda d, t, p, e, w, r: d.weighted_mean(p, w, keepdim=True), 0),
    ("weighted_nanmean", lambda d, t, p, e, w, r: d.weighted_nanmean(p, w), 0),
    ("weighted_std", lambda d, t, p, e, w, r: d.weighted_std(p, w), 0),
    ("bias", lambda d, t, p, e, w, r: d.weighted_mean_bias(t, p, w), 0),
    ("rmse", lambda d, t, p, e, w, r: d.root_mean_squared_error(t, p, w), 0),
    ("regional_weighted_mean", lambda d, t, p, e, w, r: d.regional_weighted_mean(p, w, r), 0),
    ("zonal_mean", lambda d, t, p, e, w, r: d.zonal_mean(p), 0),
    ("crps", lambda d, t, p, e, w, r: d.crps(t, e, w), 0),
    ("spread_skill_ratio", lambda d, t, p, e, w, r: d.spread_skill_ratio(t, e, w), 0),
    ("weighted_mean_gradient_magnitude", lambda d, t, p, e, w, r: d.weighted_mean_gradient_magnitude(p, w), 1),
    ("gradient_magnitude_percent_diff", lambda d, t, p, e, w, r: d.gradient_magnitude_percent_diff(t, p, w), 2),
]


@pytest.mark.parametrize("name,call,adjoints", ONE_CALL_CASES, ids=[c[0] for c in ONE_CALL_CASES])
def test_a_differentiated_reduction_is_one_library_call(dist, monkeypatch, name, call, adjoints):
    """The forward pass of each gradient rule takes its value and every sum its backward needs from one library call
    (one allreduce), as the plain call does, or from one call of the device path (GRIDSHARD_DEVICE_PATH=always); only
    the gradient magnitude adds its adjoint, one call per field (on the device path one for both)."""
    import gridshard._device
    import gridshard._gradients
    import gridshard._metrics

    counting = _CountingLibrary(gridshard._metrics._core)
    monkeypatch.setattr(gridshard._metrics, "_core", counting)
    monkeypatch.setattr(gridshard._gradients, "_core", counting)
    on_device = _CountingLibrary(gridshard._device)
    on_device.calls = counting.calls
    monkeypatch.setattr(gridshard._metrics, "_device", on_device)
    gradients_on_device = _CountingLibrary(gridshard._device_gradient)
    gradients_on_device.calls = counting.calls
    monkeypatch.setattr(gridshard._gradients, "_device_gradient", gradients_on_device)
    t, p, w = fields((9, 14))
    ensemble = torch.stack([p + k for k in range(3)])
    slices = dist.get_local_slices(tuple(p.shape))
    y, x = leaf(t[slices]), leaf(p[slices])
    e = leaf(ensemble[(slice(None),) + slices])
    value = call(dist, y, x, e, local(dist, w), local(dist, region_of(w)))
    adjoint_calls = ("gradient_magnitude_backward", "mean_jacobians")
    reductions = [c for c in counting.calls if c not in adjoint_calls + ("percent_difference",)]
    assert len(reductions) == 1, (name, counting.calls)
    if "mean_jacobians" in counting.calls:  # the device path: one adjoint for every field
        adjoints = min(adjoints, 1)
    assert sum(counting.calls.count(c) for c in adjoint_calls) == adjoints, (name, counting.calls)
    forward = list(counting.calls)
    value.sum().backward()  # from the forward's sums: no library call (a zonal mean's lon sum is the mesh's own)
    assert counting.calls == forward, (name, counting.calls)


@pytest.mark.parametrize("pole", ["zero", "replicate", "across_pole"])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_halo_exchange_and_its_adjoint(dist, pole, width):
    """The padded shard is the global field padded (an integer fill, exact); the backward is the adjoint:
    <E x, y> summed over the ranks equals <x, E^T y> summed over the ranks, exactly, for random integer fields."""
    nlat, nlon = 9, 14
    shape = (2, nlat, nlon)
    x = torch.arange(np.prod(shape), dtype=torch.float64).reshape(shape)
    mine = local(dist, x).to(DEVICE)
    padded = dist.halo_exchange(mine, width, periodic_lon=True, pole=pole)
    rows, cols = dist.get_local_slices(shape)[1:]
    i = torch.arange(rows.start - width, rows.stop + width)
    j = torch.arange(cols.start - width, cols.stop + width) % nlon
    beyond = (i < 0) | (i >= nlat)
    if pole == "zero":
        source_rows, shift = i.clamp(0, nlat - 1), torch.zeros_like(i)
    elif pole == "replicate":
        source_rows, shift = i.clamp(0, nlat - 1), torch.zeros_like(i)
    else:
        source_rows = torch.where(i < 0, -i - 1, torch.where(i >= nlat, 2 * nlat - i - 1, i))
        shift = torch.where(beyond, nlon // 2, 0)
    columns = (j[None, :] + shift[:, None]) % nlon
    want = x[:, source_rows[:, None], columns]
    if pole == "zero":
        want = torch.where(beyond[None, :, None], 0.0, want)
    same_bits(padded.cpu(), want, f"halo width {width} pole {pole}")
    rng = np.random.default_rng(WORLD.Get_rank())
    xr = leaf(torch.from_numpy(rng.integers(-50, 50, tuple(mine.shape)).astype(np.float64)).to(DEVICE))
    y = torch.from_numpy(rng.integers(-50, 50, tuple(padded.shape)).astype(np.float64)).to(DEVICE)
    ex = dist.halo_exchange(xr, width, periodic_lon=True, pole=pole)
    (ex * y).sum().backward()
    left = WORLD.allreduce(float((ex.detach() * y).sum()))
    right = WORLD.allreduce(float((xr.detach() * xr.grad).sum()))
    assert left == right, (left, right)


def test_gradcheck_serially(serial):
    t, p, w = fields((5, 6), channels=(2,))
    for call in (lambda a: serial.weighted_std(a, w), lambda a: serial.root_mean_squared_error(t, a, w),
                 lambda a: serial.gradient_magnitude_percent_diff(t, a, w),
                 lambda a: serial.halo_exchange(a, 2, pole="across_pole")):
        assert torch.autograd.gradcheck(call, (leaf(p),), eps=1e-6, atol=1e-6)


CALLS = {"weighted_mean": lambda d, x, w: d.weighted_mean(x, w), "zonal_mean": lambda d, x, w: d.zonal_mean(x),
         "halo_exchange": lambda d, x, w: d.halo_exchange(x, 1),
         "gradient_magnitude_percent_diff": lambda d, x, w: d.gradient_magnitude_percent_diff(x.detach(), x, w),
         "spatial_reduce_sum": lambda d, x, w: d.spatial_reduce_sum(x.sum())}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("how", ["requires_grad", "no_grad"])
def test_a_rank_that_differentiates_where_another_does_not_raises_on_every_rank(dist, call, how):
    """requires_grad on spatial rank 0's tensor only, or torch.no_grad() on that rank only: ValueError on every rank,
    with a message that says the ranks differ in gradients."""
    if dist.world_size == 1 or not dist.has_spatial_parallelism:
        pytest.skip("needs two spatial ranks")
    t, p, w = fields((9, 14))
    first = dist.rank % (H * W) == 0
    x = leaf(local(dist, p)) if how == "no_grad" or first else local(dist, p)
    with pytest.raises(ValueError, match="differentiate"):
        if how == "no_grad" and first:
            with torch.no_grad():
                CALLS[call](dist, x, local(dist, w))
        else:
            CALLS[call](dist, x, local(dist, w))


def test_a_backward_on_one_rank_only(dist):
    """The gradient scores' backward makes no collective (their halo exchanges are in the forward pass): a backward
    run on spatial rank 0 alone gives its gradient, the others go on. One whose backward must communicate (a zonal
    mean's replicas, a halo's adjoint) meets the others' next call: ValueError on every rank, naming gradients."""
    if dist.world_size == 1 or not dist.has_spatial_parallelism:
        pytest.skip("needs two spatial ranks")
    t, p, w = fields((9, 14))
    first = dist.rank % (H * W) == 0
    xt, xp, wl = leaf(local(dist, t)), leaf(local(dist, p)), local(dist, w)
    everyone = dist.gradient_magnitude_percent_diff(xt, xp, wl).sum()
    everyone.backward()
    yt, yp = leaf(local(dist, t)), leaf(local(dist, p))
    alone = dist.gradient_magnitude_percent_diff(yt, yp, wl).sum()
    if first:
        alone.backward()
        same_bits(yp.grad, xp.grad, "a backward on one rank only")
        same_bits(yt.grad, xt.grad, "a backward on one rank only")
    same_bits(dist.weighted_mean(local(dist, p), wl), dist.weighted_mean(local(dist, p), wl), "the next call")
    for name, loss in (("zonal_mean", lambda x: dist.zonal_mean(x).sum()),
                       ("halo_exchange", lambda x: dist.halo_exchange(x, 1).sum())):
        x = leaf(local(dist, p))
        value = loss(x)
        with pytest.raises(ValueError, match="differentiate"):
            if first:
                value.backward()
            else:
                dist.zonal_mean(local(dist, p)) if name == "zonal_mean" else dist.halo_exchange(local(dist, p), 1)


def test_the_ranks_dtypes_must_agree(dist):
    """A bfloat16 tensor on spatial rank 0 and float32 elsewhere: refused on every rank (the results' dtypes would
    differ), as float32 against float64 is."""
    if dist.world_size == 1 or not dist.has_spatial_parallelism:
        pytest.skip("needs two spatial ranks")
    t, p, w = fields((9, 14))
    x = local(dist, p).float()
    if dist.rank % (H * W) == 0:
        x = x.to(torch.bfloat16)
    for call in (lambda: dist.weighted_mean(x, local(dist, w)), lambda: dist.halo_exchange(x, 1),
                 lambda: dist.zonal_mean(x)):
        with pytest.raises(ValueError, match="dtype"):
            call()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_computed_in_float32(dist, dtype):
    t, p, w = fields((9, 14))
    x = local(dist, p).to(dtype)
    got = dist.weighted_mean(x, local(dist, w))
    assert got.dtype == torch.float32  # a mean formed from float32 sums, never rounded to 16 bits
    want = dist.weighted_mean(local(dist, p).to(dtype).float(), local(dist, w))
    same_bits(got, want, "half against its float32 widening")
    padded = dist.halo_exchange(x, 1)
    assert padded.dtype == dtype  # values moved unchanged
    xl = leaf(x)
    dist.weighted_mean(xl, local(dist, w)).sum().backward()
    assert xl.grad.dtype == dtype and torch.isfinite(xl.grad.float()).all()
    with pytest.raises(ValueError, match="16 bits would round"):
        dist.reduce_sum(torch.ones(3, dtype=dtype, device=DEVICE))


# ---------------------------------------------------------------- a model trained on shards


def _initial_parameters():
    generator = torch.Generator().manual_seed(5)
    parameters = {"w1": torch.randn(8, 3, generator=generator, dtype=torch.float64) * 0.3,
                  "b1": torch.zeros(8, dtype=torch.float64),
                  "w2": torch.randn(2, 8, generator=generator, dtype=torch.float64) * 0.3,
                  "b2": torch.zeros(2, dtype=torch.float64)}
    return {k: v.to(DEVICE) for k, v in parameters.items()}


def _model(parameters, x):
    """A two-layer model applied at every point: 3 channels in, 8 hidden, 2 out (parameters per point or shared)."""
    w1, b1, w2, b2 = (parameters[k] for k in ("w1", "b1", "w2", "b2"))
    if w1.ndim == 2:
        hidden = torch.tanh(torch.einsum("hc,c...->h...", w1, x) + b1[:, None, None])
        return torch.einsum("oh,h...->o...", w2, hidden) + b2[:, None, None]
    hidden = torch.tanh(torch.einsum("hc...,c...->h...", w1, x) + b1)
    return torch.einsum("oh...,h...->o...", w2, hidden) + b2


def train(dist, x, y, w, exact, steps=20, rate=0.05):
    """SGD on the area-weighted MSE. exact: gridshard's loss, each point's parameter gradient kept apart (parameters
    copied per point) and added over the grid by the library's exact sum, the spatial gradient sum over parameters;
    otherwise ACE's rank-local MSE, each rank's parameter gradient summed over the spatial group."""
    parameters = _initial_parameters()
    rows, cols = x.shape[-2:]
    for _ in range(steps):
        if exact:
            per_point = {k: v[..., None, None].expand(v.shape + (rows, cols)).clone().requires_grad_(True)
                         for k, v in parameters.items()}
            dist.weighted_mean((_model(per_point, x) - y) ** 2, w).mean().backward()
            grads = {k: dist.weighted_sum(v.grad) for k, v in per_point.items()}
        else:
            shared = {k: v.clone().requires_grad_(True) for k, v in parameters.items()}
            ((_model(shared, x) - y) ** 2).mean().backward()
            grads = {k: dist.spatial_reduce_sum(v.grad) for k, v in shared.items()}
        parameters = {k: v - rate * grads[k] for k, v in parameters.items()}
    return parameters


def test_a_model_trained_on_shards_is_the_model_trained_on_one_rank(dist, serial):
    grid = (9, 14)
    rng = np.random.default_rng(8)
    values = rng.standard_normal((3,) + grid)
    x = torch.from_numpy(values).to(DEVICE)
    y = torch.from_numpy(np.stack([np.sin(values[0]) + values[1], values[2] ** 2 - 0.5])).to(DEVICE)
    w = fields(grid)[2]
    alone = train(serial, x, y, w, exact=True)
    sharded = train(dist, local(dist, x), local(dist, y), local(dist, w), exact=True)
    for k in alone:
        same_bits(sharded[k], alone[k], f"parameter {k} after 20 steps")
    if dist.has_spatial_parallelism:  # ACE's rank-local MSE: on shards, another model than its own on one rank
        on_shards = train(dist, local(dist, x), local(dist, y), local(dist, w), exact=False)
        on_one_rank = train(serial, x, y, w, exact=False)
        difference = max(float((on_shards[k] - on_one_rank[k]).abs().max()) for k in alone)
        assert difference > 1e-3, difference
