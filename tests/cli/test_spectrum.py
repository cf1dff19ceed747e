"""`gridshard eval --spectrum`: ACE's power_spectrum metric from files. The mean spectra against a numpy reference
written here (Gauss-Legendre quadrature, the orthonormal Legendre recurrence, numpy's rfft) averaged over every
counted (sample, lead time) as ACE's aggregator averages them; ACE's four norm biases from those spectra;
power_spectrum_diagnostics.nc in ACE's layout; the same bits at every mesh, split rule, data split and I/O mode;
the NaN fill and its absence; options refused with one line naming them."""
import json
import math

import netCDF4
import numpy as np
import pytest
import xarray as xr

import forecast_files as ff
import make_files

MESHES = [(1, "1x1x1", "balanced"), (3, "1x3x1", "div_up"), (4, "1x2x2", "balanced"), (4, "2x1x2", "div_up"),
          (3, "3x1x1", "balanced")]


def legendre_power(field, convention="ace"):
    """P_l of one field (nlat, nlon), row 0 at the north pole, on Gauss-Legendre nodes: numpy only."""
    nlat, nlon = field.shape
    nodes, weights = np.polynomial.legendre.leggauss(nlat)
    x, w = nodes[::-1], weights[::-1]  # row 0 at x = 1
    coefficients = 2 * np.pi / nlon * np.fft.rfft(field.astype(np.float64), axis=-1)[:, : nlat]
    power = np.zeros(nlat)
    s = np.sqrt(1 - x * x)
    diagonal = np.full(nlat, 1 / np.sqrt(4 * np.pi))
    for m in range(min(nlat, coefficients.shape[1])):
        if m > 0:
            diagonal = np.sqrt((2 * m + 1) / (2 * m)) * s * diagonal
        previous, current = np.zeros(nlat), diagonal
        factor = 2.0 if convention == "full" and m > 0 else 1.0
        for l in range(m, nlat):  # noqa: E741 - the degree l, as the formulas write it
            if l == m + 1:
                previous, current = current, np.sqrt(2 * m + 3) * x * current
            elif l > m + 1:
                a = np.sqrt((4 * l * l - 1) / (l * l - m * m))
                b = np.sqrt((4 * (l - 1) ** 2 - 1) / ((l - 1) ** 2 - m * m))
                previous, current = current, a * (x * current - previous / b)
            c = np.sum(w * current * coefficients[:, m])
            power[l] += factor * abs(c) ** 2
    return power


def norm_biases(prediction, target):
    """ACE's _get_spectrum_metrics."""
    r = prediction / target - 1
    positive, negative = r[r > 0].sum() / len(r), r[r < 0].sum() / len(r)
    return {"smallest_scale_norm_bias": r[-1], "positive_norm_bias": positive, "negative_norm_bias": negative,
            "mean_abs_norm_bias": abs(positive) + abs(negative)}


def numbers_of(report):
    report = dict(report)
    for key in ("mesh", "split", "forecast"):
        report.pop(key, None)
    return report


@pytest.fixture(scope="module")
def forecast():
    return ff.Forecast(ics=3, members=2, leads=4, nlat=12, nlon=24)


@pytest.fixture(scope="module")
def ace_files(forecast, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ace")
    truth, pred = folder / "autoregressive_target.nc", folder / "autoregressive_predictions.nc"
    ff.write_ace(forecast, truth, pred)
    return truth, pred


def test_forecast_spectra_are_the_mean_of_every_counted_pair_and_aces_layout(forecast, ace_files, mpirun, tmp_path,
                                                                             meshes):
    truth, pred = ace_files
    first, first_file = None, None
    for ranks, mesh, split in meshes(MESHES):
        out = tmp_path / mesh / split
        out.mkdir(parents=True)
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--split", split, "--spectrum",
                   "--diagnostics", out, "--json", out / "r.json", "--quiet")
        assert r.returncode == 0, r.stderr
        report = json.loads((out / "r.json").read_text())
        spectrum_file = (out / "power_spectrum_diagnostics.nc").read_bytes()
        if first is None:
            first, first_file = report, spectrum_file
        else:
            assert numbers_of(report) == numbers_of(first), mesh
            assert spectrum_file == first_file, mesh
    settings = first["power_spectrum"]
    assert (settings["grid"], settings["truncation"], settings["convention"], settings["lmax"]) == (
        "legendre-gauss", "torch-harmonics-0.8", "ace", 12)
    assert settings["fill"]["method"] == "smooth_flood_fill" and settings["fill"]["num_steps"] == 4
    assert settings["rows"] == [1, 2, 3]  # lead 0, the initial condition, left out as ACE does
    t, p = forecast.fields["t2m"]
    want_target = np.mean([legendre_power(t[i, lead]) for i in range(3) for lead in (1, 2, 3)], axis=0)
    want_prediction = np.mean([legendre_power(p[i, m, lead]) for i in range(3) for m in range(2) for lead in (1, 2, 3)],
                              axis=0)
    ds = xr.open_dataset(tmp_path / "1x1x1" / "balanced" / "power_spectrum_diagnostics.nc")
    assert list(ds["source"].values) == ["prediction", "target"]
    assert ds["t2m"].dims == ("source", "wavenumber") and ds["wavenumber"].size == 12
    np.testing.assert_allclose(ds["t2m"].sel(source="target").values, want_target, rtol=1e-10)
    np.testing.assert_allclose(ds["t2m"].sel(source="prediction").values, want_prediction, rtol=1e-10)
    want = norm_biases(want_prediction, want_target)
    got = first["variables"]["t2m"]["power_spectrum"]
    assert set(got) == set(want)
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-8, abs_tol=1e-12), (key, got[key], value)
    # The land-masked field is filled first: finite spectra; the summaries are of the globe only.
    assert np.isfinite(ds["sst"].values).all()
    assert "power_spectrum" not in first["variables"]["sst"].get("time_mean", {})


