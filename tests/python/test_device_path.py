"""The device path (python/gridshard/_device.py) on CPU tensors over gloo, under mpirun on the mesh of
GRIDSHARD_TEST_MESH: every value is the library's bits on the same shards (NaN compared as NaN), for both split
rules, float32, float64 and float16, every form of weights, adversarial values (cancellation, 1e8 offsets,
subnormals, infinities and NaN under each rule, sums that overflow); gradients are the library path's bits and the
serial device path's on every mesh; bad weights give NaN on every rank; ranks on different paths raise on every
rank; and no call or backward pass reads a value on the host (a tensor subclass that raises on every way out),
the data group's exact sums included."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402

import gridshard  # noqa: E402

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD
GRIDS = [(9, 14), (5, 7)]  # uneven under both rules; 7 into 3 parts: 3, 3, 1 (div_up) and 3, 2, 2 (balanced)
# GRIDSHARD_TEST_DEVICE=cuda runs the suite on the GPU (tests/device/run_device_check.sh); the CPU by default.
DEVICE = torch.device(os.environ.get("GRIDSHARD_TEST_DEVICE", "cpu"))


@pytest.fixture(scope="module", params=["div_up", "balanced"])
def pair(request):
    """The device path and the library on this run's mesh, and the device path on this process alone."""
    made = [gridshard.Distributed(spatial_parallelism=(H, W), split=request.param, device_path=mode)
            for mode in ("always", "never")]
    return made + [gridshard.Distributed(MPI.COMM_SELF, split=request.param, device_path="always")]


@pytest.fixture(autouse=True)
def one_rule_where_the_rules_agree(request):
    """Both split rules only where they can give different shards: into two parts (or one) they split every axis
    alike, so the balanced rule's cases would repeat the div_up rule's."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("pair") == "balanced" and max(H, W) < 3:
        pytest.skip("div_up and balanced split an axis into one or two parts alike")


def local(dist, tensor):
    return tensor[dist.get_local_slices(tuple(tensor.shape))]


def bits(tensor):
    """The tensor's bit patterns, every NaN as the one quiet NaN (a NaN's sign is no result)."""
    tensor = torch.where(torch.isnan(tensor), torch.full_like(tensor, float("nan")), tensor).contiguous()
    return tensor.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[tensor.element_size()])


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    assert torch.equal(bits(got), bits(want)), (what, got, want)


def weights_of(form, grid, rng):
    lat = torch.cos(torch.deg2rad(torch.linspace(-80, 80, grid[0], dtype=torch.float64))).to(DEVICE)
    if form == "none":
        return None
    if form == "broadcast row":
        return lat[:, None].expand(grid)
    if form == "column":
        return lat[:, None].clone()
    return torch.from_numpy(rng.uniform(0.0, 1.5, grid)).to(DEVICE)  # per point, some near zero


def weights_shard(dist, weights, grid):
    """This rank's part of the weights: its rows of a ``(h, 1)`` column, its box of the others."""
    if weights is None or weights.shape[-1] == 1:
        return weights if weights is None else weights[dist.get_local_slices(grid)[0]]
    return local(dist, weights)


CALLS = {
    "weighted_sum": lambda d, t, p, w: d.weighted_sum(t, w),
    "weighted_mean": lambda d, t, p, w: d.weighted_mean(t, w),
    "weighted_mean keepdim": lambda d, t, p, w: d.weighted_mean(t, w, keepdim=True),
    "weighted_nanmean": lambda d, t, p, w: d.weighted_nanmean(t, w),
    "weighted_std": lambda d, t, p, w: d.weighted_std(t, w),
    "weighted_mean_bias": lambda d, t, p, w: d.weighted_mean_bias(t, p, w),
    "root_mean_squared_error": lambda d, t, p, w: d.root_mean_squared_error(t, p, w),
    "global_mean": lambda d, t, p, w: d.global_mean(t),
    "zonal_mean": lambda d, t, p, w: d.zonal_mean(t),
    "gradient_magnitude": lambda d, t, p, w: d.gradient_magnitude(t),
    "weighted_mean_gradient_magnitude": lambda d, t, p, w: d.weighted_mean_gradient_magnitude(t, w),
    "gradient_magnitude_percent_diff": lambda d, t, p, w: d.gradient_magnitude_percent_diff(t, p, w),
}


