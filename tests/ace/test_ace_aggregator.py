"""gridshard's aggregator in ACE's loop (gridshard.ace.use_in_ace) against ACE's own InferenceEvaluatorAggregator:
one synthetic run (ace_loop_case.py: 2 initial conditions x 4 members, 10 x 16 grid, 3 forward steps in windows of
2 and 1, a variable with missing points), built through ACE's own `InferenceEvaluatorAggregatorConfig.build` and fed
through `record_initial_condition` and `record_batch`, ACE's own serially in float32 and float64, gridshard's
serially and under mpirun at 1x2x2, 2x1x1 and 1x1x3 (uneven longitude shards: 6, 6, 4); then ACE's loop in float64
with a variable missing over land and ACE's mask provider's mask of it, ACE's own against the drop-in at 1x2x1 and
1x1x3. The longer runs (float64, climate, IPO) split latitude alone on 2 ranks (1x2x1) and longitude unevenly on 3
(1x1x3): the main runs hold the 2-D split and the data ranks, and each process of ACE's loop costs seconds of imports.

- gridshard's keys (the mean time series, mean_step_k, time_mean, time_mean_norm and their channel mean, and the
  ensemble's at step 2 and, normalised with their channel mean, at step 3: ACE's almost-fair CRPS, ensemble-mean
  RMSE and spread-skill ratio bias) and files (mean, mean_norm, mean_step_k, time_mean, time_mean_norm, zonal_mean)
  are the same bits at every mesh.
- They are ACE's within ACE's float32 rounding, and ACE's float64 numbers to 1e-7 relative where gridshard's inputs
  are ACE's (the normalised ones are rounded to float32 by the normalisation in the float32 run: 1e-5 there).
- The maps in the files are global (lat x lon) at every mesh; ACE's own aggregator on its own backend at 1x2x2
  holds each rank's tile and cannot write it (shown: that is what the drop-in is for).
- ACE's power spectrum (its fill, its transform, averaged over every forward step; its four norm biases and
  power_spectrum_diagnostics.nc) is gridshard's at every mesh, spatial parallelism included (where ACE's own refuses
  it), its `variables` filter honoured (variable "b" only on shards); within ACE's float32 transform of ACE's numbers.
- Under spatial parallelism a metric gridshard does not know (one a later fme might add, in the climate case) is
  refused at build time, naming it and the field that turns it off; on one process it would be ACE's own.
- ACE's gradient score leaves missing points out while its other sums let them through (a weighted_nanmean of each
  magnitude): gridshard's own-points gradient score does the same (metrics/field.hpp, own_gradient_policy).
- ACE's near_zero_fraction metric (a threshold per variable, a variable with missing points, its maps) is ACE's at
  every mesh: its gen and gen_minus_target keys and its file (gen, target and error maps, global).
- ACE's trend (per-cell least-squares slopes per year against the Julian calendar's dates) is ACE's at every mesh: its
  weighted_rmse keys and its file (target and prediction maps over (source, lat, lon), global); its video (the mean
  maps per step, global, and its extended videos: bias, RMSE, least and greatest errors, variance ratio) too.
- `gridshard eval` on the climate case's files, its options named after the case's config, gives the drop-in's bits:
  every climate key it logs and every climate file but the histograms' (the case's windows are not the tool's).
- The documented difference, where a target is missing: ACE's spread-skill ratio bias counts a missing cell as -1;
  gridshard follows its sums (NaN).

Run by run_ace_tests.py in ACE's venv, in a process of its own (it starts mpirun itself)."""
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

HERE = pathlib.Path(__file__).resolve().parent
CASE = HERE / "ace_loop_case.py"
MESHES = [(1, 1, 1), (4, 2, 2), (2, 1, 1), (3, 1, 3)]  # ranks, FME_DISTRIBUTED_H, FME_DISTRIBUTED_W
# The longer runs (float64, climate, IPO): one split at a time, on the fewest ranks that make it.
SPATIAL_MESHES = [(1, 1, 1), (2, 2, 1), (3, 1, 3)]
OURS = ("mean/", "mean_norm/", "mean_step_2/", "mean_step_2_norm/", "time_mean/", "time_mean_norm/", "ensemble_step_2/",
        "ensemble_step_3_norm/", "near_zero_fraction/", "trend/")  # power_spectrum/: its own test
FILES = ["mean", "mean_norm", "mean_step_2", "mean_step_2_norm", "time_mean", "time_mean_norm", "zonal_mean",
         "near_zero_fraction", "trend", "video"]
