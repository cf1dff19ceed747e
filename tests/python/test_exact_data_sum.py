"""The exact sums over the data group (``reduce_sum`` and ``reduce_mean`` under ``summation="reproducible"``, the
library's reduce_sum_exact) under mpirun on the mesh GRIDSHARD_TEST_MESH: each element is the exact sum of the data
ranks' values rounded once to the array's dtype, against Python's rational arithmetic, for values that cancel, lie
far apart (the gathered path past a span of 2^103), sit on a float32 rounding midpoint, are subnormal, overflow,
or are NaN, infinite or signed zeros."""
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).parent))
from mpi_pytest import mesh_shape  # noqa: E402

import gridshard  # noqa: E402

D, H, W = mesh_shape()
WORLD = MPI.COMM_WORLD
KINDS = ["cancel", "apart", "midpoint", "subnormal", "overflow", "nan", "infinity", "both infinities", "zeros",
         "negative zeros", "random"]


def column(kind, ranks, dtype, rng):
    """One element's values on ``ranks`` data ranks."""
    info = np.finfo(dtype)
    if kind == "cancel":
        values = [1e8, -1e8] + [float(v) for v in rng.standard_normal(ranks)]
    elif kind == "apart":  # a span past 2^103: the gathered path
        values = [1.0, 2.0 ** -24, 2.0 ** -120 if dtype == np.float32 else 2.0 ** -600, -1.0, 3.0 ** 20]
    elif kind == "midpoint":  # 1 + 2^-24 lies halfway between two float32s; what follows decides the side
        values = [1.0, 2.0 ** -24, 2.0 ** -80, -(2.0 ** -81)]
    elif kind == "subnormal":
        values = [float(info.smallest_subnormal) * k for k in (3, -1, 7, 5)]
    elif kind == "overflow":
        values = [float(info.max), float(info.max) / 2, -float(info.max) / 4, float(info.max) / 2 ** 30]
    elif kind == "nan":
        values = [1.0, float("nan"), 2.0]
    elif kind == "infinity":
        values = [float("-inf"), 1.0, -5.0]
    elif kind == "both infinities":
        values = [float("inf"), float("-inf")]
    elif kind == "zeros":
        values = [-0.0, 0.0, -0.0]
    elif kind == "negative zeros":
        values = [-0.0, -0.0]
    else:
        values = [float(v) for v in rng.standard_normal(ranks) * 10.0 ** rng.integers(-30, 30, ranks)]
    values = (values * ranks)[:ranks]  # one per rank
    return [float(dtype(v)) for v in values]


def rounded(values, dtype):
    """The exact sum of ``values`` rounded once to ``dtype`` (nearest, ties to even), IEEE's specials as addition
    gives them."""
    if any(np.isnan(v) for v in values) or (float("inf") in values and float("-inf") in values):
        return dtype(np.nan)
    if any(np.isinf(v) for v in values):
        return dtype(next(v for v in values if np.isinf(v)))
    total = sum(Fraction(v) for v in values)
    if total == 0:
        return dtype(-0.0) if all(v == 0 and np.signbit(v) for v in values) else dtype(0.0)
    info = np.finfo(dtype)
    exponent = max(abs(total).numerator.bit_length() - abs(total).denominator.bit_length(), info.minexp)
    while Fraction(2) ** exponent > abs(total):  # the binade of |total| (or the subnormal one)
        exponent -= 1
    exponent = max(exponent, info.minexp)
    quantum = Fraction(2) ** (exponent - info.nmant)
    nearest = round(total / quantum) * quantum  # round() of a Fraction: half to even
    if abs(nearest) > Fraction(float(info.max)):
        return dtype(np.inf if nearest > 0 else -np.inf)
    return dtype(float(nearest))


@pytest.fixture(scope="module")
def dist():
    return gridshard.Distributed(spatial_parallelism=(H, W))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_sum_is_the_exact_sum_rounded_once(dist, dtype):
    rng = np.random.default_rng(3)
    columns = [column(kind, D, dtype, rng) for kind in KINDS for _ in range(3 if kind == "random" else 1)]
    mine = np.array([c[dist.data_parallel_rank] for c in columns], dtype=dtype)
    want = np.array([rounded(c, dtype) for c in columns], dtype=dtype)
    got = dist.reduce_sum(mine.copy())
    for kind, g, w in zip(KINDS + ["random"] * 2, got, want):
        assert (np.isnan(g) and np.isnan(w)) or g.tobytes() == w.tobytes(), (kind, D, g, w)
    mean = dist.reduce_mean(mine.copy())
    assert np.array_equal(mean, want / dtype(D), equal_nan=True)  # the rounded exact sum over the count