def compare(pair, truth, predicted, weights, what):
    device, library, serial = pair
    t, p = local(device, truth), local(device, predicted)
    w = weights_shard(device, weights, tuple(truth.shape[-2:]))
    for name, call in CALLS.items():
        on_device = call(device, t, p, w)
        same_bits(on_device, call(library, t, p, w), f"{what}: {name} against the library")
        whole = call(serial, truth, predicted, weights)
        if name == "zonal_mean":  # this rank's rows
            whole = whole[..., device.get_local_slices(tuple(truth.shape[-2:]))[0]]
        if name == "gradient_magnitude":  # this rank's points
            whole = local(device, whole)
        same_bits(on_device, whole, f"{what}: {name} against one process")


# Each dtype with each form of weights on one of the grids (every pairing of the three would triple the suite's
# time at four ranks for no path the library takes differently).
VALUE_CASES = [(torch.float32, "broadcast row", GRIDS[0]), (torch.float32, "per point", GRIDS[1]),
               (torch.float32, "column", GRIDS[1]), (torch.float64, "none", GRIDS[1]),
               (torch.float64, "column", GRIDS[0]), (torch.float64, "per point", GRIDS[0]),
               (torch.float64, "broadcast row", GRIDS[1]), (torch.float16, "broadcast row", GRIDS[0]),
               (torch.float16, "per point", GRIDS[1])]


@pytest.mark.parametrize("dtype,form,grid", VALUE_CASES)
def test_values_are_the_librarys_bits(pair, grid, form, dtype):
    rng = np.random.default_rng(3)
    truth = torch.from_numpy(280 + 40 * rng.standard_normal((2, 3) + grid)).to(DEVICE, dtype)
    predicted = (truth.double() + torch.from_numpy(rng.standard_normal(truth.shape)).to(DEVICE)).to(dtype)
    truth[1, 2, 0, 1] = float("nan")
    compare(pair, truth, predicted, weights_of(form, grid, rng), f"{dtype} {form} {grid}")