MISSING = "b"  # the variable with missing points


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def case_command(out, ranks, h, w, ace, arguments, scratch):
    """The command line and environment of ace_loop_case.py OUT ARGUMENTS: ACE's own aggregator (``ace``; on one
    process, or on ACE's model backend over gloo) or the drop-in on gridshard's backend, under mpirun at ``ranks``
    on an ``h x w`` spatial mesh; Open MPI's session files under ``scratch``."""
    env = dict(os.environ, FME_FORCE_CPU="1", OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_mpi_yield_when_idle="1", TMPDIR=str(scratch))
    build = os.environ.get("GRIDSHARD_BUILD_DIR")
    if build:
        env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(build) / "python"), env.get("PYTHONPATH", "")])
    command = [sys.executable, str(CASE), str(out)] + (["--ace"] if ace else []) + list(arguments)
    if ace and ranks == 1:
        env["FME_DISTRIBUTED_BACKEND"] = "none"
        return command, env
    if ace:  # ACE's own ModelTorchDistributed over gloo
        env.update(FME_DISTRIBUTED_BACKEND="model", FME_DISTRIBUTED_H=str(h), FME_DISTRIBUTED_W=str(w),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    else:
        env.update(FME_DISTRIBUTED_BACKEND="gridshard", FME_DISTRIBUTED_H=str(h), FME_DISTRIBUTED_W=str(w))
    return [shutil.which("mpiexec") or "mpirun", "-n", str(ranks), "--oversubscribe"] + command, env


def run_case(out, ranks=1, h=1, w=1, ace=False, float64=False, flags=()):
    out.mkdir()
    command, env = case_command(out, ranks, h, w, ace, (["--float64"] if float64 else []) + list(flags), out)
    r = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (ranks, h, w, r.stdout[-2000:], r.stderr[-4000:])
    logs = json.loads((out / "logs.json").read_text())
    values = lambda d: {k: float.fromhex(v) for k, v in d.items()}  # noqa: E731
    return {"refused": logs["refused"], "flush_error": logs.get("flush_error"), "summary": values(logs["summary"]),
            "rows": [values(row) for row in logs["rows"]], "folder": out, "images": logs.get("images", [])}


def run_cases(cases):
    """run_case of every {key: keyword arguments}, three cases at a time. Each process of a case spends most of its time
    importing ACE's package (about 13 s of CPU), so a single-process case run alone leaves a core idle."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(run_case, **arguments) for key, arguments in cases.items()}
        return {key: future.result() for key, future in futures.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ace_loop")
    cases = {"ace32": dict(out=root / "ace32", ace=True), "ace64": dict(out=root / "ace64", ace=True, float64=True),
             "ace_on_shards": dict(out=root / "ace-2-2x1", ranks=2, h=2, w=1, ace=True,
                                   flags=["--no-zonal-mean", "--no-trend", "--no-video"])}
    for ranks, h, w in MESHES:
        cases[(ranks, h, w)] = dict(out=root / f"gridshard-{ranks}-{h}x{w}", ranks=ranks, h=h, w=w)
    return run_cases(cases)


def ours(logs):
    return {k: v for k, v in logs.items() if k.startswith(OURS)}


def files(folder):
    out = {}
    for name in FILES:
        with xr.open_dataset(folder / f"{name}_diagnostics.nc") as ds:
            out[name] = {v: (ds[v].dims, ds[v].values.astype(np.float64)) for v in ds.data_vars}
    return out


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def test_the_same_bits_at_every_mesh(runs):
    serial = runs[(1, 1, 1)]
    reference_files = files(serial["folder"])
    for mesh in MESHES[1:]:
        run = runs[mesh]
        assert ours(run["summary"]) == ours(serial["summary"]) or all(
            same_bits(np.float64(x), np.float64(ours(serial["summary"])[k])) for k, x in ours(run["summary"]).items())
        assert sorted(ours(run["summary"])) == sorted(ours(serial["summary"])), mesh
        assert [r.keys() for r in run["rows"]] == [r.keys() for r in serial["rows"]], mesh
        for row, expected in zip(run["rows"], serial["rows"]):
            for key, value in row.items():
                assert same_bits(np.float64(value), np.float64(expected[key])), (mesh, key)
        for name, variables in files(run["folder"]).items():
            assert variables.keys() == reference_files[name].keys(), (mesh, name)
            for variable, (dims, values) in variables.items():
                assert dims == reference_files[name][variable][0], (mesh, name, variable)
                assert same_bits(values, reference_files[name][variable][1]), (mesh, name, variable)


def documented_difference(key):
    """The keys where ACE counts a missing target's cells as -1 (its spread-skill ratio bias, and so the channel mean
    of the normalised one) and gridshard's sums give NaN. (ACE's gradient score leaves missing points out, a
    weighted_nanmean of each magnitude: gridshard's own-points gradient score does too, and is compared.)"""
    return key.endswith((f"ssr_bias/{MISSING}", "ssr_bias/channel_mean"))


def assert_aces_number(value, ace32, ace64, rel, where):
    """``value`` within ACE's float32 rounding of ACE's float32 number ``ace32``: 1e-4, or twice ACE's own float32
    error (its distance to its float64 answer) where a cancellation makes that larger (the spread-skill ratio bias:
    mse - var / M); and ACE's float64 number ``ace64`` to ``rel``."""
    float32_error = abs(ace32 - ace64)
    assert abs(value - ace32) <= max(1e-4 * abs(ace32) + 1e-6, 2 * float32_error), where
    assert value == pytest.approx(ace64, rel=rel, abs=1e-9), where


def test_ace_keys_and_numbers(runs):
    ace32, ace64 = ours(runs["ace32"]["summary"]), ours(runs["ace64"]["summary"])
    assert any(k.startswith("ensemble_step_2/ssr_bias/") for k in ace32)
    assert "ensemble_step_3_norm/crps/channel_mean" in ace32
    assert {"near_zero_fraction/gen/a", "near_zero_fraction/gen_minus_target/b", "trend/weighted_rmse/a"} <= set(ace32)
    # ACE's images of an ensemble metric's mean maps (log_mean_maps): the same keys, drawn from the global maps
    mean_maps = {k for k in runs["ace32"]["images"] if "/mean_map/" in k}
    assert "ensemble_step_2/ssr_bias/mean_map/a" in mean_maps, sorted(mean_maps)
    for mesh in MESHES:
        assert {k for k in runs[mesh]["images"] if "/mean_map/" in k} == mean_maps, mesh
    for mesh in MESHES:
        mine = ours(runs[mesh]["summary"])
        assert sorted(mine) == sorted(ace32), mesh
        for key, value in mine.items():
            if documented_difference(key):
                assert np.isnan(value) and np.isfinite(ace32[key]), key
                continue
            if np.isnan(ace32[key]):
                assert np.isnan(value), (mesh, key)
                continue
            # Against float64 ACE: 1e-7, but where gridshard's inputs are not ACE's float64 ones: the normalised
            # fields (rounded to float32 by the normalisation of the float32 loop) and the gradient magnitudes (the
            # library forms those of float32 fields in float32, correctly rounded).
            rel = 1e-5 if ("_norm" in key or "grad_mag" in key) else 1e-7
            assert np.isfinite(value) or key.endswith(f"/{MISSING}") or key.endswith("/channel_mean"), key
            assert_aces_number(value, ace32[key], ace64[key], rel, (mesh, key))
        for row, ace_row in zip(runs[mesh]["rows"], runs["ace32"]["rows"]):
            assert sorted(row) == sorted(ace_row), mesh
            for key, value in row.items():
                if np.isnan(ace_row[key]):
                    assert np.isnan(value), (mesh, key)
                else:
                    assert value == pytest.approx(ace_row[key], rel=1e-4, abs=1e-5), (mesh, key)


