"""`gridshard eval` on forecasts (docs/forecast.md): ACE's file layout and its variants, every score against
an independent float64 numpy reference, and the same bits at every mesh and split rule."""
import json
import math
import warnings

import netCDF4
import numpy as np
import pytest

import forecast_files as ff

# Ranks and meshes: odd ones, data-parallel over initial conditions and over lead times, one-row shards.
MESHES = [(1, "1x1x1", "balanced"), (4, "2x1x2", "balanced"), (3, "1x3x1", "div_up"), (3, "3x1x1", "balanced"),
          (6, "2x3x1", "div_up"), (6, "1x2x3", "balanced")]


def load(path):
    with open(path) as f:
        return json.load(f)


def numbers(document):
    """The scores of a report, without the fields that name the mesh and split."""
    return {"variables": document["variables"], "forecast": {k: v for k, v in document["forecast"].items()
                                                             if k != "data_split"}}


def close(got, want, what, rtol=1e-9, atol=1e-9):
    got = np.array([np.nan if v is None else v for v in np.atleast_1d(got)], dtype=np.float64)
    want = np.atleast_1d(np.asarray(want, dtype=np.float64))
    assert got.shape == want.shape, what
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN where {got} vs {want}"
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol, err_msg=what)


def check_against_reference(report, ref, region="global"):
    assert set(report["variables"]) == set(ref)
    for name, want in ref.items():
        got = report["variables"][name]["regions"][region]
        assert set(got["per_step"]) == set(want["per_step"]), name
        for score, series in want["per_step"].items():
            close(got["per_step"][score], series, f"{name} {region} per_step {score}", **tolerance(score))
        for score, value in want["time_mean"].items():
            close(got["time_mean"][score], value, f"{name} {region} time_mean {score}", **tolerance(score))


def tolerance(score):
    # The gradient magnitudes are formed in the data's float32, as ACE forms them; the reference's in float64.
    return {"rtol": 1e-6, "atol": 1e-6} if "grad_mag" in score else {}


@pytest.fixture(scope="module")
def forecast():
    return ff.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22)


@pytest.fixture(scope="module")
def reference(forecast):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ff.reference(forecast, ff.cos_lat_weights(forecast))