def test_two_field_spectra_count_every_step_and_the_table_shows_them(mpirun, tmp_path):
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    make_files.write(truth, 15, 30, 3, seed=1, with_levels=False)
    make_files.write(pred, 15, 30, 3, seed=2, shift=0.1, with_levels=False)
    reports = []
    for ranks, mesh in ((1, "1x1x1"), (4, "1x2x2"), (3, "1x1x3")):
        out = tmp_path / mesh
        out.mkdir()
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--spectrum", "--diagnostics", out,
                   "--json", out / "r.json", "--vars", "t2m,sst")
        assert r.returncode == 0, r.stderr
        assert "ps_mean_abs" in r.stdout.splitlines()[2]
        # The files' latitudes are cell centres, not Gauss-Legendre nodes: said once, on stderr.
        assert r.stderr.count("warning: the grid's latitudes are not the legendre-gauss grid's nodes") == 1
        reports.append(json.loads((out / "r.json").read_text()))
        assert sorted(p.name for p in out.iterdir()) == ["power_spectrum_diagnostics.nc", "r.json"]
    assert all(numbers_of(r) == numbers_of(reports[0]) for r in reports)
    with netCDF4.Dataset(truth) as t_file, netCDF4.Dataset(pred) as p_file:
        t, p = t_file["t2m"][:].filled(np.nan), p_file["t2m"][:].filled(np.nan)
    want_target = np.mean([legendre_power(t[k]) for k in range(3)], axis=0)
    want_prediction = np.mean([legendre_power(p[k]) for k in range(3)], axis=0)
    got = reports[0]["variables"]["t2m"]["power_spectrum"]
    for key, value in norm_biases(want_prediction, want_target).items():
        assert math.isclose(got[key], value, rel_tol=1e-8, abs_tol=1e-12), key
    assert reports[0]["power_spectrum"]["rows"] == [0, 1, 2]
    assert reports[0]["power_spectrum"]["latitude_offset_from_nodes_deg"] > 0.1


def test_the_options_change_the_transform_and_the_fill(ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    out = {}
    for name, extra in (("default", []), ("lobatto", ["--spectrum-grid", "lobatto"]),
                        ("full", ["--spectrum-convention", "full", "--spectrum-lmax", "8"]),
                        ("no_fill", ["--spectrum-fill", "none"]),
                        ("one_step", ["--spectrum-fill-steps", "1"])):
        folder = tmp_path / name
        folder.mkdir()
        r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--spectrum", *extra, "--diagnostics", folder,
                   "--json", folder / "r.json", "--quiet")
        assert r.returncode == 0, r.stderr
        out[name] = (json.loads((folder / "r.json").read_text()),
                     xr.open_dataset(folder / "power_spectrum_diagnostics.nc"))
    assert out["lobatto"][1]["wavenumber"].size == 11 and out["lobatto"][0]["power_spectrum"]["grid"] == "lobatto"
    assert out["full"][1]["wavenumber"].size == 8 and out["full"][0]["power_spectrum"]["convention"] == "full"
    assert out["no_fill"][0]["power_spectrum"]["fill"] is None
    assert np.isnan(out["no_fill"][1]["sst"].values).all()  # NaN propagates without the fill
    assert np.isfinite(out["no_fill"][1]["t2m"].values).all()
    assert out["one_step"][0]["power_spectrum"]["fill"]["num_steps"] == 1
    assert not np.array_equal(out["one_step"][1]["sst"].values, out["default"][1]["sst"].values)
    assert np.array_equal(out["one_step"][1]["t2m"].values, out["default"][1]["t2m"].values)  # nothing to fill