def test_the_files_are_aces_with_global_maps(runs):
    ace = files(runs["ace64"]["folder"])
    for mesh in MESHES:
        mine = files(runs[mesh]["folder"])
        for name in FILES:
            assert mine[name].keys() == ace[name].keys(), (mesh, name)
            for variable, (dims, values) in mine[name].items():
                ace_dims, ace_values = ace[name][variable]
                assert set(dims) == set(ace_dims) and values.shape == ace_values.shape, (mesh, name, variable)
                assert np.array_equal(np.isnan(values), np.isnan(ace_values)), (mesh, name, variable)
                assert np.allclose(values, ace_values, rtol=1e-4, atol=1e-5, equal_nan=True), (mesh, name, variable)
        assert mine["time_mean"]["gen_map-a"][1].shape == (10, 16)  # the global map, at every mesh
        assert mine["near_zero_fraction"]["error_map-b"][1].shape == (10, 16)
        assert mine["trend"]["a"][1].shape == (2, 10, 16)  # (source, lat, lon): target, prediction
        assert mine["video"]["b"][1].shape == (2, 4, 10, 16)  # (source, timestep, lat, lon), row 0 NaN as ACE's
        assert mine["mean"]["weighted_rmse-a"][1].shape == (4,)  # the initial condition and 3 forward steps


@pytest.fixture(scope="module")
def float64_runs(tmp_path_factory):
    """ACE's loop in float64 with a variable missing over land and the dataset's mask of it ("sst", mask_sst): ACE's
    own aggregator serially, gridshard's drop-in at every mesh."""
    root = tmp_path_factory.mktemp("ace_loop_float64")
    cases = {"ace64": dict(out=root / "ace64", ace=True, float64=True, flags=["--masked"])}
    for ranks, h, w in SPATIAL_MESHES[1:]:  # 1x2x1 and 1x1x3
        cases[(ranks, h, w)] = dict(out=root / f"gridshard-{ranks}-{h}x{w}", ranks=ranks, h=h, w=w, float64=True,
                                    flags=["--masked"])
    return run_cases(cases)


def test_float64_and_a_masked_variable_are_aces(float64_runs):
    """ACE's loop in float64 (which the drop-in refused) with ACE's mask provider (which it ignored: the masked
    variable's scores were NaN where ACE's are numbers): every key ACE logs is ACE's float64 number to 1e-7, the masked
    variable's included, but the documented difference and ACE's float32 spectral transform (1e-4); the same bits at
    every mesh; the time-mean maps ACE's, global; the files in the mode the umask leaves of 0666."""
    ace = ours(float64_runs["ace64"]["summary"])
    first = float64_runs[SPATIAL_MESHES[1]]
    umask = os.umask(0)
    os.umask(umask)
    assert any(k.endswith("/sst") for k in ace) and all(np.isfinite(v) for k, v in ace.items() if k.endswith("/sst"))
    for mesh in SPATIAL_MESHES[1:]:
        run = float64_runs[mesh]
        mine = ours(run["summary"])
        assert sorted(mine) == sorted(ace), mesh
        for key, value in mine.items():
            assert same_bits(np.float64(value), np.float64(ours(first["summary"])[key])), (mesh, key)
            if documented_difference(key):
                assert np.isnan(value) and np.isfinite(ace[key]), key
                continue
            assert (np.isnan(value) and np.isnan(ace[key])) or value == pytest.approx(ace[key], rel=1e-7, abs=1e-9), \
                (mesh, key, value, ace[key])
        spectra = {k: v for k, v in run["summary"].items() if k.startswith("power_spectrum/")}
        for key, value in spectra.items():  # fme's RealSHT is float32 in ACE's float64 loop
            assert value == pytest.approx(float64_runs["ace64"]["summary"][key], rel=1e-4, abs=1e-6), (mesh, key)
        for row, ace_row in zip(run["rows"], float64_runs["ace64"]["rows"]):
            assert sorted(row) == sorted(ace_row), mesh
            for key, value in row.items():
                assert (np.isnan(value) and np.isnan(ace_row[key])) or \
                    value == pytest.approx(ace_row[key], rel=1e-7, abs=1e-9), (mesh, key)
        theirs = files(float64_runs["ace64"]["folder"])
        for name, variables in files(run["folder"]).items():
            for variable, (dims, values) in variables.items():
                assert np.allclose(values, theirs[name][variable][1], rtol=1e-7, atol=1e-9, equal_nan=True), \
                    (mesh, name, variable)
        assert files(run["folder"])["time_mean"]["gen_map-sst"][1].shape == (10, 16)
        written = sorted(run["folder"].glob("*_diagnostics.nc"))
        assert written and all(os.stat(p).st_mode & 0o777 == 0o666 & ~umask for p in written), mesh


def run_fault(out, ranks, h, w, flags=(), umask=None):
    """ace_loop_case.py with --outcomes: what each rank of the drop-in raised (or "ok"), in rank order; the job must
    end (every rank returns) within the timeout."""
    outcomes = out.parent / (out.name + "-outcomes")
    outcomes.mkdir()
    command, env = case_command(out, ranks, h, w, False, ["--outcomes", str(outcomes), *flags], outcomes)
    r = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env,
                       preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    return [(outcomes / f"rank-{k}.txt").read_text() for k in range(ranks)]