@pytest.fixture(scope="module")
def ace_files(forecast, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ace")
    truth, pred = folder / "autoregressive_target.nc", folder / "autoregressive_predictions.nc"
    ff.write_ace(forecast, truth, pred)
    return truth, pred


def test_the_gradient_score_leaves_nan_out_under_propagate(ace_files, reference, mpirun, tmp_path):
    """Under --policy propagate the means of 'sst' (NaN over land, under non-zero weights) are NaN, as ACE's, but its
    gradient score is ACE's weighted_nanmean of each field's magnitudes: the reference's numbers, the same bits at two
    meshes, and the report says its rule differs from --policy."""
    truth, pred = ace_files
    reports = []
    for ranks, mesh in ((1, "1x1x1"), (4, "2x1x2")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--policy", "propagate", "--mesh", mesh,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        reports.append(load(out))
    assert numbers(reports[0]) == numbers(reports[1])
    sst = reports[0]["variables"]["sst"]["regions"]["global"]["per_step"]
    assert all(v is None for v in sst["weighted_rmse"])
    close(sst["weighted_grad_mag_percent_diff"], reference["sst"]["per_step"]["weighted_grad_mag_percent_diff"],
          "sst gradient score under propagate", **tolerance("grad_mag"))
    assert reports[0]["forecast"]["score_policies"]["weighted_grad_mag_percent_diff"] == "own magnitudes not NaN"


def test_ace_layout_matches_the_reference_and_every_mesh(ace_files, reference, mpirun, tmp_path, meshes):
    truth, pred = ace_files
    first = None
    for ranks, mesh, split in meshes(MESHES):
        out = tmp_path / f"{mesh}-{split}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--split", split,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        report = load(out)
        f = report["forecast"]
        assert (f["initial_conditions"], f["members"], f["lead_times"], f["members_from"]) == (3, 4, 5, "init_time")
        assert f["time_means_include_initial_step"] is False
        assert f["init_time"]["units"] == "microseconds since 1970-01-01" and f["init_time"]["calendar"] == "julian"
        assert f["lead_time"]["units"] == "microseconds" and f["lead_time"]["values"][1] == 6 * ff.HOUR_US
        if first is None:
            first = report
            check_against_reference(report, reference)
            # The per-variable scores are the global region's.
            for v in report["variables"].values():
                assert v["per_step"] == v["regions"]["global"]["per_step"]
                assert v["time_mean"] == v["regions"]["global"]["time_mean"]
        else:
            assert numbers(report) == numbers(first), f"{mesh} {split} differs from 1x1x1"
    assert first["variables"]["t2m"]["per_step"]["weighted_rmse"][0] == 0.0  # lead 0 is the initial condition


def test_data_split_over_lead_times_or_members_gives_the_same_bits(ace_files, mpirun, tmp_path, meshes):
    truth, pred = ace_files
    runs = ((1, "1x1x1", "auto"), (2, "2x1x1", "lead-times"), (5, "5x1x1", "auto"), (4, "2x2x1", "initial-conditions"),
            (3, "3x1x1", "members"), (6, "6x1x1", "auto"), (4, "2x1x2", "members"), (5, "5x1x1", "members"))
    reports = {}
    for ranks, mesh, data_split in meshes(runs):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--data-split", data_split,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        reports[(mesh, data_split)] = load(out)
    chosen = {("5x1x1", "auto"): "lead-times",  # 5 data ranks, 3 initial conditions
              ("2x2x1", "initial-conditions"): "initial-conditions",
              ("6x1x1", "auto"): "members"}  # 6 data ranks: 3 initial conditions, 5 lead times
    for run, data_split in chosen.items():
        if run in reports:
            assert reports[run]["forecast"]["data_split"] == data_split, run
    # (5 data ranks over 4 members: one holds none)
    first, *others = reports.values()
    assert others
    for report in others:
        assert numbers(report) == numbers(first)


@pytest.mark.parametrize("layout", ["member_dim", "truth_per_ic", "ensemble_size", "number_only", "deterministic"])
def test_other_layouts_give_the_ace_layout_numbers(layout, forecast, reference, ace_files, mpirun, tmp_path):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    extra = []
    f = forecast
    want = reference
    if layout == "member_dim":
        ff.write_member_dim(f, truth, pred)
    elif layout == "truth_per_ic":
        ff.write_ace(f, truth, pred, truth_per_ic=True)
    elif layout == "ensemble_size":  # no init_time: the members come from --ensemble-size
        ff.write_ace(f, truth, pred, with_init_time=False)
        extra = ["--ensemble-size", "4"]
    elif layout == "number_only":  # one initial condition, members on a `number` dim
        f = ff.Forecast(ics=1, members=5, leads=4, nlat=9, nlon=16, seed=3)
        ff.write_member_dim(f, truth, pred, member_dim="number", with_sample=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = ff.reference(f, ff.cos_lat_weights(f))
    else:  # ACE without an ensemble: every sample its own initial time
        f = ff.Forecast(ics=4, members=1, leads=3, nlat=11, nlon=18, seed=5)
        ff.write_ace(f, truth, pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = ff.reference(f, ff.cos_lat_weights(f))
    outs = []
    for ranks, mesh in ((1, "1x1x1"), (4, "2x2x1")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--json", out, "--quiet", *extra)
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    check_against_reference(outs[0], want)
    assert numbers(outs[1])["variables"] == numbers(outs[0])["variables"]
    if layout == "deterministic":
        assert "crps" not in outs[0]["variables"]["t2m"]["per_step"]
    if layout in ("member_dim", "truth_per_ic", "ensemble_size"):
        ace = tmp_path / "ace.json"
        r = mpirun(1, "eval", "--truth", ace_files[0], "--pred", ace_files[1], "--json", ace, "--quiet")
        assert r.returncode == 0, r.stderr
        assert load(ace)["variables"] == outs[0]["variables"]


def test_levels_are_channels(tmp_path, mpirun):
    f = ff.Forecast(ics=2, members=3, leads=3, nlat=9, nlon=14, levels=2, seed=11)
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_member_dim(f, truth, pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ff.reference(f, ff.cos_lat_weights(f))
    outs = []
    for ranks, mesh in ((1, "1x1x1"), (3, "1x1x3")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    assert {"t2m[0]", "t2m[1]", "sst"} == set(outs[0]["variables"])
    check_against_reference(outs[0], want)
    assert numbers(outs[1]) == numbers(outs[0])


@pytest.mark.parametrize("per_lead", [False, True])
def test_anomaly_correlation_with_a_climatology(per_lead, forecast, ace_files, mpirun, tmp_path):
    clim_path = ff.write_climatology(forecast, tmp_path / "clim.nc", per_lead)
    with netCDF4.Dataset(clim_path) as ds:
        clim = {name: np.asarray(ds[name][:], dtype=np.float64) for name in forecast.fields}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ff.reference(forecast, ff.cos_lat_weights(forecast), climatology=clim)
    truth, pred = ace_files
    outs = []
    for ranks, mesh in ((1, "1x1x1"), (5, "1x5x1"), (4, "2x1x2")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--climatology", clim_path, "--mesh", mesh,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    check_against_reference(outs[0], want)
    assert all(-1 <= a <= 1 for a in outs[0]["variables"]["t2m"]["per_step"]["acc"])
    for other in outs[1:]:
        assert numbers(other) == numbers(outs[0])


def test_anomaly_correlation_by_day_of_year_and_hour(forecast, ace_files, mpirun, tmp_path):
    clim_path = tmp_path / "doy.nc"
    select = ff.write_day_of_year_climatology(forecast, clim_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ff.reference(forecast, ff.cos_lat_weights(forecast), climatology={"t2m": select, "sst": select})
    del want["sst"]
    truth, pred = ace_files
    outs = []
    for ranks, mesh in ((1, "1x1x1"), (3, "3x1x1"), (4, "2x2x1")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--vars", "t2m", "--climatology", clim_path,
                   "--mesh", mesh, "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    check_against_reference(outs[0], want)
    for other in outs[1:]:
        assert numbers(other) == numbers(outs[0])
    # A climatology without the hours the valid times fall on is refused, naming the hour.
    ff.write_day_of_year_climatology(forecast, tmp_path / "noon.nc", hours=(0, 12))
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--vars", "t2m", "--climatology", tmp_path / "noon.nc",
               "--quiet")
    assert r.returncode == 2 and "has no hour 6 on its 'hour' dim" in r.stderr, r.stderr


def test_regions_side_by_side(forecast, ace_files, mpirun, tmp_path, meshes):
    mask = ff.write_mask(forecast, tmp_path / "mask.nc")
    truth, pred = ace_files
    regions = ["tropics", "northern_extratropics", "dateline:-30,45,150,-160",
               f"land:{tmp_path / 'mask.nc'}:land_fraction"]
    args = [a for r in regions for a in ("--region", r)]
    outs = []
    for ranks, mesh, split in meshes(((1, "1x1x1", "balanced"), (6, "2x1x3", "div_up"), (4, "1x2x2", "balanced"))):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, *args, "--mesh", mesh, "--split", split,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    weights = {
        "global": ff.cos_lat_weights(forecast),
        "tropics": ff.box_weights(forecast, -20, 20, 0, 360),
        "northern_extratropics": ff.box_weights(forecast, 20, 90, 0, 360),
        "dateline": ff.box_weights(forecast, -30, 45, 150, -160),
        "land": ff.cos_lat_weights(forecast) * mask,
    }
    assert list(outs[0]["variables"]["t2m"]["regions"]) == list(weights)
    for region, w in weights.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            check_against_reference(outs[0], ff.reference(forecast, w), region)
    for other in outs[1:]:
        assert numbers(other) == numbers(outs[0])
    a = outs[0]["variables"]["t2m"]["regions"]
    assert a["tropics"]["per_step"]["weighted_rmse"] != a["global"]["per_step"]["weighted_rmse"]


def test_diagnostics_files_hold_the_scores_and_maps(forecast, reference, ace_files, mpirun, tmp_path, meshes):
    truth, pred = ace_files
    folders = []
    for ranks, mesh, data_split in meshes(((1, "1x1x1", "auto"), (6, "2x3x1", "auto"), (4, "4x1x1", "members"))):
        folder = tmp_path / f"{mesh}-{data_split}"
        folder.mkdir()
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--diagnostics", folder,
                   "--data-split", data_split, "--json", folder / "report.json", "--quiet")
        assert r.returncode == 0, r.stderr
        folders.append(folder)
    for name in ("mean_diagnostics.nc", "zonal_mean_diagnostics.nc", "time_mean_diagnostics.nc"):
        for other in folders[1:]:
            assert (folders[0] / name).read_bytes() == (other / name).read_bytes(), f"{name} differs in {other.name}"
    report = load(folders[0] / "report.json")
    with netCDF4.Dataset(folders[0] / "mean_diagnostics.nc") as ds:
        assert ds.dimensions["forecast_step"].size == 5
        for score, series in report["variables"]["t2m"]["per_step"].items():
            np.testing.assert_array_equal(ds[f"{score}-t2m"][:].filled(np.nan),
                                          np.array([np.nan if v is None else v for v in series]))
    with netCDF4.Dataset(folders[0] / "zonal_mean_diagnostics.nc") as ds:
        for name, want in reference.items():
            close(ds[f"gen-{name}"][:].filled(np.nan), want["zonal_gen"], f"zonal gen {name}")
            close(ds[f"error-{name}"][:].filled(np.nan), want["zonal_error"], f"zonal error {name}", atol=1e-9)
    with netCDF4.Dataset(folders[0] / "time_mean_diagnostics.nc") as ds:
        for name, want in reference.items():
            close(ds[f"gen_map-{name}"][:].filled(np.nan).ravel(), want["gen_map"].ravel(), f"gen_map {name}")
            close(ds[f"bias_map-{name}"][:].filled(np.nan).ravel(), want["bias_map"].ravel(), f"bias_map {name}")
    # Readable by xarray, as ACE's own diagnostics are.
    import xarray as xr
    with xr.open_dataset(folders[0] / "zonal_mean_diagnostics.nc") as ds:
        assert ds["gen-t2m"].dims == ("forecast_step", "lat")


def test_including_the_initial_step(ace_files, forecast, mpirun, tmp_path):
    truth, pred = ace_files
    out = tmp_path / "with.json"
    r = mpirun(1, "eval", "--truth", truth, "--pred", pred, "--include-initial-step", "--json", out, "--quiet")
    assert r.returncode == 0, r.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ff.reference(forecast, ff.cos_lat_weights(forecast), first_counted=0)
    report = load(out)
    assert report["forecast"]["time_means_include_initial_step"] is True
    check_against_reference(report, want)


def test_builtin_forecast_is_the_same_at_every_mesh(mpirun, tmp_path, meshes):
    args = ["eval", "--nlat", "19", "--nlon", "36", "--ntime", "4", "--initial-conditions", "3",
            "--ensemble-size", "3", "--region", "tropics", "--quiet"]
    outs = []
    runs = ((1, "1x1x1", "auto"), (3, "3x1x1", "auto"), (4, "1x2x2", "auto"), (6, "3x2x1", "members"))
    for ranks, mesh, data_split in meshes(runs):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, *args, "--mesh", mesh, "--data-split", data_split, "--json", out)
        assert r.returncode == 0, r.stderr
        outs.append(load(out))
    for other in outs[1:]:
        assert numbers(other) == numbers(outs[0])
    h = outs[0]["variables"]["h"]["per_step"]
    assert h["weighted_rmse"][0] == 0 and h["spread"][0] == 0  # every member starts from the truth
    assert h["spread"][3] > h["spread"][1] > 0  # and spreads


@pytest.mark.parametrize("args, message", [
    (["--ensemble-size", "5"], "--ensemble-size: 5 does not divide the 12 samples"),
    (["--ensemble-dim", "level"], "--ensemble-dim: prediction"),
    (["--region", "nowhere"], "--region 'nowhere': not a named region"),
    (["--region", "a:10,-10,0,20"], "must satisfy -90 <= lat0 <= lat1 <= 90"),
    (["--region", "a:1,2,x,4"], "'x' is not a number of degrees"),
    (["--region", "tropics", "--region", "tropics"], "region 'tropics' is given twice"),
    (["--climatology", "MISSING"], "MISSING"),
    (["--diagnostics", "NOT_A_FOLDER"], "--diagnostics 'NOT_A_FOLDER' is not an existing folder"),
    (["--zonal", "z.nc"], "--zonal is for two-field files"),
    (["--near-zero-fraction", "--near-zero-fraction-eps", "-1"],
     "--near-zero-fraction: the threshold of 't2m' must be a number >= 0 (ACE's rule), got -1"),
    (["--near-zero-fraction", "--near-zero-fraction-per-variable-eps", "sst=nan"],
     "the threshold of 'sst' must be a number >= 0"),
    (["--near-zero-fraction", "--near-zero-fraction-variables", "t2m,precip"],
     "--near-zero-fraction: variables names 'precip', which is not a scored variable (t2m, sst)"),
    (["--near-zero-fraction", "--near-zero-fraction-per-variable-eps", "sst=1", "--near-zero-fraction-per-variable-eps",
      "sst=2"], "per_variable_eps names 'sst' twice"),
    (["--near-zero-fraction", "--near-zero-fraction-per-variable-eps", "sst"], "'sst' is not NAME=NUMBER"),
    (["--near-zero-fraction-eps", "1"], "--near-zero-fraction-eps requires --near-zero-fraction"),
    (["--trend", "--trend-variables", "precip"],
     "--trend: variables names 'precip', which is not a scored variable (t2m, sst)"),
    (["--trend-variables", "t2m"], "--trend-variables requires --trend"),
    (["--video", "--video-variables", "t2m,t2m"], "--video-variables 't2m,t2m' names 't2m' twice"),
    (["--video", "--video-variables", "u10"], "--video: variables names 'u10', which is not a scored variable"),
    (["--enable-extended-videos"], "--enable-extended-videos requires --video"),
    (["--annual"], "--annual: ACE's annual means need a run of more than 730 days, this one is"),
    (["--annual-variables", "t2m"], "--annual-variables requires --annual"),
    (["--annual-reference-data", "reference.nc"], "--annual-reference-data requires --annual"),
    (["--enso-index"], "--enso-index: ACE's ENSO index needs a run of more than 730 days, this one is"),
    (["--seasonal", "--seasonal-variables", "precip"],
     "--seasonal: variables names 'precip', which is not a scored variable (t2m, sst)"),
    (["--histogram", "--histogram-variables", "sst,precip"],
     "--histogram: variables names 'precip', which is not a scored variable (t2m, sst)"),
    (["--histogram-variables", "t2m"], "--histogram-variables requires --histogram"),
    (["--histogram", "--forward-steps-in-memory", "0"], "--forward-steps-in-memory: Value 0 not in range"),
    (["--forward-steps-in-memory", "2"], "--forward-steps-in-memory requires --histogram"),
])
def test_bad_forecast_arguments_fail_on_every_rank(args, message, ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    r = mpirun(3, "eval", "--truth", truth, "--pred", pred, "--mesh", "1x3x1", "--quiet", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stderr.count("gridshard: error:") == 1


def test_a_truth_that_does_not_match_the_members_is_refused(forecast, mpirun, tmp_path):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_ace(forecast, truth, pred)
    other = ff.Forecast(ics=2, members=4, leads=5, nlat=13, nlon=22)
    ff.write_ace(other, truth, tmp_path / "unused.nc")
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--quiet")
    assert r.returncode == 2, r.stderr
    assert "entries on dim 'sample', for 3 initial conditions of 4 members" in r.stderr


def test_forecast_options_need_a_forecast(mpirun, tmp_path):
    for option in ("--region", "tropics"), ("--near-zero-fraction",), ("--trend",), ("--video",), ("--annual",), \
            ("--seasonal",), ("--enso-index",), ("--ipo-index",), ("--histogram",), \
            ("--enso-coefficient-index", tmp_path / "index.nc"):
        r = mpirun(1, "eval", "--nlat", "10", "--nlon", "20", *option, "--quiet")
        assert r.returncode == 2 and "need a forecast" in r.stderr, r.stderr


def test_json_numbers_keep_every_bit(ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    out = tmp_path / "r.json"
    assert mpirun(1, "eval", "--truth", truth, "--pred", pred, "--json", out, "--quiet").returncode == 0
    text = out.read_text()
    for value in load(out)["variables"]["t2m"]["per_step"]["crps"]:
        assert value is None or math.isfinite(value)
        assert repr(value) in text or json.dumps(value) in text


# ------------------------------------------------------------------------------------------ --normalize

NORMALIZATION = {"t2m": (281.25, 17.5), "sst": (294.0, 4.75)}


def write_stats(folder, stats=NORMALIZATION, dims=None):
    """ACE's stats files: one scalar variable per name in each (centering and scaling), float64 as ACE writes."""
    for path, k in ((folder / "means.nc", 0), (folder / "stds.nc", 1)):
        with netCDF4.Dataset(path, "w") as ds:
            for name, values in stats.items():
                ds.createVariable(name, "f8", ())[...] = values[k]
    return folder / "means.nc", folder / "stds.nc"


def test_normalize_gives_the_scores_of_the_normalised_fields_under_aces_keys(forecast, ace_files, mpirun,
                                                                             tmp_path, meshes):
    """--normalize scores the fields as ACE normalises them, (x - mean) / std in float32: the same bits as the
    plain scores of files normalised so by numpy, under ACE's keys, at every mesh; the channel mean is the plain
    mean of the time-mean RMSEs (ACE's time_mean_norm/rmse/channel_mean)."""
    truth, pred = ace_files
    means, stds = write_stats(tmp_path)
    normalised = ff.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22)
    for name, (t, p) in forecast.fields.items():
        mean, std = (np.float32(v) for v in NORMALIZATION[name])
        normalised.fields[name] = ((t - mean) / std, (p - mean) / std)
        assert normalised.fields[name][0].dtype == np.float32
    norm_truth, norm_pred = tmp_path / "norm_target.nc", tmp_path / "norm_predictions.nc"
    ff.write_ace(normalised, norm_truth, norm_pred)
    plain = tmp_path / "plain.json"
    assert mpirun(1, "eval", "--truth", norm_truth, "--pred", norm_pred, "--json", plain, "--quiet").returncode == 0
    want = load(plain)["variables"]
    first = None
    for ranks, mesh, split in meshes(MESHES):
        out = tmp_path / f"norm-{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--split", split, "--json", out,
                   "--normalize", means, stds, "--quiet")
        assert r.returncode == 0, r.stderr
        report = load(out)
        got = report["normalized"]
        assert got["means"] == str(means) and got["stds"] == str(stds)
        keys = got["ace_keys"]
        for name in ("t2m", "sst"):
            for key in ("weighted_rmse", "weighted_bias", "weighted_mean_gen", "weighted_mean_target",
                        "weighted_std_gen"):
                assert keys[f"mean_norm/{key}/{name}"] == want[name]["per_step"][key], (mesh, key, name)
            assert keys[f"time_mean_norm/rmse/{name}"] == want[name]["time_mean"]["rmse"], (mesh, name)
        assert keys["time_mean_norm/rmse/channel_mean"] == (keys["time_mean_norm/rmse/t2m"] +
                                                            keys["time_mean_norm/rmse/sst"]) / 2
        assert not any("grad_mag" in k for k in keys)  # ACE logs no gradient score on the normalised fields
        if first is None:
            first = got
            r = mpirun(1, "eval", "--truth", truth, "--pred", pred, "--json", tmp_path / "plain-ref.json", "--quiet")
            assert r.returncode == 0, r.stderr
        assert numbers(report) == numbers(load(tmp_path / "plain-ref.json")), mesh  # the rest as without it
        assert got == first, mesh


@pytest.mark.parametrize("stats, message", [
    ({"t2m": (281.25, 17.5)}, "variable 'sst' is missing"),
    ({"t2m": (281.25, 17.5), "sst": (294.0, 0.0)}, "expected a finite, positive std"),
    ({"t2m": (float("nan"), 17.5), "sst": (294.0, 4.75)}, "expected a finite mean"),
])
def test_bad_normalization_files_fail_on_every_rank(stats, message, ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    means, stds = write_stats(tmp_path, stats)
    out = tmp_path / "r.json"
    r = mpirun(3, "eval", "--truth", truth, "--pred", pred, "--mesh", "1x1x3", "--normalize", means, stds,
               "--json", out, "--quiet")
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("gridshard: error:") == 1, r.stderr
    assert "--normalize" in r.stderr and not out.exists()
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--normalize", means, stds, "--json", means, "--quiet")
    assert r.returncode == 2 and "is the same file as --normalize" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------------ faults

@pytest.mark.parametrize("io", ["independent", "collective"])
def test_a_truncated_prediction_fails_on_every_rank_and_writes_nothing(io, forecast, mpirun, tmp_path):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_ace(forecast, truth, pred)
    with open(pred, "r+b") as f:
        f.truncate(pred.stat().st_size // 2)
    out = tmp_path / "out"
    out.mkdir()
    r = mpirun(3, "eval", "--truth", truth, "--pred", pred, "--mesh", "3x1x1", "--io", io, "--diagnostics", out,
               "--json", out / "report.json", "--quiet")
    assert r.returncode == 2, r.stderr
    assert "is truncated" in r.stderr and r.stderr.count("gridshard: error:") == 1, r.stderr
    assert list(out.iterdir()) == []


def test_outputs_never_touch_inputs(ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    before = truth.read_bytes()
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--json", truth, "--quiet")
    assert r.returncode == 2 and "is the same file as --truth" in r.stderr, r.stderr
    folder = tmp_path / "diagnostics"
    folder.mkdir()
    (folder / "zonal_mean_diagnostics.nc").hardlink_to(truth)  # another name of the truth
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--diagnostics", folder, "--quiet")
    assert r.returncode == 2 and "is the same file as --truth" in r.stderr, r.stderr
    clim = tmp_path / "clim.nc"
    clim.write_bytes(before)
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--climatology", clim, "--json", clim, "--quiet")
    assert r.returncode == 2 and "is the same file as --climatology" in r.stderr, r.stderr
    assert truth.read_bytes() == before and clim.read_bytes() == before


def test_a_failed_run_leaves_earlier_outputs_as_they_were(forecast, ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    folder = tmp_path / "diagnostics"
    folder.mkdir()
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--diagnostics", folder, "--json",
               folder / "report.json", "--quiet")
    assert r.returncode == 0, r.stderr
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    # A climatology without the forecast's variables: refused before anything is written.
    empty = tmp_path / "empty_clim.nc"
    with netCDF4.Dataset(empty, "w") as ds:
        ds.createDimension("lat", len(forecast.lat))
        ds.createDimension("lon", len(forecast.lon))
        ds.createVariable("lat", "f4", ("lat",))[:] = forecast.lat
        ds.createVariable("lon", "f4", ("lon",))[:] = forecast.lon
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--climatology", empty, "--diagnostics", folder,
               "--json", folder / "report.json", "--quiet")
    assert r.returncode == 2 and "no variable 't2m'" in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# ---------------------------------------------------------------------------- time means by lead time

def lead_one_forecast():
    """ACE's own files: the first row is lead 1 x dt (the initial condition is in initial_condition.nc)."""
    return ff.Forecast(ics=3, members=2, leads=4, nlat=11, nlon=18, seed=13, first_lead=1)


@pytest.mark.parametrize("layout", ["ace", "member_dim"])
def test_time_means_count_every_forward_step_of_files_that_start_at_lead_one(layout, mpirun, tmp_path):
    f = lead_one_forecast()
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    (ff.write_ace if layout == "ace" else ff.write_member_dim)(f, truth, pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = ff.reference(f, ff.cos_lat_weights(f), first_counted=0)  # every row is a forward step
    outs = []
    for ranks, mesh in ((1, "1x1x1"), (2, "2x1x1"), (3, "1x3x1"), (4, "2x1x2")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--json", out)
        assert r.returncode == 0, r.stderr
        report = load(out)
        if not outs:
            check_against_reference(report, want)
            # ACE's own TimeMeanAggregator on the same data: every forward step, so the same numbers.
            ace = ff.ace_time_mean(f, "t2m", ff.cos_lat_weights(f))
            got = report["variables"]["t2m"]["time_mean"]
            np.testing.assert_allclose([got["rmse"], got["bias"]], [ace["rmse"], ace["bias"]], rtol=1e-9, atol=1e-12)
        assert report["forecast"]["time_means_rows"] == [0, 1, 2, 3]
        assert report["forecast"]["time_means_include_initial_step"] is False
        assert "time means over rows 0 to 3 of 4 (every lead time > 0)" in r.stdout, r.stdout
        outs.append(report)
    for other in outs[1:]:
        assert numbers(other)["variables"] == numbers(outs[0])["variables"]
    # --include-initial-step changes nothing: no row is lead 0.
    out = tmp_path / "with.json"
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--include-initial-step", "--json", out, "--quiet")
    assert r.returncode == 0, r.stderr
    assert load(out)["variables"] == outs[0]["variables"]


def test_time_means_leave_out_a_stored_lead_zero_row(ace_files, forecast, mpirun, tmp_path):
    truth, pred = ace_files
    for ranks, mesh, extra, rows in ((1, "1x1x1", [], [1, 2, 3, 4]), (3, "3x1x1", [], [1, 2, 3, 4]),
                                     (4, "1x2x2", ["--include-initial-step"], [0, 1, 2, 3, 4])):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--json", out, *extra)
        assert r.returncode == 0, r.stderr
        report = load(out)
        assert report["forecast"]["time_means_rows"] == rows
        header = "rows 1 to 4 of 5 (lead 0, the initial condition, left out)" if not extra else \
            "rows 0 to 4 of 5 (lead 0 included: --include-initial-step)"
        assert header in r.stdout, r.stdout
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = ff.reference(forecast, ff.cos_lat_weights(forecast), first_counted=rows[0])
        check_against_reference(report, want)


# ------------------------------------------------------------------- inputs agreed, calendars, valid_time

def test_a_stale_climatology_on_one_rank_is_refused(forecast, ace_files, mpirun_mpmd, tmp_path):
    truth, pred = ace_files
    fresh = ff.write_climatology(forecast, tmp_path / "fresh.nc", per_lead=True)
    stale = ff.write_climatology(forecast, tmp_path / "stale.nc", per_lead=False)  # an older time mean
    # Each rank opens the file itself (--io independent; collective opens compare the files' bytes already).
    for first, second, mesh in ((1, 1, "1x1x2"), (2, 1, "1x3x1"), (1, 3, "2x1x2")):
        args = ["eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--io", "independent", "--quiet"]
        r = mpirun_mpmd([(first, args + ["--climatology", fresh]), (second, args + ["--climatology", stale])])
        assert r.returncode == 2, (mesh, r.returncode, r.stderr)
        assert "--climatology" in r.stderr and "must be the same on every rank" in r.stderr, r.stderr
        assert r.stderr.count("gridshard: error:") == 1, r.stderr


def test_a_stale_mask_or_forecast_on_one_rank_is_refused(forecast, ace_files, mpirun_mpmd, tmp_path):
    truth, pred = ace_files
    mask = tmp_path / "mask.nc"
    ff.write_mask(forecast, mask)
    stale_mask = tmp_path / "stale_mask.nc"  # the same mask, stored in float32 by an older script
    with netCDF4.Dataset(mask) as src, netCDF4.Dataset(stale_mask, "w", format="NETCDF4") as ds:
        ff._coordinates(ds, forecast)
        ds.createVariable("land_fraction", "f4", ("lat", "lon"))[:] = src["land_fraction"][:]
    args = ["eval", "--truth", truth, "--pred", pred, "--mesh", "1x2x1", "--io", "independent", "--quiet"]
    r = mpirun_mpmd([(1, args + ["--region", f"land:{mask}:land_fraction"]),
                     (1, args + ["--region", f"land:{stale_mask}:land_fraction"])])
    assert r.returncode == 2 and "must be the same on every rank" in r.stderr and "--region" in r.stderr, r.stderr
    # A forecast written a day later on one node: the same sizes, other initial times.
    later = ff.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22, init_epoch_us=ff.EPOCH_2020_US + 24 * ff.HOUR_US)
    t2, p2 = tmp_path / "t2.nc", tmp_path / "p2.nc"
    ff.write_ace(later, t2, p2)
    for first, second, mesh in ((1, 1, "2x1x1"), (2, 1, "1x1x3"), (3, 1, "2x2x1")):
        r = mpirun_mpmd([(first, ["eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--io", "independent",
                                  "--quiet"]),
                         (second, ["eval", "--truth", t2, "--pred", p2, "--mesh", mesh, "--io", "independent",
                                   "--quiet"])])
        assert r.returncode == 2 and "must be the same on every rank" in r.stderr, (mesh, r.stderr)
        assert r.stderr.count("gridshard: error:") == 1, r.stderr


def feb_2021_files(tmp_path):
    f = ff.Forecast(ics=2, members=2, leads=3, nlat=9, nlon=12, seed=21, first_lead=1,
                    init_epoch_us=1_613_174_400 * 1_000_000)  # 2021-02-13 in the standard calendar
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_ace(f, truth, pred)
    return f, truth, pred


@pytest.mark.parametrize("ranks, mesh", [(1, "1x1x1"), (2, "2x1x1"), (3, "1x3x1"), (4, "2x1x2")])
def test_init_times_in_other_calendars_are_refused(ranks, mesh, mpirun, tmp_path):
    _, truth, pred = feb_2021_files(tmp_path)
    with netCDF4.Dataset(truth, "a") as ds:
        ds["init_time"].calendar = ds["valid_time"].calendar = "standard"
    with netCDF4.Dataset(pred, "a") as ds:  # the same numbers, counted without leap days
        ds["init_time"].calendar = ds["valid_time"].calendar = "noleap"
    r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--quiet")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.startswith("gridshard:")]
    assert len(lines) == 1 and r.stderr.count("gridshard: error:") == 1, r.stderr  # once, on one line
    line = lines[0]
    assert "sample 0" in line and "2021-02-26 00:00:00 (noleap)" in line and "2021-02-13 00:00:00 (standard)" in line
    assert str(pred) in line and str(truth) in line, line
    # The same dates in both calendars are the same initial times.
    with netCDF4.Dataset(truth, "a") as ds:
        ds["init_time"].calendar = ds["valid_time"].calendar = "proleptic_gregorian"
    with netCDF4.Dataset(pred, "a") as ds:
        ds["init_time"].calendar = ds["valid_time"].calendar = "standard"
    assert mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--quiet").returncode == 0


@pytest.mark.parametrize("ranks, mesh", [(1, "1x1x1"), (2, "1x1x2"), (3, "3x1x1"), (4, "2x2x1")])
def test_a_valid_time_off_init_time_plus_lead_is_refused(ranks, mesh, mpirun, tmp_path):
    _, truth, pred = feb_2021_files(tmp_path)
    with netCDF4.Dataset(truth, "a") as ds:
        ds["valid_time"][3, 1] = ds["valid_time"][3, 1] + 24 * ff.HOUR_US  # one day off
    r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--quiet")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.startswith("gridshard:")]
    assert len(lines) == 1 and r.stderr.count("gridshard: error:") == 1, r.stderr  # once, on one line
    line = lines[0]
    assert f"'{truth}'" in line and "sample 3" in line and "valid_time" in line, line
    # init 2021-02-14 (sample 3 is initial condition 1), lead 2 x 6 h: 12:00 that day, stored a day later.
    assert "2021-02-15 12:00:00" in line and "2021-02-14 12:00:00" in line, line


# --------------------------------------------------------------------------- messages that name the cause

def empty_dim_files(tmp_path, dim):
    """ACE's layout with a sample dim of length 0, or a member dim of length 0; 4 lead times each."""
    f = ff.Forecast(ics=1, members=2, leads=4, nlat=7, nlon=10, seed=2)
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"

    def write(path, leading, values=None):
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            for name in leading:
                ds.createDimension(name, 0)
            ds.createDimension("time", 4)
            ds.createVariable("time", "i8", ("time",))[:] = f.lead_us
            ds["time"].units = "microseconds"
            ff._coordinates(ds, f)
            variable = ds.createVariable("t2m", "f4", (*leading, "time", "lat", "lon"))
            if values is not None:
                variable[:] = values

    if dim == "sample":
        write(truth, ("sample",))
        write(pred, ("sample",))
    else:
        write(pred, ("member",))
        write(truth, (), f.fields["t2m"][0][0])
    return truth, pred


@pytest.mark.parametrize("dim", ["sample", "member"])
@pytest.mark.parametrize("ranks", [1, 3])
def test_a_zero_length_ensemble_dim_is_named(dim, ranks, mpirun, tmp_path):
    truth, pred = empty_dim_files(tmp_path, dim)
    r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--quiet")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("gridshard: error:") == 1, r.stderr
    assert f"dim '{dim}' of length 0" in r.stderr and str(pred) in r.stderr, r.stderr


@pytest.mark.parametrize("ranks, mesh", [(1, "1x1x1"), (2, "1x2x1"), (4, "2x1x2")])
def test_an_empty_region_is_named(ranks, mesh, forecast, ace_files, mpirun, tmp_path):
    truth, pred = ace_files
    base = ["eval", "--truth", truth, "--pred", pred, "--mesh", mesh, "--quiet"]
    # 13 latitudes 13.8 degrees apart: none between 1 and 2 degrees north.
    r = mpirun(ranks, *base, "--region", "tropics", "--region", "sliver:1,2,10,20")
    assert r.returncode == 2, r.stderr
    assert "region 'sliver' (box 1,2,10,20): no grid point inside" in r.stderr, r.stderr
    assert r.stderr.count("gridshard: error:") == 1 and "total weight" not in r.stderr, r.stderr
    zero = tmp_path / "zero.nc"
    with netCDF4.Dataset(zero, "w", format="NETCDF4") as ds:
        ff._coordinates(ds, forecast)
        ds.createVariable("m", "f8", ("lat", "lon"))[:] = np.zeros((len(forecast.lat), len(forecast.lon)))
    r = mpirun(ranks, *base, "--region", f"dry:{zero}:m")
    assert r.returncode == 2, r.stderr
    assert f"region 'dry' (mask '{zero}' variable 'm'): every weight zero" in r.stderr, r.stderr
    assert r.stderr.count("gridshard: error:") == 1 and "total weight" not in r.stderr, r.stderr
