"""gridshard's power spectra against independent implementations, in ACE's venv: torch-harmonics 0.8.0's
float64 RealSHT (``torch_harmonics.sht.RealSHT``: ``import fme`` replaces ``torch_harmonics.RealSHT`` by its own
float32 class) for every grid at 32 x 64, 180 x 360 and 181 x 360, to 1e-10 relative; ACE's own
``spherical_power_spectrum`` in float32, to its rounding; ACE's own ``SmoothFloodFill`` (fme.core.fill) in float64
and float32, and its fill then its spectrum against gridshard's; numpy's rfft for the zonal spectrum. One process
(gridshard on one rank); the distributed answers are the serial ones bit for bit (tests/mpi/spectrum_test.cpp,
tests/python/test_distributed.py). Run by tests/ace/run_ace_tests.py with GRIDSHARD_BUILD_DIR naming the build."""
import os
import pathlib
import sys

import numpy as np
import pytest
import torch

build = os.environ.get("GRIDSHARD_BUILD_DIR")
if build:
    sys.path.insert(0, str(pathlib.Path(build) / "python"))
import gridshard  # noqa: E402
from torch_harmonics.sht import RealSHT  # noqa: E402

GRIDS = ["legendre-gauss", "equiangular", "lobatto"]
SIZES = [(32, 64), (180, 360), (181, 360)]


@pytest.fixture(scope="module")
def dist():
    return gridshard.Distributed()


def field(nlat, nlon, channels=2, seed=0):
    rng = np.random.default_rng(seed)
    colat = np.linspace(0.0, np.pi, nlat)[:, None]
    return 250.0 + 20.0 * np.cos(colat) + rng.normal(size=(channels, nlat, nlon))


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("nlat,nlon", SIZES)
@pytest.mark.parametrize("convention", ["ace", "full"])
def test_against_torch_harmonics_float64(dist, grid, nlat, nlon, convention):
    x = field(nlat, nlon)
    got = dist.spherical_power_spectrum(x, grid=grid, convention=convention)
    coefficients = RealSHT(nlat, nlon, grid=grid).double()(torch.from_numpy(x)).numpy()
    power = np.abs(coefficients) ** 2
    if convention == "full":
        power[..., 1:] *= 2.0
    expected = power.sum(axis=-1)
    assert got.shape == expected.shape
    scale = np.abs(expected).max(axis=-1, keepdims=True)
    assert np.max(np.abs(got - expected) / scale) < 1e-10
    # Each degree on its own, where it holds more than rounding of the largest.
    big = expected > 1e-6 * scale
    assert np.max(np.abs(got - expected)[big] / expected[big]) < 1e-10


def test_against_ace_float32(dist):
    from fme.core.metrics import spherical_power_spectrum
    import torch_harmonics
    x = field(45, 90, channels=3, seed=3).astype(np.float32)
    sht = torch_harmonics.RealSHT(45, 90, grid="legendre-gauss")  # fme's float32 class once fme is imported
    expected = spherical_power_spectrum(torch.from_numpy(x), sht).double().numpy()
    got = dist.spherical_power_spectrum(x)
    scale = expected.max(axis=-1, keepdims=True)
    assert np.max(np.abs(got - expected) / scale) < 1e-5


def masked_field(nlat, nlon, channels=3, seed=5):
    """A land mask the same in every field (ACE caches the first field's), with an interior beyond 4 steps, a
    polar cap, points across the longitude seam and scattered ones."""
    x = field(nlat, nlon, channels=channels, seed=seed)
    i, j = np.meshgrid(np.arange(nlat), np.arange(nlon), indexing="ij")
    land = ((i > nlat // 4) & (i < 3 * nlat // 4) & (j > nlon // 5) & (j < nlon // 2))
    land |= (i < 2) | (((j == 0) | (j == nlon - 1)) & (i % 3 == 1)) | ((i * 7 + j * 3) % 29 == 0)
    x[:, land] = np.nan
    return x


@pytest.mark.parametrize("dtype,tolerance", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_flood_fill_against_aces(dist, dtype, tolerance):
    from fme.core.fill import SmoothFloodFill
    x = masked_field(45, 90).astype(dtype)
    for steps in (4, 1, 0):
        expected = SmoothFloodFill(num_steps=steps)(torch.from_numpy(x)[None], "x")[0].double().numpy()
        got = dist.smooth_flood_fill(x, num_steps=steps)
        assert got.dtype == dtype and np.isfinite(got).all()
        scale = np.abs(expected).max()
        assert np.max(np.abs(got.astype(np.float64) - expected)) < tolerance * scale, steps


def test_filled_spectrum_against_aces(dist):
    """ACE's power-spectrum aggregator's two steps, its fill then its transform, on ACE's float32 fields."""
    from fme.core.fill import SmoothFloodFill
    from fme.core.metrics import spherical_power_spectrum
    import torch_harmonics
    x = masked_field(45, 90, seed=8).astype(np.float32)
    filled = SmoothFloodFill(num_steps=4)(torch.from_numpy(x)[None], "x")[0]
    expected = spherical_power_spectrum(filled, torch_harmonics.RealSHT(45, 90, grid="legendre-gauss")).double()
    got = dist.spherical_power_spectrum(dist.smooth_flood_fill(x.astype(np.float64)))
    scale = expected.numpy().max(axis=-1, keepdims=True)
    assert np.max(np.abs(got - expected.numpy()) / scale) < 1e-5


def test_zonal_against_numpy(dist):
    x = field(13, 40, channels=2, seed=7)
    lat = np.linspace(80.0, -80.0, 13)
    for weighting, w in [("none", np.ones(13)), ("cos-lat", np.cos(np.deg2rad(lat))),
                         ("circumference", 2 * np.pi * 6367500.0 * np.cos(np.deg2rad(lat)))]:
        got = dist.zonal_power_spectrum(x, lat=lat, weighting=weighting)
        f = np.abs(np.fft.rfft(x, axis=-1) / 40) ** 2
        f[..., 1:] *= 2.0
        expected = w[:, None] * f
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_bad_arguments_name_themselves(dist):
    x = field(8, 16)
    with pytest.raises(gridshard.ArgumentError, match="lmax=9"):
        dist.spherical_power_spectrum(x, lmax=9)
    with pytest.raises(gridshard.ArgumentError, match="grid='gaussian'"):
        dist.spherical_power_spectrum(x, grid="gaussian")
    with pytest.raises(gridshard.ArgumentError, match="lat"):
        dist.zonal_power_spectrum(x, weighting="cos-lat")