def test_the_drop_in_fails_alike_on_every_rank(tmp_path):
    """What failed on one rank, or only on world rank 0 (the writer), is raised on every rank, never a hang: a flush
    before any record (ACE's ValueError), a data rank whose samples are not whole ensembles, a read-only output
    folder (ArgumentError) and a full disk (SystemFailure, named as one)."""
    first = tmp_path / "first"
    first.mkdir()
    assert run_fault(first, 2, 1, 2, ["--flush-first"]) == ["ValueError: No batches have been recorded."] * 2
    uneven = tmp_path / "uneven"
    uneven.mkdir()
    outcomes = run_fault(uneven, 2, 1, 1, ["--uneven"])  # two data ranks
    assert len(set(outcomes)) == 1 and "ArgumentError" in outcomes[0], outcomes
    assert "not whole ensembles of n_ensemble_per_ic=4" in outcomes[0], outcomes
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only or a full tmpfs needs root")
    for name, options, kind, needle in (("read_only", "ro", "ArgumentError", "Read-only file system"),
                                        ("full", "size=4k", "SystemFailure", "No space left on device")):
        folder = tmp_path / name
        folder.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        try:
            outcomes = run_fault(folder, 2, 1, 2)
        finally:
            subprocess.run(["umount", str(folder)], check=True)
        assert len(set(outcomes)) == 1, outcomes
        assert outcomes[0].startswith(kind) and needle in outcomes[0], outcomes
        assert f"'{folder}/" in outcomes[0] and "diagnostics.nc'" in outcomes[0], outcomes  # the file, by its name


@pytest.mark.parametrize("umask", [0o027])
def test_the_drop_ins_files_follow_the_umask(tmp_path, umask):
    """The diagnostics files get the mode the umask leaves of 0666, as the tool's do (the temporary's 0600 before;
    the float64 runs check the default umask's)."""
    out = tmp_path / "out"
    out.mkdir()
    assert run_fault(out, 2, 1, 2, umask=umask) == ["ok", "ok"]
    written = sorted(out.glob("*_diagnostics.nc"))
    assert written and all(os.stat(p).st_mode & 0o777 == 0o666 & ~umask for p in written), \
        [(p.name, oct(os.stat(p).st_mode)) for p in written]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary left


def test_aces_own_maps_on_shards_are_tiles(runs):
    """ACE's own aggregator at 1x2x1 (its own backend, the zonal mean and the trend off: ACE's trend forms its RMSE,
    a spatial collective, on rank 0 only, and the job fails in it): its scalars are the serial ones, but
    each rank's time-mean map is its 5 x 16 tile, which its flush_diagnostics puts against the global coordinates:
    xarray refuses it, and no map is written. gridshard's drop-in on shards (1x2x2) writes the 10 x 16 map."""
    ace = runs["ace_on_shards"]
    assert ace["flush_error"] and "conflicting sizes for dimension 'lat'" in ace["flush_error"], ace["flush_error"]
    assert "length 10 on 'lat' and length 5" in ace["flush_error"], ace["flush_error"]
    assert not (ace["folder"] / "time_mean_diagnostics.nc").exists()
    key = "time_mean/rmse/a"
    assert ace["summary"][key] == pytest.approx(runs["ace32"]["summary"][key], rel=1e-5)
    serial = files(runs["ace32"]["folder"])["time_mean"]["gen_map-a"][1]
    mine = files(runs[(4, 2, 2)]["folder"])["time_mean"]["gen_map-a"][1]
    assert serial.shape == mine.shape == (10, 16) and np.allclose(mine, serial, rtol=1e-5)


def test_unimplemented_metrics_are_refused_on_shards(climate_runs):
    assert climate_runs[(1, 1, 1)]["refused"] is None
    for mesh in SPATIAL_MESHES[1:]:
        message = climate_runs[mesh]["refused"]
        assert message and "InferenceEvaluatorAggregatorConfig.later (LaterMetric, 'later')" in message, (mesh, message)
        assert "set later.enabled=False" in message and "\n" not in message, message


def test_the_power_spectrum_is_aces_at_every_mesh(runs):
    """ACE's keys and file from gridshard's spectra: the same bits at every mesh for the variables each run has (on
    spatial shards "b" only, with missing points, filled as ACE fills them: the case's `variables` filter there),
    ACE's numbers within its float32 transform's rounding."""
    keys = ("smallest_scale_norm_bias", "positive_norm_bias", "negative_norm_bias", "mean_abs_norm_bias")
    serial = runs[(1, 1, 1)]
    assert sorted(k for k in serial["summary"] if k.startswith("power_spectrum/")) == sorted(
        f"power_spectrum/{key}/{name}" for key in keys for name in ("a", "b"))
    for mesh in MESHES[1:]:
        names = ["b"] if mesh[1] * mesh[2] > 1 else ["a", "b"]
        got = {k: v for k, v in runs[mesh]["summary"].items() if k.startswith("power_spectrum/")}
        assert sorted(got) == sorted(f"power_spectrum/{key}/{name}" for key in keys for name in names), mesh
        for key, value in got.items():
            assert same_bits(np.float64(value), np.float64(serial["summary"][key])), (mesh, key)
        with xr.open_dataset(runs[mesh]["folder"] / "power_spectrum_diagnostics.nc") as sharded, \
                xr.open_dataset(serial["folder"] / "power_spectrum_diagnostics.nc") as alone:
            assert list(sharded.data_vars) == names, mesh
            for name in names:
                assert same_bits(sharded[name].values, alone[name].values), (mesh, name)
    with xr.open_dataset(serial["folder"] / "power_spectrum_diagnostics.nc") as mine, \
            xr.open_dataset(runs["ace32"]["folder"] / "power_spectrum_diagnostics.nc") as theirs:
        assert list(mine["source"].values) == list(theirs["source"].values) == ["prediction", "target"]
        assert mine["a"].dims == theirs["a"].dims == ("source", "wavenumber")
        assert np.array_equal(mine["wavenumber"].values, theirs["wavenumber"].values)
        for name in ("a", "b"):
            assert mine[name].attrs == theirs[name].attrs, name
            # ACE's float32 transform: its rounding is relative to the largest coefficients.
            np.testing.assert_allclose(mine[name].values, theirs[name].values, rtol=1e-5,
                                       atol=1e-9 * float(np.max(theirs[name].values)))
    for run in ("ace32", "ace64"):  # fme's RealSHT is float32 in ACE's float64 loop too
        theirs = runs[run]["summary"]
        for name in ("a", "b"):
            for key in keys:
                k = f"power_spectrum/{key}/{name}"
                assert serial["summary"][k] == pytest.approx(theirs[k], rel=1e-3, abs=1e-5), (run, k)