def test_summaries_of_a_spectrum_that_is_not_finite_are_null(mpirun, tmp_path):
    """A mean spectrum with a non-finite degree (an all-NaN step the fill cannot fill; NaN or an infinity without the
    fill) has no summary: all four are null in the JSON and nan in the table, as every other score of such a field;
    a finite field beside it keeps its numbers. (With the fill, an infinity becomes the largest finite value, as
    torch's nan_to_num in ACE's fill makes it: a finite spectrum.)"""
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    make_files.write(truth, 12, 24, 3, seed=1, with_levels=False)
    make_files.write(pred, 12, 24, 3, seed=2, shift=0.1, with_levels=False)
    with netCDF4.Dataset(pred, "a") as ds:
        ds["t2m"][1] = np.nan  # a whole step missing: nothing to fill it from
        ds["sst"][2, 3, 4] = np.inf
    for extra in ([], ["--spectrum-fill", "none"]):
        out = tmp_path / ("fill" if not extra else "no_fill")
        out.mkdir()
        r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--spectrum", *extra, "--json", out / "r.json",
                   "--vars", "t2m,sst,z")
        assert r.returncode == 0, r.stderr
        scores = json.loads((out / "r.json").read_text())["variables"]
        for name in ("t2m", "sst") if extra else ("t2m",):
            summaries = scores[name]["power_spectrum"]
            assert set(summaries) >= {"smallest_scale_norm_bias", "positive_norm_bias", "negative_norm_bias",
                                      "mean_abs_norm_bias"}
            assert all(summaries[k] is None for k in summaries if k.endswith("norm_bias")), (name, summaries)
        assert all(isinstance(v, float) for k, v in scores["z"]["power_spectrum"].items() if k.endswith("bias"))
        rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[3:] if line.strip()}
        assert rows["t2m"][-4:] == ["nan"] * 4 and (rows["sst"][-4:] == ["nan"] * 4) == bool(extra), r.stdout


def test_a_spectrum_needs_whole_latitude_circles(mpirun, tmp_path):
    """Longitudes over half the globe (0 to 174 degrees) are not whole circles: refused in one line naming them."""
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    for path, seed in ((truth, 1), (pred, 2)):
        make_files.write(path, 12, 30, 2, seed=seed, with_levels=False, bounds=False)
        with netCDF4.Dataset(path, "a") as ds:
            ds["lon"][:] = 6.0 * np.arange(30)  # 0 .. 174
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--spectrum", "--json", tmp_path / "r.json")
    assert r.returncode == 2, r.stderr
    message = r.stderr.strip().splitlines()[0]  # then mpirun's own note of the exit status
    assert r.stderr.count("gridshard: error") == 1, r.stderr
    assert "whole latitude circles" in message and "from 0 to 174 degrees" in message, message
    assert not (tmp_path / "r.json").exists()
    without = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--json", tmp_path / "r.json", "--quiet")
    assert without.returncode == 0, without.stderr  # the other scores need no whole circles


@pytest.mark.parametrize("args,message", [
    (["--spectrum-grid", "lobatto"], "--spectrum-grid requires --spectrum"),
    (["--spectrum", "--spectrum-grid", "gaussian"], "grid=\"gaussian\" is not one of legendre-gauss"),
    (["--spectrum", "--spectrum-lmax", "500"], "lmax=500 must lie in [1, nlat=12]"),
    (["--spectrum", "--spectrum-fill", "mean"], "'mean' is not one of smooth, none"),
    (["--spectrum", "--spectrum-fill-steps", "-1"], "--spectrum-fill-steps"),
])
def test_bad_spectrum_options_fail_with_one_line(args, message, ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, *args, "--json", tmp_path / "r.json")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_two_field_diagnostics_need_the_spectrum(mpirun, tmp_path):
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    make_files.write(truth, 8, 16, 2, seed=1, with_levels=False)
    make_files.write(pred, 8, 16, 2, seed=2, with_levels=False)
    r = mpirun(1, "eval", "--truth", truth, "--pred", pred, "--diagnostics", tmp_path)
    assert r.returncode == 2
    assert "--diagnostics of two fields writes their power spectra only: add --spectrum" in r.stderr


def test_collective_io_writes_the_same_spectrum_file(ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    files = {}
    for io in ("independent", "collective"):
        folder = tmp_path / io
        folder.mkdir()
        r = mpirun(4, "eval", "--truth", truth, "--pred", pred, "--spectrum", "--io", io, "--mesh", "2x1x2",
                   "--diagnostics", folder, "--quiet")
        if io == "collective" and r.returncode == 2 and "collective" in r.stderr:
            pytest.skip("this build has no collective I/O")
        assert r.returncode == 0, r.stderr
        files[io] = (folder / "power_spectrum_diagnostics.nc").read_bytes()
    assert files["independent"] == files["collective"]