def adversarial(kind, grid, dtype, rng):
    shape = (4,) + grid
    base = rng.standard_normal(shape)
    if kind == "cancellation":
        values = np.concatenate([1e8 * base[..., : grid[1] // 2], -1e8 * base[..., : grid[1] // 2]], axis=-1)
        values = np.concatenate([values, base[..., : grid[1] - values.shape[-1]]], axis=-1) + 1e-3 * base
    elif kind == "offset 1e8":
        values = 1e8 + base
    elif kind == "subnormal":
        tiny = np.finfo(np.float32 if dtype == torch.float32 else np.float64).smallest_subnormal
        values = tiny * np.round(1000 * base)
    elif kind == "near overflow":
        values = np.finfo(np.float32 if dtype == torch.float32 else np.float64).max * (0.5 + 0.4 * np.tanh(base))
    else:  # specials: a NaN, an infinity of each sign, both infinities, an all-NaN channel
        values = base.copy()
        values[0, 1, 1] = np.nan
        values[1, 0, 2] = np.inf
        values[2, 2, 3] = -np.inf
        values[3, 1, 0], values[3, 3, 1] = np.inf, -np.inf
        values[1] = np.where(rng.uniform(size=grid) < 0.3, np.nan, values[1])
    return torch.from_numpy(values).to(DEVICE, dtype)


@pytest.mark.parametrize("kind", ["cancellation", "offset 1e8", "subnormal", "near overflow", "specials"])
@pytest.mark.parametrize("form", ["broadcast row", "per point"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adversarial_values_are_the_librarys_bits(pair, kind, form, dtype):
    rng = np.random.default_rng(11)
    grid = GRIDS[0]
    truth = adversarial(kind, grid, dtype, rng)
    predicted = adversarial(kind, grid, dtype, rng).flip(-1).contiguous()
    compare(pair, truth, predicted, weights_of(form, grid, rng), f"{kind} {dtype} {form}")


def test_an_all_nan_channel_has_a_nan_mean_and_zero_weight(pair):
    device = pair[0]
    truth = torch.randn((2,) + GRIDS[0], dtype=torch.float64).to(DEVICE)
    truth[1] = float("nan")
    mean = device.weighted_nanmean(local(device, truth), None)
    assert torch.isnan(mean[1]) and not torch.isnan(mean[0])


LOSSES = {
    "weighted_mean": lambda d, t, p, w: (d.weighted_mean(p, w) * torch.arange(1, 4, device=p.device)).sum(),
    "weighted_sum": lambda d, t, p, w: d.weighted_sum(p, w).sum(),
    "weighted_nanmean": lambda d, t, p, w: d.weighted_nanmean(p, w).sum(),
    "weighted_std": lambda d, t, p, w: d.weighted_std(p, w).sum(),
    "bias": lambda d, t, p, w: (d.weighted_mean_bias(t, p, w) ** 2).sum(),
    "rmse": lambda d, t, p, w: d.root_mean_squared_error(t, p, w).sum(),
    "area-weighted MSE": lambda d, t, p, w: d.weighted_mean((p - t) ** 2, w).mean(),
    "global-mean MSE": lambda d, t, p, w: d.global_mean((p - t) ** 2).mean(),
    "zonal_mean": lambda d, t, p, w: (d.zonal_mean(p) ** 2).sum() / d.spatial_parallelism[1],
    "gradient_magnitude": lambda d, t, p, w: (d.gradient_magnitude(p - t) ** 2).sum(),
    "weighted_mean_gradient_magnitude": lambda d, t, p, w: d.weighted_mean_gradient_magnitude(p, w).sum(),
    "gradient_magnitude_percent_diff": lambda d, t, p, w: (d.gradient_magnitude_percent_diff(t, p, w) ** 2).sum(),
}
# Losses of this rank's own points, not replicated: each rank's gradient is of the sum of every rank's loss.
LOCAL_LOSSES = {"zonal_mean", "gradient_magnitude"}


GRADIENT_LOSSES = [name for name in LOSSES if name.startswith("gradient") or name.endswith("gradient_magnitude")]


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("form", ["broadcast row", "per point"])
def test_gradients_are_the_library_paths_and_the_same_on_every_mesh(pair, name, form, dtype=torch.float64):
    rng = np.random.default_rng(5)
    grid = GRIDS[0]
    truth = torch.from_numpy(280 + 40 * rng.standard_normal((2, 3) + grid)).to(DEVICE, dtype)
    predicted = truth + torch.from_numpy(rng.standard_normal(truth.shape)).to(DEVICE, dtype)
    weights = weights_of(form, grid, rng)
    loss = LOSSES[name]
    grads = []
    shards = [(d, local(d, truth), local(d, predicted), weights_shard(d, weights, grid)) for d in pair[:2]]
    for dist, t, p, w in shards + [(pair[2], truth, predicted, weights)]:
        t, p = t.clone().requires_grad_(True), p.clone().requires_grad_(True)
        value = loss(dist, t, p, w)
        value.backward()
        grads.append((value.detach(), t.grad, p.grad))
    device, library, serial = grads
    same_bits(device[0], library[0], f"{name}: the loss against the library path")
    if name not in LOCAL_LOSSES:
        same_bits(device[0], serial[0], f"{name}: the loss against one process")
    for k in (1, 2):
        if device[k] is None:
            assert library[k] is None
            continue
        same_bits(device[k], library[k], f"{name}: a gradient against the library path's")
        if name != "zonal_mean":  # a zonal loss's gradient sums the lon replicas' upstream gradients, in rank order
            same_bits(device[k], local(pair[0], serial[k]), f"{name}: a gradient against one process's, sliced")
        else:
            assert torch.allclose(device[k], local(pair[0], serial[k]), rtol=1e-12, atol=0), name


@pytest.mark.parametrize("name", GRADIENT_LOSSES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_gradient_metrics_adjoint_is_the_librarys_in_each_precision(pair, name, dtype):
    """The adjoint's coefficients are rounded to the field's type between its two exchanges (half precision
    computes in float32), as the library's are."""
    test_gradients_are_the_library_paths_and_the_same_on_every_mesh(pair, name, "per point", dtype)


def test_bad_weights_give_nan_on_every_rank(pair):
    device = pair[0]
    truth = torch.randn((3,) + GRIDS[0], dtype=torch.float64).to(DEVICE)
    for bad in (-1.0, float("inf"), float("nan")):
        weights = torch.ones(GRIDS[0], dtype=torch.float64, device=DEVICE)
        weights[4, 7] = bad  # on one rank's shard only
        assert torch.isnan(device.weighted_mean(local(device, truth), local(device, weights))).all(), bad
    zero = torch.zeros(GRIDS[0], dtype=torch.float64, device=DEVICE)
    assert torch.isnan(device.weighted_mean(local(device, truth), local(device, zero))).all()


def test_ranks_on_different_paths_raise_on_every_rank(pair):
    device = pair[0]
    if H * W == 1:
        pytest.skip("one rank per spatial group: no peer to differ from")
    truth = torch.randn((3,) + GRIDS[0], dtype=torch.float64)
    shard = local(device, truth).to(DEVICE)
    mine = shard.cpu().numpy() if device._mesh.coords[1] == 0 and device._mesh.coords[2] == 0 else shard
    with pytest.raises(gridshard.ArgumentError):
        device.weighted_mean(mine, None)
    assert torch.equal(device.weighted_mean(shard, None), pair[1].weighted_mean(shard, None))  # still in step


class NoHost(torch.Tensor):
    """A tensor that raises on every way its values could reach the host."""

    OUT = {"cpu", "numpy", "tolist", "item", "__array__", "data_ptr", "untyped_storage", "storage", "__float__",
           "__int__", "__bool__", "__index__"}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in cls.OUT:
            raise AssertionError(f"the device path called {name} on a tensor")
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("name", list(LOSSES))
def test_the_device_path_never_reads_a_value_on_the_host(pair, name):
    device = pair[0]
    rng = np.random.default_rng(7)
    grid = GRIDS[0]
    truth = torch.from_numpy(280 + 40 * rng.standard_normal((2, 3) + grid)).to(DEVICE)
    predicted = truth + torch.from_numpy(rng.standard_normal(truth.shape)).to(DEVICE)
    weights = local(device, torch.from_numpy(rng.uniform(0.1, 1.5, grid)).to(DEVICE)).as_subclass(NoHost)
    t = local(device, truth).clone().as_subclass(NoHost).requires_grad_(True)
    p = local(device, predicted).clone().as_subclass(NoHost).requires_grad_(True)
    value = LOSSES[name](device, t, p, weights)
    value.backward()
    for call in CALLS.values():
        call(device, t.detach(), p.detach(), weights)
    with pytest.raises(AssertionError, match="called"):
        t.item()  # the subclass does catch a way out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_data_groups_sums_never_read_a_value_on_the_host(pair, dtype):
    device, library = pair[0], pair[1]
    values = torch.from_numpy(np.random.default_rng(device.data_parallel_rank).standard_normal((3, 4))).to(dtype)
    for call in ("reduce_sum", "reduce_mean"):  # each writes into its argument: a copy each
        got = getattr(device, call)(values.to(DEVICE, copy=True).as_subclass(NoHost))
        same_bits(got.as_subclass(torch.Tensor).cpu(), getattr(library, call)(values.clone()), call)


@pytest.mark.parametrize("call", ["weighted_mean", "zonal_mean"])
def test_a_failure_to_form_the_sums_on_one_rank_raises_there_and_gives_nan_to_its_peers(pair, monkeypatch, call):
    """Memory exhausted on the device while one rank forms its terms: that rank still takes part in the all_reduce
    and raises SystemFailure after it; its peers get NaN (never a number without that rank's part); nobody waits."""
    device = pair[0]
    fails = device.rank % (H * W) == H * W - 1
    truth = local(device, torch.randn((3,) + GRIDS[0], dtype=torch.float64).to(DEVICE))
    if fails:
        import gridshard._exact_torch

        def failing(*args, **kwargs):
            raise RuntimeError("simulated: out of memory on the device")

        monkeypatch.setattr(gridshard._exact_torch, "add_values", failing)
        monkeypatch.setattr(gridshard._exact_torch, "add_products", failing)
        with pytest.raises(gridshard.SystemFailure, match=f"rank {device.rank}: .*simulated"):
            CALLS[call](device, truth, truth, None)
        monkeypatch.undo()
    else:
        result = CALLS[call](device, truth, truth, None)
        # The zonal mean's group is the lon group: the ranks of the failing rank's (last) row of the mesh.
        with_the_failing_rank = call == "weighted_mean" or (device.rank % (H * W)) // W == H - 1
        assert bool(torch.isnan(result).all()) == with_the_failing_rank, result
        assert with_the_failing_rank or not torch.isnan(result).any(), result
    same_bits(device.weighted_mean(truth, None), pair[1].weighted_mean(truth, None), "the next call")