CLIMATE = ("annual/", "seasonal/", "enso_index/")


@pytest.fixture(scope="module")
def climate_runs(tmp_path_factory):
    """The case as a run of 5.1 years (--climate: 62 steps of 30 days, a variable "TS" with an ENSO-like oscillation,
    ACE's annual and ENSO index metrics, its defaults, and its seasonal one): ACE's own serially in float32 and
    float64, the drop-in at every mesh."""
    root = tmp_path_factory.mktemp("ace_climate")
    cases = {"ace32": dict(out=root / "ace32", ace=True, flags=["--climate"]),
             "ace64": dict(out=root / "ace64", ace=True, float64=True, flags=["--climate"])}
    for ranks, h, w in SPATIAL_MESHES:
        flags = ["--climate"] + (["--write-files"] if ranks == 1 else [])  # the serial run writes the run's files
        cases[(ranks, h, w)] = dict(out=root / f"gridshard-{ranks}-{h}x{w}", ranks=ranks, h=h, w=w, flags=flags)
    return run_cases(cases)


def annual_difference(key):
    """ACE's annual means sum each step's global mean with xarray's NaN-skipping sum but count every step: a variable
    with missing points (a NaN global mean every step) gets annual means of 0, and RMSE and CRPS 0. gridshard's are
    NaN (the means are missing)."""
    return key.startswith("annual/") and key.endswith(f"/{MISSING}")


def test_annual_seasonal_and_enso_index_are_aces_at_every_mesh(climate_runs):
    """ACE's annual (per sample and year the mean of the steps' global means, its RMSE and fair CRPS over the years, and
    its R2 of the yearly ensemble means against its monthly reference data's yearly means, for "a" and "TS"),
    seasonal (the time-mean RMSE of the seasonal mean maps, per season and over the four) and ENSO index metrics (the
    Niño 3.4 index's spread and band powers, and their ratios to the target's) on a run of 5.1 years: every key ACE
    logs, within ACE's float32 rounding (1e-4 relative, or twice ACE's own float32 error) and ACE's float64 numbers to
    1e-7 (its annual CRPS, which it forms in float32 in a float64 loop too, to 1e-4; its index, whose monthly means it
    keeps in float32 in a float64 loop too, to 1e-6); enso_index_diagnostics.nc
    (source, sample, time: the 15th of each month) and annual_diagnostics.nc (source, sample, year) ACE's to 1e-4; the
    same bits at every mesh. The documented difference: ACE's annual means of a variable with missing points are 0,
    gridshard's NaN."""
    ace32, ace64 = (
        {k: v for k, v in climate_runs[run]["summary"].items() if k.startswith(CLIMATE)} for run in ("ace32", "ace64"))
    assert {"annual/rmse/a", "annual/crps/a", "annual/r2/a_target", "annual/r2/TS_gen", "seasonal/time-mean-rmse/a-DJF",
            "seasonal/time-mean-rmse/a",
            "enso_index/TS_nino34_index_std", "enso_index/TS_nino34_index_power_1_16yr_norm"} <= set(ace32)
    with xr.open_dataset(climate_runs["ace64"]["folder"] / "enso_index_diagnostics.nc") as ds:
        ace_index = ds["TS"].values.astype(np.float64)
        ace_months = [(t.year, t.month, t.day) for t in ds["time"].values]
    with xr.open_dataset(climate_runs[(1, 1, 1)]["folder"] / "enso_index_diagnostics.nc") as ds:
        serial_index = ds["TS"].values.astype(np.float64)
    serial = climate_runs[(1, 1, 1)]
    with xr.open_dataset(climate_runs["ace64"]["folder"] / "annual_diagnostics.nc") as ds:
        ace_file = {v: ds[v].values.astype(np.float64) for v in ds.data_vars}
        ace_years = ds["year"].values
    with xr.open_dataset(serial["folder"] / "annual_diagnostics.nc") as ds:
        serial_file = {v: ds[v].values.astype(np.float64) for v in ds.data_vars}
    for mesh in SPATIAL_MESHES:
        run = climate_runs[mesh]
        mine = {k: v for k, v in run["summary"].items() if k.startswith(CLIMATE)}
        assert sorted(mine) == sorted(ace32), mesh
        for key, value in mine.items():
            assert same_bits(np.float64(value), np.float64(serial["summary"][key])), (mesh, key)
            if annual_difference(key):
                assert np.isnan(value) and ace32[key] == 0.0, (mesh, key)
                continue
            if np.isnan(ace32[key]):
                assert np.isnan(value), (mesh, key)
                continue
            # ACE forms its annual CRPS in float32 whatever the loop's dtype (fme's annual.get_crps): 1e-4 there; its
            # index's monthly means are float32 too (utils.running_monthly_mean's torch.full takes torch's default
            # dtype): 1e-6 there
            # ACE's R2 takes the reference's global means of its float32 file in float32 in either loop (torch's
            # float32 sums of fields near 280: about 3e-5 off, which moves an R2 near -0.1 by about 2e-4): 1e-3 there
            rel = 1e-4 if key.startswith("annual/crps/") else 1e-3 if key.startswith("annual/r2/") else \
                1e-6 if key.startswith("enso_index/") else 1e-7
            assert_aces_number(value, ace32[key], ace64[key], rel, (mesh, key))
        with xr.open_dataset(run["folder"] / "annual_diagnostics.nc") as ds:
            assert list(ds["year"].values) == list(ace_years) == [2000, 2001, 2002, 2003, 2004], mesh
            assert set(ds.data_vars) == set(ace_file), mesh
            for variable in ds.data_vars:
                values = ds[variable].values.astype(np.float64)
                assert ds[variable].dims == ("source", "sample", "year"), (mesh, variable)
                assert same_bits(values, serial_file[variable]), (mesh, variable)
                if variable == MISSING:
                    assert np.isnan(values).all() and (ace_file[variable] == 0).all(), mesh
                else:
                    assert np.allclose(values, ace_file[variable], rtol=1e-4, atol=1e-5), (mesh, variable)
        with xr.open_dataset(run["folder"] / "enso_index_diagnostics.nc") as ds:
            assert ds["TS"].dims == ("source", "sample", "time"), mesh
            assert [(t.year, t.month, t.day) for t in ds["time"].values] == ace_months, mesh
            index = ds["TS"].values.astype(np.float64)
            assert same_bits(index, serial_index), mesh
            assert np.array_equal(np.isnan(index), np.isnan(ace_index)), mesh
            assert np.allclose(index, ace_index, rtol=1e-4, atol=1e-5, equal_nan=True), mesh


