"""`gridshard eval --quantiles` (docs/evaluation.md): each variable's exact quantiles over the whole run, every point
and counted lead time of the truth and of the prediction (every member), globally and per region: numpy's nanquantile
of the values in the files, bit for bit, at every mesh and split."""
import json

import netCDF4
import numpy as np
import pytest

import forecast_files as ff
import make_files

Q = [0.0, 1e-6, 0.5, 0.99, 0.9999, 1.0]
Q_TEXT = ",".join(repr(q) for q in Q)


def load(path):
    with open(path) as f:
        return json.load(f)


def bits(values):
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64).view(np.uint64)


def expect_numpy(got, values, method, what):
    """`got` (the report's list) is numpy's nanquantile of `values`, bit for bit; NaN where none is a number."""
    values = np.asarray(values).ravel()
    if np.isnan(values).all():
        want = np.full(len(Q), np.nan)
    else:
        want = np.asarray(np.nanquantile(values, Q, method=method), dtype=np.float64)
    np.testing.assert_array_equal(bits(got), want.view(np.uint64), err_msg=f"{what}: {got} against numpy {want}")


@pytest.fixture(scope="module")
def forecast():
    return ff.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22, levels=2)


@pytest.fixture(scope="module")
def files(forecast, tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantiles")
    truth, pred = folder / "autoregressive_target.nc", folder / "autoregressive_predictions.nc"
    ff.write_ace(forecast, truth, pred)
    mask = ff.write_mask(forecast, folder / "mask.nc")
    return truth, pred, folder / "mask.nc", mask


@pytest.mark.parametrize("method", ["linear", "inverted_cdf"])
def test_a_forecasts_quantiles_are_numpys_at_every_mesh(forecast, files, mpirun, tmp_path, meshes, method):
    """Levels as channels, NaN over land (sst), a box across the date line and a fractional mask with a NaN corner:
    the lead times counted (lead 0, the initial condition, left out), the truth once per initial condition."""
    truth, pred, mask_path, mask = files
    regions = ["tropics", "dateline:-30,45,150,-160", f"land:{mask_path}:land_fraction"]
    args = [a for r in regions for a in ("--region", r)]
    reports = []
    for ranks, mesh, split, data_split in meshes(((1, "1x1x1", "balanced", "auto"), (4, "2x1x2", "balanced", "auto"),
                                                  (3, "1x1x3", "div_up", "auto"), (6, "1x2x3", "balanced", "auto"),
                                                  (4, "4x1x1", "balanced", "members"),
                                                  (2, "2x1x1", "balanced", "lead-times"))):
        out = tmp_path / f"{mesh}-{data_split}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, *args, "--mesh", mesh, "--split", split,
                   "--data-split", data_split, "--quantiles", Q_TEXT, "--quantile-method", method, "--json", out,
                   "--quiet")
        assert r.returncode == 0, r.stderr
        reports.append(load(out))
    assert reports[0]["quantiles"] == {"q": Q, "method": method}
    inside = {  # the points of each region (the forecast has no pole row, so each has a weight there)
        "global": ff.cos_lat_weights(forecast) != 0,
        "tropics": ff.box_weights(forecast, -20, 20, 0, 360) != 0,
        "dateline": ff.box_weights(forecast, -30, 45, 150, -160) != 0,
        "land": mask != 0,
    }
    for name, (t, p) in forecast.fields.items():
        if t.ndim == 4:
            channels = [(name, t, p)]
        else:  # levels: one channel each
            channels = [(f"{name}[{k}]", t[:, :, k], p[:, :, :, k]) for k in range(t.shape[2])]
        for channel, tc, pc in channels:
            for region, cells in inside.items():
                got = reports[0]["variables"][channel]["regions"][region]["quantiles"]
                target, prediction = tc[:, 1:][..., cells], pc[:, :, 1:][..., cells]
                assert got["target_count"] == np.count_nonzero(~np.isnan(target)), (channel, region)
                assert got["prediction_count"] == np.count_nonzero(~np.isnan(prediction)), (channel, region)
                expect_numpy(got["target"], target, method, f"{channel} {region} target")
                expect_numpy(got["prediction"], prediction, method, f"{channel} {region} prediction")
    for other in reports[1:]:
        assert other["variables"] == reports[0]["variables"]


def test_two_fields_quantiles_are_numpys_float32_and_float64(mpirun, tmp_path, meshes):
    """Every step of two fields, float32 with a fill value and float64 with ties and a NaN hole, and a table."""
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    make_files.write(truth, 13, 22, 4, seed=1, with_levels=False)
    make_files.write(pred, 13, 22, 4, seed=2, shift=0.2, with_levels=False)
    rng = np.random.default_rng(3)
    wide = {"truth": np.round(rng.normal(0, 3, (4, 13, 22))) * 0.5, "pred": rng.normal(0, 1e-3, (4, 13, 22))}
    wide["truth"][1, 2:5, 3:9] = np.nan
    for label, values in wide.items():
        make_files.write_grid_file(tmp_path / f"{label}64.nc", values, dtype="f8")
    reports = []
    for ranks, mesh, split in meshes(((1, "1x1x1", "balanced"), (3, "1x3x1", "div_up"), (4, "1x2x2", "balanced"))):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--vars", "t2m,sst", "--mesh", mesh, "--split",
                   split, "--quantiles", Q_TEXT, "--json", out)
        assert r.returncode == 0, r.stderr
        assert "quantiles (numpy's linear) over every point and step" in r.stdout
        out64 = tmp_path / f"{mesh}-64.json"
        r = mpirun(ranks, "eval", "--truth", tmp_path / "truth64.nc", "--pred", tmp_path / "pred64.nc", "--mesh", mesh,
                   "--split", split, "--quantiles", Q_TEXT, "--json", out64, "--quiet")
        assert r.returncode == 0, r.stderr
        reports.append((load(out), load(out64)))
    for label, path in (("target", truth), ("prediction", pred)):
        with netCDF4.Dataset(path) as ds:
            for name in ("t2m", "sst"):
                values = ds[name][:].astype(np.float32).filled(np.nan)
                expect_numpy(reports[0][0]["variables"][name]["quantiles"][label], values, "linear", f"{name} {label}")
    expect_numpy(reports[0][1]["variables"]["v"]["quantiles"]["target"], wide["truth"], "linear", "v target")
    expect_numpy(reports[0][1]["variables"]["v"]["quantiles"]["prediction"], wide["pred"], "linear", "v prediction")
    for other in reports[1:]:
        assert other[0]["variables"] == reports[0][0]["variables"]
        assert other[1]["variables"] == reports[0][1]["variables"]


@pytest.mark.parametrize("given, message", [
    ("0.5,1.5", "--quantiles: q=1.5: quantiles must be in the range [0, 1]"),
    ("0.5,,0.9", "--quantiles '0.5,,0.9': '' is not a number"),
    ("nan", "--quantiles: q=nan: quantiles must be in the range [0, 1]"),
    ("half", "--quantiles 'half': 'half' is not a number"),
])
def test_bad_probabilities_are_named(given, message, mpirun):
    r = mpirun(2, "eval", "--nlat", "9", "--nlon", "12", "--ntime", "2", "--quantiles", given, "--quiet")
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("gridshard: error") == 1, r.stderr
