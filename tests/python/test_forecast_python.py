"""The forecast scores through the Python module give the tool's numbers bit for bit at several meshes, and
`python3 -m gridshard.plot` draws a forecast evaluation's diagnostics. Each case is its own mpirun."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "cli"))
import forecast_files as ff  # noqa: E402
from test_across_meshes import mpirun  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forecast")
    forecast = ff.Forecast(ics=1, members=5, leads=4, nlat=11, nlon=18, seed=21)
    truth, pred = folder / "t.nc", folder / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="number", with_sample=False)
    clim = ff.write_climatology(forecast, folder / "clim.nc", per_lead=False)
    return truth, pred, clim


def test_the_module_gives_the_tools_ensemble_and_anomaly_scores(files, tmp_path):
    truth, pred, clim = files
    tool_json = tmp_path / "tool.json"
    mpirun(1, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--climatology", clim,
           "--json", tool_json, "--quiet")
    tool = json.loads(tool_json.read_text())["variables"]["t2m"]["per_step"]
    for ranks, mesh, split in ((1, "1x1x1", "balanced"), (4, "1x2x2", "div_up"), (3, "1x3x1", "balanced"),
                               (6, "2x1x3", "div_up")):
        out = tmp_path / f"{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "ensemble_report.py", out, "--mesh", mesh, "--split", split,
               "--truth", truth, "--pred", pred, "--clim", clim)
        python = json.loads(out.read_text())
        for score, values in python.items():
            assert values == [float("nan" if v is None else v).hex() for v in tool[score]], (mesh, score)


@pytest.fixture(scope="module")
def several_initial_conditions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aggregator")
    forecast = ff.Forecast(ics=3, members=4, leads=5, nlat=11, nlon=18, seed=5)
    truth, pred = folder / "t.nc", folder / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="member")
    return truth, pred


def _as_hex(values):
    return [float("nan" if v is None else v).hex() for v in values]


def test_the_aggregator_gives_the_tools_bits_at_every_mesh(several_initial_conditions, tmp_path):
    """gridshard.Aggregator fed windows of shards, several initial conditions and members, gives `gridshard eval`'s
    per-lead scores, time means, zonal means and maps bit for bit; the data ranks hold uneven blocks (3 over 2)."""
    truth, pred = several_initial_conditions
    folder = tmp_path / "tool"
    folder.mkdir()
    import netCDF4

    with netCDF4.Dataset(pred) as p:  # ACE's stats files for --normalize: one scalar per variable in each
        names = [n for n, v in p.variables.items() if v.ndim == 5]
    stats = (tmp_path / "means.nc", tmp_path / "stds.nc")
    for index, path in enumerate(stats):
        with netCDF4.Dataset(path, "w") as ds:
            for k, n in enumerate(names):
                ds.createVariable(n, "f8", ())[...] = (280.5 + 7 * k, 3.25 + k)[index]
    # ACE's near-zero fractions: thresholds inside each variable's range, sst's its own (its land is missing)
    near_zero = {"eps": 280.0, "per_variable_eps": {"sst": 295.0}, "include_maps": True}
    mpirun(1, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--json", folder / "r.json",
           "--diagnostics", folder, "--normalize", *stats, "--spectrum", "--quiet", "--near-zero-fraction",
           "--near-zero-fraction-eps", "280", "--near-zero-fraction-per-variable-eps", "sst=295",
           "--near-zero-fraction-include-maps", "--trend", "--video", "--enable-extended-videos", "--seasonal")
    report = json.loads((folder / "r.json").read_text())
    tool, tool_normalized = report["variables"], report["normalized"]["ace_keys"]

    with netCDF4.Dataset(folder / "time_mean_diagnostics.nc") as maps, \
            netCDF4.Dataset(folder / "zonal_mean_diagnostics.nc") as zonal:
        tool_maps = {(k, n): _as_hex(np.asarray(maps[f"{k}-{n}"][:].filled(np.nan)).ravel())
                     for n in tool for k in ("gen_map", "bias_map")}
        tool_zonal = {(k, n): _as_hex(np.asarray(zonal[f"{k}-{n}"][:].filled(np.nan)).ravel())
                      for n in tool for k in ("gen", "error")}
    with netCDF4.Dataset(folder / "near_zero_fraction_diagnostics.nc") as fractions:
        tool_fractions = {(k, n): _as_hex(np.asarray(fractions[f"{k}_map-{n}"][:]).ravel())
                          for n in tool for k in ("gen", "target", "error")}
    with netCDF4.Dataset(folder / "trend_diagnostics.nc") as trends:
        tool_trends = {(source, n): _as_hex(np.asarray(trends[n][k][:].filled(np.nan)).ravel())
                       for n in tool for k, source in enumerate(("target", "prediction"))}
    with netCDF4.Dataset(folder / "video_diagnostics.nc") as videos:
        tool_videos = {(source, n): _as_hex(np.asarray(videos[n][k][:].filled(np.nan)).ravel())
                       for n in tool for k, source in enumerate(("prediction", "target"))}
        extended = {"bias": "bias", "rmse": "rmse", "min_error": "min_err", "max_error": "max_err",
                    "variance_ratio": "gen_var"}  # the library's name: ACE's label in the file
        tool_videos.update({(key, n): _as_hex(np.asarray(videos[f"{label}_{n}"][:].filled(np.nan)).ravel())
                            for n in tool for key, label in extended.items()})
    with netCDF4.Dataset(folder / "power_spectrum_diagnostics.nc") as spectra:
        tool_spectra = {(source, n): _as_hex(np.asarray(spectra[n][k][:]).ravel())
                        for n in tool for k, source in enumerate(("prediction", "target"))}
    runs = ((1, "1x1x1", "balanced", 2, False), (4, "1x2x2", "div_up", 3, False), (3, "3x1x1", "balanced", 1, True),
            (6, "2x1x3", "div_up", 2, False), (3, "1x1x3", "div_up", 5, True))
    for ranks, mesh, split, window, torch in runs:
        out = tmp_path / f"{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "aggregator_report.py", out, "--mesh", mesh, "--split", split,
               "--truth", truth, "--pred", pred, "--window", window, *(["--torch"] if torch else []),
               "--normalize", *stats, "--spectrum", "--near-zero", json.dumps(near_zero), "--trend", "--video",
               "--extended-video", "--seasonal")
        python = json.loads(out.read_text())
        normalized = python.pop("normalized")  # ACE's normalised keys: the tool's --normalize, bit for bit
        assert sorted(normalized) == sorted(tool_normalized), mesh
        for key, values in normalized.items():
            assert values == _as_hex(np.atleast_1d(tool_normalized[key])), (mesh, key)
        assert sorted(python) == sorted(tool), mesh
        for name, scores in python.items():
            assert sorted(scores["per_step"]) == sorted(tool[name]["per_step"]), (mesh, name)
            for key, values in scores["per_step"].items():
                assert values == _as_hex(tool[name]["per_step"][key]), (mesh, name, key)
            assert sorted(scores["time_mean"]) == sorted(tool[name]["time_mean"]), (mesh, name)
            for key, value in scores["time_mean"].items():
                assert value == _as_hex([tool[name]["time_mean"][key]])[0], (mesh, name, key)
            assert scores["gen_map"] == tool_maps[("gen_map", name)], (mesh, name)
            assert scores["bias_map"] == tool_maps[("bias_map", name)], (mesh, name)
            assert scores["profiles"]["gen"] == tool_zonal[("gen", name)], (mesh, name)
            assert scores["profiles"]["error"] == tool_zonal[("error", name)], (mesh, name)
            for key, value in scores["power_spectrum"].items():  # ACE's norm biases and the spectra, bit for bit
                assert value == _as_hex([tool[name]["power_spectrum"][key]])[0], (mesh, name, key)
            assert sorted(scores["power_spectrum"]) == sorted(tool[name]["power_spectrum"]), (mesh, name)
            for source, values in scores["spectra"].items():
                assert values == tool_spectra[(source, name)], (mesh, name, source)
            maps = scores["near_zero_maps"]  # the fractions are among the time means above
            assert maps["prediction"] == tool_fractions[("gen", name)], (mesh, name)
            assert maps["target"] == tool_fractions[("target", name)], (mesh, name)
            error = np.array([float.fromhex(v) for v in maps["prediction"]]) - \
                np.array([float.fromhex(v) for v in maps["target"]])
            assert _as_hex(error) == tool_fractions[("error", name)], (mesh, name)
            assert len(scores["video"]) == 7, (mesh, name)  # the mean maps and the five extended ones
            for source, values in scores["video"].items():
                assert values == tool_videos[(source, name)], (mesh, name, source)
            for source, values in scores["trend_maps"].items():  # the trend's RMSE is among the time means
                assert values == tool_trends[(source, name)], (mesh, name, source)
        assert 0 < float.fromhex(python["t2m"]["time_mean"]["near_zero_fraction_gen"]) < 1
        assert np.isfinite(float.fromhex(python["t2m"]["time_mean"]["trend_rmse"]))
        assert "seasonal_rmse_djf" in python["t2m"]["time_mean"] and "seasonal" in python["t2m"]


def test_the_aggregator_refuses_bad_windows_on_every_rank(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(
        "import numpy as np, gridshard\n"
        "d = gridshard.Distributed(spatial_parallelism=(1, 2))\n"
        "a = gridshard.Aggregator(d, ['x'], np.linspace(-80, 80, 6), 8, 1, 3, members=2)\n"
        "h, w = a.box\n"
        "y = np.zeros((1, 2, h, w), 'f4')\n"
        "good = np.zeros((1, 2, 2, h, w), 'f4')\n"
        "bad = np.zeros((1, 3, 2, h, w), 'f4') if d.rank == 1 else good\n"
        "for call in (lambda: a.record({'x': y}, {'x': bad}), lambda: a.record({'x': y}, {'x': good.astype('f8')}),\n"
        "             lambda: a.record({'y': y}, {'x': good}), lambda: a.finish(),\n"
        "             lambda: gridshard.Aggregator(d, ['x'] if d.rank == 0 else ['x', 'y'], np.zeros(6), 8, 1, 3),\n"
        "             lambda: gridshard.Aggregator(d, ['x'], np.zeros(6), 8 if d.rank == 0 else 'eight', 1, 3),\n"
        "             lambda: gridshard.Aggregator(d, ['x'], np.zeros(6), 8, 1, 3, scores=['nope']),\n"
        "             lambda: gridshard.Aggregator(d, ['x'], np.zeros(6), 8, 1, 3, ensemble_cell_leads=[1]),\n"
        "             lambda: gridshard.Aggregator(d, ['x'], np.zeros(6), 8, 1, 3, members=2,\n"
        "                                          ensemble_cell_leads=[3 if d.rank else 1])):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as e:\n"
        "        print('ValueError:', e)\n"
        "a.record({'x': y}, {'x': good})\n"
        "try:\n"
        "    a.record({'x': y}, {'x': good})\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n"
        "# A subset of the scores: the same bits for those it keeps, and only those.\n"
        "full = gridshard.Aggregator(d, ['x'], np.linspace(-80, 80, 6), 8, 1, 3)\n"
        "part = gridshard.Aggregator(d, ['x'], np.linspace(-80, 80, 6), 8, 1, 3, scores=['weighted_rmse'])\n"
        "x = np.random.default_rng(d.rank).normal(size=(1, 3, h, w)).astype('f4')\n"
        "for agg in (full, part):\n"
        "    agg.record({'x': x}, {'x': x + 1})\n"
        "f, p = full.lead_scores(0, 3)['x'], part.lead_scores(0, 3)['x']\n"
        "assert sorted(p) == ['weighted_rmse'] and len(f) > 3, (sorted(p), sorted(f))\n"
        "assert f['weighted_rmse'].tobytes() == p['weighted_rmse'].tobytes()\n")
    out = mpirun(2, sys.executable, script).stdout  # fails when an assert of the script does
    assert out.count("ValueError:") == 20, out  # every call fails on both ranks
    assert "ensemble_cell_leads: ACE's ensemble scores need a forecast of several members" in out, out
    assert "the ranks give different variables" in out and "'eight'" in out, out
    assert "3, 2, 3, 4" in out or "(1, 3, 2" in out, out
    assert "was never recorded" in out and "was recorded already" in out, out


def test_ensemble_argument_errors_are_value_errors(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(
        "import numpy as np, gridshard\n"
        "d = gridshard.Distributed()\n"
        "y = np.zeros((4, 6))\n"
        "for call in (lambda: d.crps(y, np.zeros((3, 4, 7))), lambda: d.crps(y, np.zeros((3, 4, 6), 'f4')),\n"
        "             lambda: d.crps(y, np.zeros((1, 4, 6))), lambda: d.ensemble_spread(y, y),\n"
        "             lambda: d.crps(y, np.zeros((4, 6, 3)), member_dim=-1),\n"
        "             lambda: d.anomaly_correlation(y, y, np.zeros((4, 5)))):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError as e:\n"
        "        print('ValueError:', e)\n")
    out = mpirun(2, sys.executable, script).stdout
    assert out.count("ValueError:") == 12, out  # every call fails on both ranks
    assert "member_dim=-1: must name one leading dim" in out, out


def test_plot_draws_the_diagnostics(tmp_path):
    folder = tmp_path / "diagnostics"
    folder.mkdir()
    mpirun(2, os.environ["GRIDSHARD_BIN"], "eval", "--nlat", "37", "--nlon", "72", "--ntime", "6",
           "--initial-conditions", "2", "--ensemble-size", "4", "--diagnostics", folder, "--json",
           folder / "report.json", "--spectrum", "--quiet", "--trend", "--video", "--enable-extended-videos",
           "--near-zero-fraction",
           "--near-zero-fraction-include-maps", "--near-zero-fraction-per-variable-eps", "h=9500",
           "--near-zero-fraction-per-variable-eps", "t850=275", "--near-zero-fraction-per-variable-eps", "sst=291")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    pngs = sorted(p for p in folder.iterdir() if p.suffix == ".png")
    names = {p.name for p in pngs}
    for variable in ("h", "t850", "sst"):
        assert {f"scores-{variable}.png", f"zonal_mean-{variable}.png", f"bias_map-{variable}.png",
                f"power_spectrum-{variable}.png", f"trend-{variable}.png", f"near_zero_fraction-{variable}.png",
                f"video-{variable}.png"} <= names
    for name, content in before.items():  # the inputs are untouched
        assert (folder / name).read_bytes() == content
    import matplotlib.image

    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        image = matplotlib.image.imread(png)[..., :3]
        colours = np.unique((image * 255).astype(np.uint8).reshape(-1, 3), axis=0)
        assert image.shape[0] > 200 and image.shape[1] > 300, (png, image.shape)
        if png.name.startswith("power_spectrum-"):  # two lines on white: the target's blue, the prediction's orange
            pixels = (image * 255).astype(int).reshape(-1, 3)
            blue = ((pixels[:, 2] > pixels[:, 0] + 60) & (pixels[:, 2] > 150)).sum()
            orange = ((pixels[:, 0] > pixels[:, 2] + 60) & (pixels[:, 0] > 200)).sum()
            assert blue > 200 and orange > 200, (png.name, blue, orange)
            continue
        assert len(colours) > 50 and image.std() > 0.05, (png.name, len(colours), image.std())
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "temporaries left behind"


def test_plot_draws_the_spectra_of_two_fields(tmp_path):
    folder = tmp_path / "pair"
    folder.mkdir()
    mpirun(2, os.environ["GRIDSHARD_BIN"], "eval", "--nlat", "37", "--nlon", "72", "--ntime", "2", "--spectrum",
           "--diagnostics", folder, "--quiet")
    assert sorted(p.name for p in folder.iterdir()) == ["power_spectrum_diagnostics.nc"]
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".png") == [
        "power_spectrum-h.png", "power_spectrum-sst.png", "power_spectrum-t850.png"]


def test_plot_refuses_a_folder_without_diagnostics(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(tmp_path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert "mean_diagnostics.nc" in result.stderr and str(tmp_path) in result.stderr


def test_annual_means_from_files_are_the_aggregators_bits(tmp_path):
    """ACE's annual and seasonal means and Niño 3.4 index of a run of 2.4 years (12 lead times 73 days apart, from
    2020-01-01): `gridshard eval --annual --seasonal --enso-index` gives gridshard.Aggregator's bits at every mesh:
    the scores (annual RMSE and CRPS, the R2 against monthly reference data of t2m, seasonal RMSEs, the index's
    spread), annual_diagnostics.nc (source, sample, year), seasonal_diagnostics.nc (source, season, lat, lon) and
    enso_index_diagnostics.nc (source, sample, time)."""
    import netCDF4

    forecast = ff.Forecast(ics=2, members=3, leads=12, nlat=9, nlon=14, seed=11)
    forecast.lead_us = np.arange(12) * 73 * 24 * ff.HOUR_US
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="member")
    folder = tmp_path / "tool"
    folder.mkdir()
    # ACE's monthly reference data of t2m (not of sst: no R2 there), 2 samples of the months of 2020 to 2022
    reference = tmp_path / "reference.nc"
    with netCDF4.Dataset(truth) as t, netCDF4.Dataset(reference, "w") as r:
        r.createDimension("sample", 2)
        r.createDimension("time", 36)
        for axis in ("lat", "lon"):
            r.createDimension(axis, t[axis].size)
            v = r.createVariable(axis, "f8", (axis,))
            v.setncatts({k: t[axis].getncattr(k) for k in t[axis].ncattrs()})
            v[:] = t[axis][:]
        valid = r.createVariable("valid_time", "f8", ("sample", "time"))
        valid.units, valid.calendar = "days since 2020-01-01", "proleptic_gregorian"
        days = [(np.datetime64(f"{2020 + k // 12}-{1 + k % 12:02d}-15") - np.datetime64("2020-01-01")).astype(int)
                for k in range(36)]
        valid[:] = np.array([days, days], dtype=np.float64)
        r.createVariable("counts", "f4", ("sample", "time"))[:] = np.tile(28 + np.arange(36) % 4, (2, 1))
        field = 280 + np.random.default_rng(5).normal(0, 1, (2, 36, t["lat"].size, t["lon"].size))
        r.createVariable("t2m", "f4", ("sample", "time", "lat", "lon"))[:] = field.astype(np.float32)
    mpirun(1, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--json", folder / "r.json",
           "--diagnostics", folder, "--quiet", "--annual", "--seasonal", "--enso-index", "--annual-reference-data",
           reference)
    tool = json.loads((folder / "r.json").read_text())["variables"]
    with netCDF4.Dataset(folder / "annual_diagnostics.nc") as annual:
        years = list(annual["year"][:])
        tool_annual = {(n, k): _as_hex(np.asarray(annual[n][k][:].filled(np.nan)).ravel())
                       for n in tool for k in range(2)}
        counts = _as_hex(np.asarray(annual["counts"][0][:].filled(np.nan)).ravel())
    with netCDF4.Dataset(folder / "seasonal_diagnostics.nc") as seasonal:
        assert all(seasonal[n].dimensions == ("source", "season", "lat", "lon") for n in tool)
        tool_seasonal = {(n, k): _as_hex(np.asarray(seasonal[n][k][:].filled(np.nan)).ravel())
                         for n in tool for k in range(2)}
    with netCDF4.Dataset(folder / "enso_index_diagnostics.nc") as enso:
        tool_index = {k: _as_hex(np.asarray(enso["sst"][k][:].filled(np.nan)).ravel()) for k in range(2)}
        first_month = netCDF4.num2date(enso["time"][0], enso["time"].units, enso["time"].calendar)
    assert (first_month.year, first_month.month, first_month.day) == (2020, 3, 15)  # 73 days on: March
    assert years == [2020, 2021]
    # gridshard.plot draws the annual means and the index as ACE logs them: the samples, their mean, the target's
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    _assert_drawn(folder, ("annual-t2m.png", "annual-sst.png", "enso_index-sst.png"), 200)
    assert {"seasonal-t2m.png", "seasonal-sst.png"} <= {p.name for p in folder.iterdir()}
    for ranks, mesh, split in ((1, "1x1x1", "balanced"), (4, "1x2x2", "div_up"), (3, "1x1x3", "div_up")):
        out = tmp_path / f"{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "aggregator_report.py", out, "--mesh", mesh, "--split", split,
               "--truth", truth, "--pred", pred, "--window", 5, "--annual", 73 * 86400, "--seasonal", "--nino34",
               "--annual-reference", reference)
        python = json.loads(out.read_text())
        for name, scores in python.items():
            r2 = ("annual_r2_target", "annual_r2_gen") if name == "t2m" else ()  # the reference has t2m alone
            assert all(key in tool[name]["time_mean"] for key in r2), name
            assert sorted(k for k in scores["time_mean"] if k.startswith("annual_r2")) == sorted(r2), (mesh, name)
            for key in ("annual_rmse", "annual_crps", "seasonal_rmse", "seasonal_rmse_djf", "seasonal_rmse_jja", *r2):
                assert scores["time_mean"][key] == _as_hex([tool[name]["time_mean"][key]])[0], (mesh, name, key)
            assert scores["annual"]["target"] == tool_annual[(name, 0)], (mesh, name)
            assert scores["annual"]["prediction"] == tool_annual[(name, 1)], (mesh, name)
            assert scores["annual"]["counts"] == counts, (mesh, name)
            assert scores["seasonal"]["target"] == tool_seasonal[(name, 0)], (mesh, name)
            assert scores["seasonal"]["prediction"] == tool_seasonal[(name, 1)], (mesh, name)
        assert scores_of_sst(python) == scores_of_sst(tool), mesh
        assert python["sst"]["nino34_index"]["target"] == tool_index[0], mesh
        assert python["sst"]["nino34_index"]["prediction"] == tool_index[1], mesh
        assert np.isfinite(float.fromhex(python["t2m"]["time_mean"]["annual_crps"]))
        assert np.isfinite(float.fromhex(python["sst"]["time_mean"]["nino34_index_std"]))


def test_histograms_from_files_are_the_aggregators_bits(tmp_path):
    """ACE's histograms over ACE's windows of 4 forward steps: `gridshard eval --histogram --forward-steps-in-memory 4`
    gives gridshard.Aggregator's bits fed ACE's windows at every mesh and data split (the percentiles, and
    histogram_diagnostics.nc's counts (source, bin) and edges (source, bin_edges)); the tool's own meshes agree, and
    its windows matter (one window of every step moves the edges)."""
    import netCDF4

    forecast = ff.Forecast(ics=3, members=2, leads=12, nlat=9, nlon=14, seed=5)
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="member")

    def tool(ranks, mesh, *flags):
        folder = tmp_path / f"tool-{ranks}-{mesh}-{len(flags)}"
        folder.mkdir()
        mpirun(ranks, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--json",
               folder / "r.json", "--diagnostics", folder, "--quiet", "--mesh", mesh, "--histogram", *flags)
        report = json.loads((folder / "r.json").read_text())["variables"]
        with netCDF4.Dataset(folder / "histogram_diagnostics.nc") as ds:
            files = {n: {"target_counts": [int(c) for c in ds[n][0][:]],
                         "prediction_counts": [int(c) for c in ds[n][1][:]],
                         "target_edges": _as_hex(ds[f"{n}_bin_edges"][0][:]),
                         "prediction_edges": _as_hex(ds[f"{n}_bin_edges"][1][:])} for n in report}
        return report, files

    report, files = tool(1, "1x1x1", "--forward-steps-in-memory", "4")
    assert set(files) == {"t2m", "sst"}
    for ranks, mesh, flags in ((4, "2x1x2", ("--data-split", "lead-times")), (3, "1x1x3", ()),
                               (4, "2x2x1", ("--data-split", "members"))):
        other, other_files = tool(ranks, mesh, "--forward-steps-in-memory", "4", *flags)
        assert other_files == files, (mesh, flags)
        for name in report:
            for key in ("histogram_percentile_gen", "histogram_percentile_target"):
                assert _as_hex([other[name]["time_mean"][key]]) == _as_hex([report[name]["time_mean"][key]])
    one_window, one_window_files = tool(1, "1x1x1")
    assert one_window_files != files  # ACE's windows matter: their edges differ
    # gridshard.plot draws the histograms as ACE logs them: the target's (blue) and the prediction's (orange)
    folder = tmp_path / "tool-1-1x1x1-2"
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    _assert_drawn(folder, ("histogram-t2m.png", "histogram-sst.png"), 100)
    for ranks, mesh in ((1, "1x1x1"), (4, "1x2x2"), (3, "3x1x1")):
        out = tmp_path / f"{ranks}-{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "aggregator_report.py", out, "--mesh", mesh, "--split", "div_up",
               "--truth", truth, "--pred", pred, "--window", 4, "--histogram")
        python = json.loads(out.read_text())
        for name in report:
            assert python[name]["histogram"] == files[name], (mesh, name)
            for key in ("histogram_percentile_gen", "histogram_percentile_target"):
                assert python[name]["time_mean"][key] == _as_hex([report[name]["time_mean"][key]])[0], (mesh, key)


def test_the_ipo_index_from_files_is_the_aggregators_bits(tmp_path):
    """ACE's IPO index of a run of 82 years (1001 lead times 30 days apart): `gridshard eval --ipo-index` gives
    gridshard.Aggregator's bits at every mesh: the filtered index's spreads (ipo_tpi_std, ipo_tpi_std_norm) and
    ipo_index_diagnostics.nc (source, sample, time); a run of 80 years or less is refused, as ACE's build drops it."""
    import netCDF4

    forecast = ff.Forecast(ics=2, members=2, leads=1001, nlat=9, nlon=14, seed=13)
    forecast.lead_us = np.arange(1001) * 30 * 24 * ff.HOUR_US
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="member")
    folder = tmp_path / "tool"
    folder.mkdir()
    mpirun(1, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--json", folder / "r.json",
           "--diagnostics", folder, "--quiet", "--ipo-index")
    tool = json.loads((folder / "r.json").read_text())["variables"]
    assert "ipo_tpi_std" in tool["sst"]["time_mean"] and "ipo_tpi_std" not in tool["t2m"]["time_mean"]
    with netCDF4.Dataset(folder / "ipo_index_diagnostics.nc") as ipo:
        tool_index = {k: _as_hex(np.asarray(ipo["sst"][k][:].filled(np.nan)).ravel()) for k in range(2)}
        assert ipo["sst"].dimensions == ("source", "sample", "time") and ipo["time"].size > 80 * 12
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0 and (folder / "ipo_index-sst.png").is_file(), result.stderr
    for ranks, mesh, split in ((1, "1x1x1", "balanced"), (4, "1x2x2", "div_up"), (3, "1x1x3", "div_up")):
        out = tmp_path / f"{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "aggregator_report.py", out, "--mesh", mesh, "--split", split,
               "--truth", truth, "--pred", pred, "--window", 200, "--ipo")
        python = json.loads(out.read_text())
        for key in ("ipo_tpi_std", "ipo_tpi_std_norm"):
            assert python["sst"]["time_mean"][key] == _as_hex([tool["sst"]["time_mean"][key]])[0], (mesh, key)
        assert python["sst"]["ipo_index"]["target"] == tool_index[0], mesh
        assert python["sst"]["ipo_index"]["prediction"] == tool_index[1], mesh
    short = ff.Forecast(ics=2, members=2, leads=12, nlat=9, nlon=14, seed=13)
    ff.write_member_dim(short, tmp_path / "ts.nc", tmp_path / "ps.nc", member_dim="member")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    result = subprocess.run([os.environ["GRIDSHARD_BIN"], "eval", "--truth", tmp_path / "ts.nc", "--pred",
                             tmp_path / "ps.nc", "--quiet", "--ipo-index"], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 2 and "--ipo-index: ACE's IPO index needs a run of more than 29200 days" in \
        result.stderr, result.stderr


def _write_index(path, calendar, dates, values, variables=("nino34",)):
    """A reference index file: `values` at `dates` of `calendar` over `time`, under each of `variables`."""
    import cftime
    import netCDF4

    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", len(dates))
        time = f.createVariable("time", "f8", ("time",))
        time.units, time.calendar = "days since 1900-01-01", calendar
        time[:] = cftime.date2num([cftime.datetime(*d, calendar=calendar) for d in dates], time.units, calendar)
        for name in variables:
            f.createVariable(name, "f8", ("time",))[:] = values


def test_the_enso_coefficient_from_files_is_the_aggregators_bits(tmp_path):
    """ACE's ENSO coefficient against a reference index file (an all_leap index on the 29th of each month, so that
    the julian run drops its 29 Februaries, as ACE's calendar conversion does): `gridshard eval
    --enso-coefficient-index` gives gridshard.Aggregator's bits at every mesh, the index formed by the library's rule
    (gridshard.sample_index_series, ACE's own to the bit: tests/ace). The first initial condition's run (2000 on) is
    covered, the second's (2020 on) is not and is left out, as ACE leaves it out. A run of 1800 days or less, an
    index file of two variables and one whose time units are not a unit of time are refused, naming the file."""
    import netCDF4

    forecast = ff.Forecast(ics=2, members=2, leads=70, nlat=9, nlon=14, seed=17)
    forecast.lead_us = np.arange(70) * 30 * 24 * ff.HOUR_US  # 2070 days
    forecast.init_times = forecast.init_times + np.array([-20 * 365 - 5, 0]) * 24 * ff.HOUR_US
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_member_dim(forecast, truth, pred, member_dim="member")
    dates = [(y, m, 29) for y in range(1995, 2013) for m in range(1, 13)]
    values = np.sin(np.arange(len(dates)) * 0.37) + 0.1 * np.arange(len(dates)) / len(dates)
    index = tmp_path / "nino34.nc"
    _write_index(index, "all_leap", dates, values)
    folder = tmp_path / "tool"
    folder.mkdir()
    mpirun(2, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--json", folder / "r.json",
           "--diagnostics", folder, "--quiet", "--enso-coefficient-index", index)
    tool = json.loads((folder / "r.json").read_text())["variables"]
    with netCDF4.Dataset(folder / "enso_coefficient_diagnostics.nc") as f:
        tool_maps = {n: {k: _as_hex(np.asarray(f[n][k][:].filled(np.nan)).ravel()) for k in range(2)}
                     for n in tool}
        assert all(f[n].dimensions == ("source", "lat", "lon") for n in tool)
    assert all(np.isfinite(tool[n]["time_mean"]["enso_coefficient_rmse"]) for n in tool)
    for ranks, mesh, split in ((1, "1x1x1", "balanced"), (4, "1x2x2", "div_up"), (3, "1x1x3", "div_up"),
                               (2, "2x1x1", "balanced")):
        out = tmp_path / f"{mesh}.json"
        mpirun(ranks, sys.executable, HERE / "aggregator_report.py", out, "--mesh", mesh, "--split", split,
               "--truth", truth, "--pred", pred, "--window", 25, "--enso-coefficient-index", index)
        python = json.loads(out.read_text())
        for name in tool:
            assert python[name]["time_mean"]["enso_coefficient_rmse"] == \
                _as_hex([tool[name]["time_mean"]["enso_coefficient_rmse"]])[0], (mesh, name)
            assert python[name]["enso_coefficient_maps"]["target"] == tool_maps[name][0], (mesh, name)
            assert python[name]["enso_coefficient_maps"]["prediction"] == tool_maps[name][1], (mesh, name)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    two = tmp_path / "two.nc"
    _write_index(two, "all_leap", dates, values, ("a", "b"))
    result = subprocess.run([os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--quiet",
                             "--enso-coefficient-index", two], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and "needs one variable over (time) alone, the index; it has 2 (a, b)" in \
        result.stderr, result.stderr
    bad_units = tmp_path / "units.nc"
    _write_index(bad_units, "all_leap", dates, values)
    with netCDF4.Dataset(bad_units, "a") as f:
        f["time"].units = "furlongs since 1900-01-01"
    result = subprocess.run([os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth, "--pred", pred, "--quiet",
                             "--enso-coefficient-index", bad_units], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 2 and f"--enso-coefficient-index '{bad_units}': " in result.stderr and \
        "furlongs" in result.stderr, result.stderr
    short = ff.Forecast(ics=2, members=2, leads=12, nlat=9, nlon=14, seed=13)
    ff.write_member_dim(short, tmp_path / "ts.nc", tmp_path / "ps.nc", member_dim="member")
    result = subprocess.run([os.environ["GRIDSHARD_BIN"], "eval", "--truth", tmp_path / "ts.nc", "--pred",
                             tmp_path / "ps.nc", "--quiet", "--enso-coefficient-index", index], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 2 and "--enso-coefficient-index: ACE's ENSO coefficient needs a run of more than " \
        "1800 days" in result.stderr, result.stderr


def _assert_drawn(folder, pngs, least):
    """Each of `pngs` in `folder` draws the prediction (blue) and the target (orange): at least `least` pixels each."""
    import matplotlib.image

    for png in pngs:
        pixels = (matplotlib.image.imread(folder / png)[..., :3] * 255).astype(int).reshape(-1, 3)
        blue = ((pixels[:, 2] > pixels[:, 0] + 60) & (pixels[:, 2] > 150)).sum()
        orange = ((pixels[:, 0] > pixels[:, 2] + 60) & (pixels[:, 0] > 200)).sum()
        assert blue > least and orange > least, (png, blue, orange)


def scores_of_sst(report):
    """The Niño 3.4 index's scores of sst, as float hex (the tool's numbers or the report's hex)."""
    means = report["sst"]["time_mean"]
    return {k: v if isinstance(v, str) else _as_hex([v])[0] for k, v in means.items() if k.startswith("nino34")}