def test_histograms_are_aces_at_every_mesh(climate_runs):
    """ACE's histogram metric over ACE's windows (2, 1 and 26 steps; the edges set by the first and doubled by the
    later ones) of every variable ("b" with missing target points, left out by ACE's mask): the 99.9999th percentiles
    of "b" and "TS" (ACE's percentile_variables) and histogram_diagnostics.nc (per variable its counts (source, bin)
    and edges (source, bin_edges)) are ACE's float32 numbers bit for bit at every mesh, and ACE's float64 ones to
    1e-5; the counts are stored as int32 (the 64-bit offset netCDF format has no int64; ACE's are int64)."""
    ace32, ace64 = ({k: v for k, v in climate_runs[run]["summary"].items() if k.startswith("histogram/")}
                    for run in ("ace32", "ace64"))
    assert sorted(ace32) == sorted(f"histogram/{source}/99.9999th-percentile/{name}"
                                   for source in ("target", "prediction") for name in ("b", "TS"))
    with xr.open_dataset(climate_runs["ace32"]["folder"] / "histogram_diagnostics.nc") as ds:
        ace_file = {v: (ds[v].dims, ds[v].values) for v in ds.data_vars}
    assert set(ace_file) == {"a", "a_bin_edges", "b", "b_bin_edges", "TS", "TS_bin_edges"}
    # the later windows doubled the bins: fewer than half of them hold counts
    assert all(((ace_file[name][1] > 0).sum(axis=1) < 100).all() for name in ("a", "b", "TS"))
    for mesh in SPATIAL_MESHES:
        run = climate_runs[mesh]
        mine = {k: v for k, v in run["summary"].items() if k.startswith("histogram/")}
        assert sorted(mine) == sorted(ace32), mesh
        for key, value in mine.items():
            assert same_bits(np.float64(value), np.float64(ace32[key])), (mesh, key, value, ace32[key])
            assert np.isclose(value, ace64[key], rtol=1e-5), (mesh, key)
        with xr.open_dataset(run["folder"] / "histogram_diagnostics.nc") as ds:
            assert set(ds.data_vars) == set(ace_file), mesh
            assert list(ds["source"].values) == ["target", "prediction"], mesh
            for variable, (dims, values) in ace_file.items():
                assert ds[variable].dims == dims, (mesh, variable)
                assert np.array_equal(ds[variable].values, values), (mesh, variable)