def test_the_exact_sum_is_the_default_and_mpis_own_a_choice(dist):
    values = np.array([0.1 * (dist.data_parallel_rank + 1), 1e16, -1e16], dtype=np.float64)
    exact = dist.reduce_sum(values.copy())
    assert np.array_equal(exact, dist.reduce_sum(values.copy(), exact=True))
    plain = dist.reduce_sum(values.copy(), exact=False)  # MPI's sum: its own order's rounding
    assert np.isfinite(plain).all()
    fast = gridshard.Distributed(spatial_parallelism=(H, W), summation="fast")
    assert np.array_equal(fast.reduce_sum(values.copy()), plain)
    integers = np.arange(4, dtype=np.int64) + dist.data_parallel_rank
    assert np.array_equal(dist.reduce_sum(integers), np.arange(4) * D + D * (D - 1) // 2)


def test_ranks_that_ask_different_sums_raise_on_every_rank(dist):
    if D == 1:
        pytest.skip("one data rank: nothing to differ from")
    values = np.ones(5, dtype=np.float64)
    with pytest.raises(gridshard.ArgumentError, match="summation"):
        dist.reduce_sum(values, exact=dist.data_parallel_rank == 0)
    assert np.array_equal(dist.reduce_sum(np.ones(2)), np.full(2, float(D)))  # still in step


def test_a_length_that_differs_raises_on_every_rank(dist):
    if D == 1:
        pytest.skip("one data rank: nothing to differ from")
    values = np.zeros(3 + (dist.data_parallel_rank == D - 1), dtype=np.float64)
    with pytest.raises(gridshard.ArgumentError, match="differ in dtype or shape"):
        dist.reduce_sum(values)


# ----- the device path's exact sum (torch operations over torch.distributed; CPU tensors over gloo here) -----
# These come last in the file, and the file last in its run: the device path starts torch.distributed (gloo) in the
# process, which the earlier suites run without.

@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def paths(torch):
    """The device path and the library, each on torch tensors."""
    return [gridshard.Distributed(spatial_parallelism=(H, W), device_path=mode) for mode in ("always", "never")]


def same_bits(torch, got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    quiet = [torch.where(torch.isnan(t), torch.full_like(t, float("nan")), t).contiguous() for t in (got, want)]
    view = {8: torch.int64, 4: torch.int32, 2: torch.int16}[got.element_size()]
    assert torch.equal(quiet[0].view(view), quiet[1].view(view)), (what, got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_device_paths_sum_is_the_exact_sum_rounded_once(torch, paths, dtype):
    device, library = paths
    kind = np.dtype(dtype).type
    rng = np.random.default_rng(3)
    kinds = KINDS + ["random"] * 2
    columns = [column(k, D, kind, rng) for k in kinds]
    mine = torch.tensor([c[device.data_parallel_rank] for c in columns], dtype=getattr(torch, dtype))
    want = torch.from_numpy(np.array([rounded(c, kind) for c in columns], dtype=kind))
    got = device.reduce_sum(mine.clone())
    for k, g, w in zip(kinds, got, want):
        same_bits(torch, g, w, (k, D))
    same_bits(torch, got, library.reduce_sum(mine.clone()), "the library's sum")
    same_bits(torch, device.reduce_mean(mine.clone()), library.reduce_mean(mine.clone()), "the library's mean")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_the_device_paths_sum_of_integers_is_the_librarys(torch, paths, dtype):
    device, library = paths
    rng = np.random.default_rng(5 + device.data_parallel_rank)
    values = torch.from_numpy(rng.integers(-1000, 1000, (3, 5))).to(getattr(torch, dtype))
    for call in ("reduce_sum", "reduce_mean"):
        got, want = getattr(device, call)(values.clone()), getattr(library, call)(values.clone())
        assert got.dtype == want.dtype and torch.equal(got, want), (call, got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "bool"])
def test_a_dtype_the_sum_cannot_hold_raises_on_every_rank_on_either_path(torch, paths, dtype):
    for dist in paths:
        with pytest.raises(gridshard.ArgumentError, match="16 bits would round" if "16" in dtype else "bool is not"):
            dist.reduce_sum(torch.zeros(3, dtype=getattr(torch, dtype)))
    assert torch.equal(paths[0].reduce_sum(torch.ones(2)), torch.full((2,), float(D)))  # still in step


def test_the_device_paths_sum_writes_into_its_argument_and_keeps_its_layout(torch, paths):
    device = paths[0]
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4) + device.data_parallel_rank
    view = base.t()  # not contiguous
    assert device.reduce_sum(view) is view
    expected = (torch.arange(12, dtype=torch.float64).reshape(3, 4) * D + D * (D - 1) / 2).t()
    assert torch.equal(view, expected) and torch.equal(base.t(), expected)
    plain = device.reduce_sum(torch.full((4,), 0.5, dtype=torch.float32), exact=False)  # torch.distributed's sum
    assert torch.equal(plain, torch.full((4,), 0.5 * D, dtype=torch.float32))


def test_the_device_path_and_the_host_or_different_sums_raise_on_every_rank(torch, paths):
    if D == 1:
        pytest.skip("one data rank: nothing to differ from")
    device = paths[0]
    values = torch.ones(5, dtype=torch.float64)
    with pytest.raises(gridshard.ArgumentError, match="how they are reduced"):
        device.reduce_sum(values.clone(), exact=device.data_parallel_rank == 0)
    mine = values.numpy().copy() if device.data_parallel_rank == 0 else values.clone()
    with pytest.raises(gridshard.ArgumentError, match="how they are reduced"):
        device.reduce_sum(mine)
    assert torch.equal(device.reduce_sum(values.clone()), torch.full((5,), float(D), dtype=torch.float64))
