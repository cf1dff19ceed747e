"""`gridshard eval` as a user runs it: bit-identical JSON across layouts, agreement with CDO on CF
netCDF files, the zonal-mean file, and every error exiting with status 2 and one line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import make_files  # noqa: E402

SCORES = ["mean_truth", "mean_pred", "bias", "rmse", "std_truth", "std_pred", "grad_mag_percent_diff"]
BUILTIN = ["--nlat", 61, "--nlon", 120, "--ntime", 3, "--quiet"]


def report(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------- the built-in case, many layouts

@pytest.fixture(scope="module")
def serial_builtin(tmp_path_factory, gridshard_bin):
    out = tmp_path_factory.mktemp("serial") / "serial.json"
    result = subprocess.run([gridshard_bin, "eval", *map(str, BUILTIN), "--json", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return report(out)


def test_builtin_report_has_the_contract_shape(serial_builtin):
    r = serial_builtin
    assert list(r) == ["gridshard", "mesh", "split", "weights", "summation", "policy", "grid", "ntime", "variables"]
    assert r["policy"] == "skip_invalid_pairs"
    assert r["mesh"] == {"data": 1, "lat": 1, "lon": 1}
    assert r["grid"] == {"nlat": 61, "nlon": 120}
    assert r["ntime"] == 3
    assert sorted(r["variables"]) == ["h", "sst", "t850"]
    for name, v in r["variables"].items():
        assert list(v) == ["per_time", "time_mean", "rmse_of_time_mean", "time_and_global_mean_bias"]
        assert list(v["per_time"]) == SCORES and list(v["time_mean"]) == SCORES
        for key in SCORES:
            assert len(v["per_time"][key]) == 3
            assert all(isinstance(x, float) for x in v["per_time"][key]), (name, key)
            assert v["time_mean"][key] == pytest.approx(np.mean(v["per_time"][key]), rel=1e-15)
        assert v["per_time"]["rmse"][0] > 0
        assert v["rmse_of_time_mean"] > 0


def test_builtin_numbers_round_trip_with_17_digits(tmp_path, run):
    out = tmp_path / "r.json"
    assert run("eval", *BUILTIN, "--json", out).returncode == 0
    text = out.read_text()
    value = report(out)["variables"]["h"]["per_time"]["mean_truth"][0]
    assert repr(value) in text or f"{value:.17g}" in text


@pytest.mark.parametrize("ranks,mesh,split", [
    (2, "1x1x2", "balanced"), (2, "2x1x1", "div_up"), (3, "1x3x1", "div_up"), (3, "3x1x1", "balanced"),
    (4, "1x2x2", "balanced"), (4, "2x2x1", "div_up"), (6, "1x2x3", "div_up"), (6, "3x1x2", "balanced"),
    (8, "2x2x2", "balanced"), (4, None, "balanced"),
])
def test_builtin_json_is_bit_identical_across_layouts(tmp_path, mpirun, serial_builtin, ranks, mesh, split):
    out = tmp_path / "r.json"
    args = ["eval", *BUILTIN, "--split", split, "--json", out] + (["--mesh", mesh] if mesh else [])
    result = mpirun(ranks, *args)
    assert result.returncode == 0, result.stderr
    r = report(out)
    assert r["variables"] == serial_builtin["variables"]
    if mesh is None:
        assert r["mesh"] == {"data": 1, "lat": 2, "lon": 2}  # the default mesh for 4 ranks


@pytest.mark.parametrize("ranks,mesh,extra", [
    (4, "4x1x1", []), (3, "3x1x1", []), (3, "3x1x1", ["--io", "collective"]),
    (5, "5x1x1", ["--initial-conditions", 2, "--ensemble-size", 2]),
    (5, "5x1x1", ["--initial-conditions", 2, "--ensemble-size", 2, "--data-split", "lead-times", "--io", "collective"]),
])
def test_more_data_ranks_than_work_take_part_idle(tmp_path, run, mpirun, ranks, mesh, extra):
    """More data ranks than steps (or initial conditions, lead times, members) to split: the surplus ranks hold no
    pair and take part in every collective; the report is the serial one."""
    args = ["eval", "--nlat", 19, "--nlon", 36, "--ntime", 2, "--quiet", *extra]
    serial, out = tmp_path / "serial.json", tmp_path / "out.json"
    assert run(*args, "--json", serial).returncode == 0
    result = mpirun(ranks, *args, "--mesh", mesh, "--json", out)
    assert result.returncode == 0, result.stderr
    assert report(out)["variables"] == report(serial)["variables"]


def test_fast_summation_is_close_to_reproducible(tmp_path, run, serial_builtin):
    out = tmp_path / "fast.json"
    assert run("eval", *BUILTIN, "--summation", "fast", "--json", out).returncode == 0
    fast = report(out)["variables"]["t850"]["time_mean"]
    exact = serial_builtin["variables"]["t850"]["time_mean"]
    for key in SCORES:
        assert fast[key] == pytest.approx(exact[key], rel=1e-9)


def test_table_on_stdout(run):
    result = run("eval", *BUILTIN)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("gridshard eval: grid 61 x 120, 3 steps")
    assert any(line.startswith("sst ") for line in lines)
    assert result.stderr == ""  # --quiet, and stderr is not a terminal anyway


# ---------------------------------------------------------------- CF netCDF files against CDO

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nc")
    truth, pred = folder / "truth.nc", folder / "pred.nc"
    make_files.write(truth, 45, 90, 3, seed=1)
    make_files.write(pred, 45, 90, 3, seed=2, shift=0.2)
    return folder, truth, pred


def cdo(*args):
    result = subprocess.run(["cdo", "-s", "-b", "F64", *map(str, args)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return args[-1]


def values(path, name):
    with netCDF4.Dataset(path) as ds:
        v = ds[name][:]
        return np.ma.filled(v.astype(np.float64), np.nan)


@pytest.fixture(scope="module")
def netcdf_run(files, gridshard_bin):
    folder, truth, pred = files
    out, zonal = folder / "eval.json", folder / "zonal.nc"
    result = subprocess.run([gridshard_bin, "eval", "--truth", truth, "--pred", pred, "--weights", "cell_area",
                             "--json", out, "--zonal", zonal, "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return report(out), zonal


@pytest.mark.parametrize("name", ["t2m", "sst", "z", "ta"])
def test_agrees_with_cdo(files, netcdf_run, name):
    folder, truth, pred = files
    r, zonal = netcdf_run
    checks = {
        "mean_truth": cdo("fldmean", truth, folder / f"{name}_fm_t.nc"),
        "mean_pred": cdo("fldmean", pred, folder / f"{name}_fm_p.nc"),
        "std_truth": cdo("fldstd", truth, folder / f"{name}_fs_t.nc"),
        "std_pred": cdo("fldstd", pred, folder / f"{name}_fs_p.nc"),
        "rmse": cdo("-sqrt", "-fldmean", "-sqr", "-sub", pred, truth, folder / f"{name}_rmse.nc"),
    }
    levels = 2 if name == "ta" else 1
    for level in range(levels):
        key = name if levels == 1 else f"{name}[{level}]"
        ours = r["variables"][key]["per_time"]
        for score, path in checks.items():
            theirs = values(path, name).reshape(3, levels)[:, level]
            np.testing.assert_allclose(ours[score], theirs, rtol=1e-6, err_msg=f"{key} {score}")
    zonal_theirs = values(cdo("zonmean", truth, folder / f"{name}_zm.nc"), name).reshape(3, levels, 45)
    for level in range(levels):
        key = name if levels == 1 else f"{name}[{level}]"
        np.testing.assert_allclose(values(zonal, f"{key}_truth"), zonal_theirs[:, level, :], rtol=1e-6,
                                   equal_nan=True, err_msg=key)


def test_masked_variable_really_is_masked(files):
    _, truth, _ = files
    sst = values(truth, "sst")
    assert 0.2 < np.isnan(sst).mean() < 0.45


def test_zonal_file_reads_in_cdo_and_netcdf4(netcdf_run):
    _, zonal = netcdf_run
    with netCDF4.Dataset(zonal) as ds:
        assert ds["t2m_truth"].dimensions == ("time", "lat")
        assert ds["lat"].units == "degrees_north"
        assert ds["t2m_pred"].shape == (3, 45)
    result = subprocess.run(["cdo", "-s", "info", str(zonal)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_distributed_netcdf_matches_serial(files, netcdf_run, mpirun, tmp_path):
    _, truth, pred = files
    serial, _ = netcdf_run
    out = tmp_path / "d.json"
    result = mpirun(6, "eval", "--truth", truth, "--pred", pred, "--weights", "cell_area", "--mesh", "2x3x1",
                    "--json", out, "--quiet")
    assert result.returncode == 0, result.stderr
    assert report(out)["variables"] == serial["variables"]


@pytest.mark.parametrize("variant", [
    {"north_to_south": True}, {"centred_lon": True}, {"bounds": False}, {"time": False}, {"lat_name": "latitude"},
])
def test_awkward_but_valid_files(tmp_path, run, variant):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    make_files.write(truth, 30, 60, 2, seed=1, **variant)
    make_files.write(pred, 30, 60, 2, seed=2, shift=0.1, **variant)
    out = tmp_path / "r.json"
    result = run("eval", "--truth", truth, "--pred", pred, "--vars", "t2m,sst", "--json", out, "--quiet")
    assert result.returncode == 0, result.stderr
    r = report(out)
    assert r["ntime"] == (1 if variant.get("time") is False else 2)
    assert r["variables"]["t2m"]["per_time"]["rmse"][0] > 0


# ---------------------------------------------------------------- errors: status 2, one line, no file

def expect_usage_error(result, needle, *outputs):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("gridshard: error:") and needle in message, message
    for path in outputs:
        assert not os.path.exists(path), path
        folder = Path(path).parent
        if folder.exists():
            assert not any(p.name.startswith("." + Path(path).name) for p in folder.iterdir())


def test_errors(tmp_path, run, files):
    _, truth, pred = files
    out, zonal = tmp_path / "out.json", tmp_path / "z.nc"
    args = ["--json", out, "--zonal", zonal, "--quiet"]
    not_netcdf = tmp_path / "text.nc"
    not_netcdf.write_text("this is not netCDF\n")
    other_grid_p = tmp_path / "og_p.nc"
    make_files.write(other_grid_p, 30, 60, 3, seed=2)
    no_coords = tmp_path / "nc_t.nc"
    make_files.write(no_coords, 45, 90, 3, seed=3, coordinate_attributes=False, lat_name="y")
    other_shape = tmp_path / "os_p.nc"
    make_files.write(other_shape, 45, 90, 2, seed=2)
    cases = [
        (["--truth", tmp_path / "missing.nc", "--pred", pred], "missing.nc"),
        (["--truth", not_netcdf, "--pred", pred], "text.nc"),
        (["--truth", truth, "--pred", pred, "--vars", "t2m,nosuchvar"], "nosuchvar"),
        (["--truth", truth, "--pred", other_grid_p], "grid"),
        (["--truth", truth, "--pred", other_shape], "time steps"),
        (["--truth", no_coords, "--pred", pred], "nc_t.nc"),
        (["--truth", truth], "--pred"),
        (["--truth", truth, "--pred", pred, "--mesh", "1x2x1"], "1x2x1"),
        (["--truth", truth, "--pred", pred, "--mesh", "1x2"], "1x2"),
        (["--split", "sideways", *BUILTIN], "sideways"),
        (["--weights", "equal", *BUILTIN], "equal"),
        (["--summation", "sloppy", *BUILTIN], "sloppy"),
        (["--bogus", *BUILTIN], "bogus"),
        (["--nlat", 1, "--nlon", 10], "nlat"),
        (["--nlat", "many"], "many"),
    ]
    for extra, needle in cases:
        expect_usage_error(run("eval", *extra, *args), needle, out, zonal)
    same = tmp_path / "same.nc"
    expect_usage_error(run("eval", *BUILTIN, "--json", same, "--zonal", tmp_path / "." / "same.nc"), "same file",
                       same)


def test_mesh_finer_than_grid_and_mismatched_rank_count(tmp_path, mpirun):
    out = tmp_path / "out.json"
    for ranks, extra, needle in [(4, ["--mesh", "1x4x1", "--nlat", 3, "--nlon", 8], "finer"),
                                 (3, ["--mesh", "1x2x2"], "has 3"),
                                 (4, ["--mesh", "1x1x4", "--split", "div_up", "--nlat", 8, "--nlon", 3], "empty")]:
        result = mpirun(ranks, "eval", *extra, "--ntime", 2, "--json", out, "--quiet")
        assert result.returncode != 0
        assert needle in result.stderr, result.stderr
        assert result.stderr.count("gridshard: error:") == 1, result.stderr
        assert not out.exists()


def test_unwritable_output_leaves_nothing(tmp_path, run):
    out = tmp_path / "no" / "such" / "folder" / "out.json"
    expect_usage_error(run("eval", *BUILTIN, "--json", out), "out.json", out)


def test_progress_on_a_terminal_only(gridshard_bin):
    """`script` gives the tool a pseudo-terminal: progress appears there, and never with --quiet."""
    command = f"{gridshard_bin} eval --nlat 31 --nlon 60 --ntime 3 > /dev/null"
    shown = subprocess.run(["script", "-qc", command, "/dev/null"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout
    assert "9/9 steps" in shown.stdout  # 3 variables x 3 steps, on the terminal (stderr)
    quiet = subprocess.run(["script", "-qc", command.replace("eval", "eval --quiet"), "/dev/null"],
                           capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and "steps" not in quiet.stdout


def test_json_is_bit_identical_for_any_thread_count(tmp_path, gridshard_bin, serial_builtin):
    """Each rank shares its work between threads; OMP_NUM_THREADS changes nothing in the numbers."""
    for threads in ["1", "2", "3"]:
        out = tmp_path / f"threads{threads}.json"
        result = subprocess.run([gridshard_bin, "eval", *map(str, BUILTIN), "--json", str(out)],
                                capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, OMP_NUM_THREADS=threads))
        assert result.returncode == 0, result.stderr
        assert report(out)["variables"] == serial_builtin["variables"], threads


def write_non_finite_pair(truth_path, prediction_path):
    """A small pair of variable `v` with NaN, +inf and -inf and zero-weight pole rows: the truth is
    non-finite wherever the prediction is (so the valid pairs are the truth's finite points), and the
    prediction has a -inf where the truth is +inf."""
    nlat, nlon, ntime = 13, 16, 3
    rng = np.random.default_rng(8)
    truth = (280 + 10 * rng.standard_normal((ntime, nlat, nlon))).astype(np.float32)
    prediction = (truth + rng.standard_normal((ntime, nlat, nlon))).astype(np.float32)
    truth[:, 3, 2:6] = np.inf
    prediction[:, 3, 4] = -np.inf
    truth[:, 5, 7] = -np.inf
    truth[:, 8, :3] = np.nan
    prediction[:, 8, 1] = np.nan
    truth[1, 0, :] = np.inf  # a pole row: zero weight
    lat = np.linspace(-90.0, 90.0, nlat)
    make_files.write_grid_file(truth_path, truth, lat=lat)
    make_files.write_grid_file(prediction_path, prediction, lat=lat)


@pytest.mark.parametrize("ranks,mesh", [(1, "1x1x1"), (4, "1x2x2"), (3, "1x3x1")])
@pytest.mark.parametrize("policy", ["skip_invalid_pairs", "skip_nan", "propagate"])
def test_cli_and_library_give_the_same_bits(tmp_path, mpirun, ranks, mesh, policy):
    """The tool's bias, rmse and mean_truth under `--policy` are the library's masked metrics under that
    policy, bit for bit, on a file pair with NaN, +inf and -inf, on several meshes (one code path, two
    doors). Under skip_invalid_pairs every score is finite; under the others the infinities reach them,
    and the JSON holds null where the library gives inf or NaN."""
    truth, prediction = tmp_path / "truth.nc", tmp_path / "pred.nc"
    write_non_finite_pair(truth, prediction)
    report = tmp_path / "eval.json"
    result = mpirun(ranks, "eval", "--truth", truth, "--pred", prediction, "--mesh", mesh, "--policy", policy,
                    "--quiet", "--json", report)
    assert result.returncode == 0, result.stderr
    library = subprocess.run([os.environ["LIBRARY_SCORES_BIN"], truth, prediction, "v", policy],
                             capture_output=True, text=True, timeout=120)
    assert library.returncode == 0, library.stderr
    expected = {k: [float.fromhex(v) for v in values] for k, values in json.loads(library.stdout).items()}
    document = json.loads(report.read_text())
    assert document["policy"] == policy
    per_time = document["variables"]["v"]["per_time"]
    for score in ("bias", "rmse", "mean_truth"):
        if policy == "skip_invalid_pairs":
            assert all(np.isfinite(expected[score])), score
        want = [v.hex() if np.isfinite(v) else None for v in expected[score]]
        got = [None if v is None else v.hex() for v in per_time[score]]
        assert got == want, score
    if policy != "skip_invalid_pairs":
        assert not all(np.isfinite(expected["rmse"])), "the infinities must reach rmse under " + policy


def test_timings_per_rank_and_phase(mpirun, tmp_path):
    out = tmp_path / "t.json"
    r = mpirun(3, "eval", "--nlat", "37", "--nlon", "72", "--ntime", "4", "--mesh", "1x1x3", "--timings", "--quiet",
               "--json", out)
    assert r.returncode == 0, r.stderr
    timings = json.loads(out.read_text())["timings"]
    assert timings["steps_per_rank"] == 4 * 3  # every step of the three variables
    ranks = timings["seconds_per_rank"]
    assert len(ranks) == 3
    phases = ("read", "agreement", "halo", "compute", "allreduce", "zonal", "time_sums", "final")
    for one in ranks:
        assert set(one) == set(phases) | {"total"}
        assert all(one[p] >= 0 for p in phases) and one["compute"] > 0
        assert sum(one[p] for p in phases) <= one["total"]
    plain = tmp_path / "plain.json"
    assert mpirun(3, "eval", "--nlat", "37", "--nlon", "72", "--ntime", "4", "--mesh", "1x1x3", "--quiet", "--json",
                  plain).returncode == 0
    assert "timings" not in json.loads(plain.read_text())