def test_the_enso_coefficient_is_aces_at_every_mesh(climate_runs):
    """ACE's enso_coefficient metric (its default for a run of more than 1800 days) against ACE's own reference
    Niño 3.4 index (fme's, reindexed to each sample's times by ACE's own get_sample_index_series): per variable the
    mean over the samples of the per-cell regression coefficients, enso_coefficient/rmse/VAR within ACE's float32
    rounding (ACE sums the products and the index's squares in float32: 1e-3 relative; its float64 loop to 1e-5) and
    enso_coefficient_diagnostics.nc (source, lat, lon) ACE's to 1e-4 of the maps' scale, the same bits at every mesh.
    A variable with missing points ("b") has NaN coefficients there, as ACE's, and NaN RMSE where ACE's is NaN."""
    ace32, ace64 = ({k: v for k, v in climate_runs[run]["summary"].items() if k.startswith("enso_coefficient/")}
                    for run in ("ace32", "ace64"))
    assert sorted(ace32) == [f"enso_coefficient/rmse/{name}" for name in ("TS", "a", "b")]
    with xr.open_dataset(climate_runs["ace64"]["folder"] / "enso_coefficient_diagnostics.nc") as ds:
        ace_maps = {v: ds[v].values.astype(np.float64) for v in ds.data_vars}
        assert ds["TS"].dims == ("source", "lat", "lon") and list(ds["source"].values) == ["target", "prediction"]
    serial = climate_runs[(1, 1, 1)]
    with xr.open_dataset(serial["folder"] / "enso_coefficient_diagnostics.nc") as ds:
        serial_maps = {v: ds[v].values.astype(np.float64) for v in ds.data_vars}
    assert set(serial_maps) == set(ace_maps)
    for mesh in SPATIAL_MESHES:
        run = climate_runs[mesh]
        mine = {k: v for k, v in run["summary"].items() if k.startswith("enso_coefficient/")}
        assert sorted(mine) == sorted(ace32), mesh
        for key, value in mine.items():
            assert same_bits(np.float64(value), np.float64(serial["summary"][key])), (mesh, key)
            if np.isnan(ace32[key]):
                assert np.isnan(value), (mesh, key)
                continue
            assert np.isclose(value, ace32[key], rtol=1e-3), (mesh, key, value, ace32[key])
            assert np.isclose(value, ace64[key], rtol=1e-5), (mesh, key, value, ace64[key])
        with xr.open_dataset(run["folder"] / "enso_coefficient_diagnostics.nc") as ds:
            for variable, ace in ace_maps.items():
                values = ds[variable].values.astype(np.float64)
                assert same_bits(values, serial_maps[variable]), (mesh, variable)
                assert np.array_equal(np.isnan(values), np.isnan(ace)), (mesh, variable)
                scale = np.nanmax(np.abs(ace))
                assert np.allclose(values, ace, rtol=0, atol=1e-4 * scale, equal_nan=True), (mesh, variable)
    # gridshard.plot draws the drop-in's coefficient maps as ACE logs them (the serial run's folder)
    folder = climate_runs[(1, 1, 1)]["folder"]
    _, env = case_command(folder, 1, 1, 1, False, [], folder)
    result = subprocess.run([sys.executable, "-m", "gridshard.plot", str(folder)], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert {f"enso_coefficient-{v}.png" for v in ace_maps} <= {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("calendar", ["julian", "noleap", "proleptic_gregorian", "standard", "all_leap"])
def test_the_enso_coefficient_index_is_aces_to_the_bit(calendar):
    """gridshard.sample_index_series (io::sample_index_series: the drop-in's and `gridshard eval`'s ENSO coefficient
    index) against ACE's own get_sample_index_series on ACE's own reference index: the same bits for runs that start
    anywhere from 1930 to 2020 (so that the index covers them wholly, partly or not at all), steps of 6 hours to 30
    days, in each calendar ACE converts the index's Julian dates to, and the same samples left out."""
    import datetime

    import cftime
    import xarray as xr
    from fme.ace.aggregator.inference.enso.enso_coefficient import (EnsoCoefficientEvaluatorAggregator,
                                                                    get_sample_index_series)

    import gridshard
    from gridshard.ace.calendar import ace_reference_index

    dates, values, index_calendar = ace_reference_index()
    rng = np.random.default_rng(11)
    covered = left_out = 0
    for _ in range(12):
        hours = int(rng.choice([6, 24, 120, 720]))
        steps = int(rng.integers(1, 8 * 365 * 24 // hours))
        year = int(rng.integers(1930, 2021))
        initial = [cftime.datetime(year, int(rng.integers(1, 13)), int(rng.integers(1, 29)), int(rng.choice([0, 18])),
                                   calendar=calendar), cftime.datetime(min(year + 3, 2020), 3, 1, calendar=calendar)]
        ace = get_sample_index_series(EnsoCoefficientEvaluatorAggregator._enso_index,
                                      xr.DataArray(initial, dims=["sample"]), steps, datetime.timedelta(hours=hours))
        mine = gridshard.sample_index_series(dates, values, index_calendar,
                                             [(t.year, t.month, t.day, t.hour, t.minute, float(t.second))
                                              for t in initial], calendar, hours * 3600.0, steps)
        assert mine.shape == (2, steps + 1)
        for want, got in zip(ace, mine):
            if want is None:
                left_out += 1
                assert np.all(np.isnan(got))
            else:
                covered += 1
                want = np.asarray(want.values, dtype=np.float64)
                assert np.array_equal(want.view(np.int64), got.view(np.int64)), (initial, hours, steps)
    assert covered >= 4 and left_out >= 1


def test_gridshard_eval_of_the_runs_files_gives_the_drop_ins_bits(climate_runs, tmp_path):
    """`gridshard eval` on the climate case's files (its target and prediction as a run's files, ACE's layout) with
    the options named after the case's config and ACE's validity rule (`--policy propagate`: near-zero fractions
    with their thresholds, trend, video with its extended videos, annual means with the reference data, seasonal
    means, ENSO index, ENSO coefficient against ACE's own reference index as `python3 -m
    gridshard.ace.enso_reference_index` writes it) at 1 and 4 ranks gives the drop-in's bits: every climate key the
    drop-in logs under ACE's names (35), and the near-zero fraction, trend, video, annual, ENSO index and ENSO
    coefficient files. The histograms are left out: the case's windows (2, 1 and 59 steps) are not the tool's
    (--forward-steps-in-memory N: windows of N)."""
    import gridshard

    serial = climate_runs[(1, 1, 1)]
    folder = serial["folder"]
    _, env = case_command(folder, 1, 1, 1, False, [], tmp_path)
    index = tmp_path / "nino34.nc"
    r = subprocess.run([sys.executable, "-m", "gridshard.ace.enso_reference_index", str(index)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    build = pathlib.Path(os.environ["GRIDSHARD_BUILD_DIR"])
    families = ("near_zero_fraction", "trend", "annual", "seasonal", "regional_index", "index_regression")
    keys = {s["key"]: s["ace_key"] for s in gridshard.registered_scores()
            if s["report"] == "forecast" and s["family"] in families and s["ace_key"]}
    for ranks in (1, 4):
        out = tmp_path / f"eval-{ranks}"
        out.mkdir()
        command = [shutil.which("mpiexec") or "mpirun", "-n", str(ranks), "--oversubscribe", str(build / "bin" /
                   "gridshard"), "eval", "--truth", str(folder / "truth.nc"), "--pred", str(folder / "pred.nc"),
                   "--ensemble-size", "4", "--policy", "propagate", "--json", str(out / "r.json"), "--diagnostics",
                   str(out), "--quiet",
                   "--near-zero-fraction", "--near-zero-fraction-variables", "a,b", "--near-zero-fraction-eps", "290",
                   "--near-zero-fraction-per-variable-eps", "a=250", "--near-zero-fraction-include-maps",
                   "--trend", "--trend-variables", "a,b", "--video", "--video-variables", "b",
                   "--enable-extended-videos", "--annual", "--annual-reference-data", str(folder / "reference-0.nc"),
                   "--seasonal", "--seasonal-variables", "a,b", "--enso-index", "--enso-coefficient-index", str(index)]
        r = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        tool = json.loads((out / "r.json").read_text())["variables"]
        compared = set()
        for name, scores in tool.items():
            for key, value in scores["time_mean"].items():
                ace_key = keys.get(key, "").format(var=name)
                if ace_key in serial["summary"]:
                    mine = np.float64(np.nan if value is None else value)
                    assert same_bits(mine, np.float64(serial["summary"][ace_key])), (ranks, ace_key)
                    compared.add(ace_key)
        climate = {k for k in serial["summary"] if k.split("/")[0] in (
            "near_zero_fraction", "trend", "annual", "seasonal", "enso_index", "enso_coefficient")}
        assert compared == climate and len(climate) == 35, sorted(climate - compared)
        for file in ("trend_diagnostics.nc", "video_diagnostics.nc", "annual_diagnostics.nc",
                     "enso_index_diagnostics.nc", "enso_coefficient_diagnostics.nc",
                     "near_zero_fraction_diagnostics.nc"):
            with xr.open_dataset(folder / file) as ace, xr.open_dataset(out / file) as ours:
                for variable in ace.data_vars:
                    if variable == "counts":
                        continue
                    assert same_bits(ours[variable].values.astype(np.float64),
                                     ace[variable].values.astype(np.float64)), (ranks, file, variable)


def test_the_ipo_index_is_aces_at_every_mesh(tmp_path_factory):
    """ACE's ipo_index metric (its default for a run of more than 80 years) on a run of 82 years (--ipo: 1000 steps of
    30 days, "sst" missing over land with a decadal tripole): ACE's NaN-skipping means in its three boxes, the monthly
    tripole index and the spread of its 13-year Chebyshev low-pass filtered form (scipy's filtfilt, which gridshard's
    metrics/climate_index.hpp designs and runs as scipy does). ipo_index/sst_ipo_tpi_std and _std_norm within 1e-5 of
    ACE's float32 loop (whose monthly means are float32, and whose filter amplifies rounding: the design's poles lie
    near the unit circle), ipo_index_diagnostics.nc (source, sample, time) ACE's to 1e-5 of its scale, the same bits
    at 1x1x1 and 1x2x1."""
    root = tmp_path_factory.mktemp("ace_ipo")
    meshes = [(1, 1, 1), (2, 2, 1)]  # the 1x1x3 split of the boxes' columns: the climate runs' index
    done = run_cases({"ace32": dict(out=root / "ace32", ace=True, flags=["--ipo"]),
                      **{mesh: dict(out=root / "gridshard-{}-{}x{}".format(*mesh), ranks=mesh[0], h=mesh[1], w=mesh[2],
                                    flags=["--ipo"]) for mesh in meshes}})
    ace = done["ace32"]
    keys = ["ipo_index/sst_ipo_tpi_std", "ipo_index/sst_ipo_tpi_std_norm"]
    assert sorted(k for k in ace["summary"] if k.startswith("ipo_index/")) == keys
    with xr.open_dataset(ace["folder"] / "ipo_index_diagnostics.nc") as ds:
        ace_index = ds["sst"].values.astype(np.float64)
        ace_months = [(t.year, t.month, t.day) for t in ds["time"].values]
    assert ace_index.shape[2] > 80 * 12
    serial = None
    for ranks, h, w in meshes:
        run = done[(ranks, h, w)]
        serial = serial or run
        assert sorted(k for k in run["summary"] if k.startswith("ipo_index/")) == keys
        for key in keys:
            assert same_bits(np.float64(run["summary"][key]), np.float64(serial["summary"][key])), (ranks, key)
            assert np.isclose(run["summary"][key], ace["summary"][key], rtol=1e-5), (ranks, key)
        with xr.open_dataset(run["folder"] / "ipo_index_diagnostics.nc") as ds:
            assert ds["sst"].dims == ("source", "sample", "time")
            assert [(t.year, t.month, t.day) for t in ds["time"].values] == ace_months
            index = ds["sst"].values.astype(np.float64)
        assert np.array_equal(np.isnan(index), np.isnan(ace_index))
        assert np.allclose(index, ace_index, rtol=0, atol=1e-5 * np.nanmax(np.abs(ace_index)), equal_nan=True)


def test_a_score_added_through_the_registry_alone_is_logged(tmp_path):
    """gridshard.register_score (a test-only entry: rmse's definition under the key test_only_rmse, ACE key
    mean/test_only_rmse/{var}, logged on the normalised fields and by the mean_step_<k> metrics too) and nothing
    else: the drop-in logs it in every per-window row, in the summary (the step metrics' channel mean included) and
    in the mean diagnostics files, with weighted_rmse's bits, on shards."""
    run = run_case(tmp_path / "extra", 2, 1, 2, flags=["--extra-score"])
    checked = []
    for logs in [run["summary"]] + run["rows"]:
        twins = {k: k.replace("/weighted_rmse/", "/test_only_rmse/") for k in logs if "/weighted_rmse/" in k and
                 k.startswith("mean")}
        for key, twin in twins.items():
            assert twin in logs, (twin, sorted(logs))
            assert same_bits(np.float64(logs[twin]), np.float64(logs[key])), key
            checked.append(key)
    for prefix in ("mean/", "mean_norm/", "mean_step_2/", "mean_step_2_norm/"):
        assert any(k.startswith(prefix) for k in checked), (prefix, checked)
    assert any(k.endswith("/channel_mean") for k in checked), checked
    for name in ("mean", "mean_norm"):
        with xr.open_dataset(run["folder"] / f"{name}_diagnostics.nc") as ds:
            for variable in [v for v in ds.data_vars if v.startswith("weighted_rmse-")]:
                twin = variable.replace("weighted_rmse-", "test_only_rmse-")
                assert twin in ds.data_vars, (name, list(ds.data_vars))
                assert same_bits(ds[twin].values.astype(np.float64), ds[variable].values.astype(np.float64))
