"""gridshard's forecast time means against ACE's own inference loop: `gridshard eval` on forecast files in
ACE's layout (the first row is lead 1 x dt; the initial condition is in initial_condition.nc), serially and
at several meshes, and ACE's `InferenceEvaluatorAggregator` with only its `time_mean` metric
(`TimeMeanMetricConfig(target="denorm")` -> `TimeMeanEvaluatorAggregator`, fme.ace.aggregator.inference)
fed the same target and prediction tensors as ACE's inference loop feeds it: the initial condition through
`record_initial_condition`, then the forward steps window by window through `record_batch`. Its summary
logs `time_mean/rmse/<var>` and `time_mean/bias/<var>` must be gridshard's `time_mean` `rmse` and `bias`.

ACE's side runs on ACE's own code only: its non-distributed backend (`Distributed.force_non_distributed`),
its own area weights (`LatLonCoordinates(lat, lon).area_weights`, cos(lat) normalised, computed here from the
file's float32 latitudes in float64: the weights gridshard uses), tensors in float64. Run by
run_ace_tests.py in ACE's venv, in a process of its own (not under mpirun: it starts mpirun itself), with
GRIDSHARD_BUILD_DIR naming the build folder (bin/gridshard)."""
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys

import cftime
import netCDF4
import numpy as np
import pytest
import torch
import xarray as xr

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "cli"))
import forecast_files as ff  # noqa: E402

from fme.ace.aggregator.inference.main import build_inference_evaluator_aggregator  # noqa: E402
from fme.ace.aggregator.inference.time_mean import TimeMeanMetricConfig  # noqa: E402
from fme.ace.data_loading.batch_data import PairedData  # noqa: E402
from fme.core.coordinates import LatLonCoordinates  # noqa: E402
from fme.core.dataset_info import DatasetInfo  # noqa: E402
from fme.core.distributed import Distributed  # noqa: E402

NAME = "t2m"  # no missing values (ACE's torch sums let NaN through; gridshard leaves such points out)
MESHES = [(1, "1x1x1"), (4, "2x1x2"), (3, "1x3x1"), (2, "2x1x1")]
WINDOW = 2  # forward steps per record_batch, as ACE's inference loop hands them over (forward_steps_in_memory)
# Both sides form the time means in float64 from the same float32 values (gridshard per point in exact sums,
# then in double; ACE in torch float64 sums), so they agree to a few ulps: at most 5e-15 relative seen on the
# bias and 3e-16 on the RMSE. 1e-10 leaves five orders of magnitude for summation order and sits far below
# what leaving out the first forward step changes here (0.14 relative on the RMSE, 5e-3 on the bias).
RTOL = 1e-10
ATOL = 1e-12


def gridshard_bin():
    build = os.environ.get("GRIDSHARD_BUILD_DIR")
    path = pathlib.Path(build) / "bin" / "gridshard" if build else None
    if path is None or not path.exists():
        pytest.fail("GRIDSHARD_BUILD_DIR must name the build folder that holds bin/gridshard")
    return path


def run_gridshard(ranks, mesh, truth, pred, out, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               TMPDIR=str(tmp_path))  # a session folder of its own (concurrent Open MPI jobs share TMPDIR)
    mpiexec = shutil.which("mpiexec") or "mpirun"
    command = [mpiexec, "-n", str(ranks), "--oversubscribe", str(gridshard_bin()), "eval", "--truth", str(truth),
               "--pred", str(pred), "--mesh", mesh, "--json", str(out), "--quiet"]
    r = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (mesh, r.stdout, r.stderr)
    with open(out) as f:
        return json.load(f)


def read_ace_files(truth_path, pred_path, name):
    """The files as ACE's data writer left them: (target, prediction) float64 (sample, time, lat, lon), the
    float32 latitudes and longitudes, the lead times in microseconds and the initial times."""
    with netCDF4.Dataset(truth_path) as t, netCDF4.Dataset(pred_path) as p:
        target = np.asarray(t[name][:], dtype=np.float64)
        prediction = np.asarray(p[name][:], dtype=np.float64)
        lat, lon = np.asarray(p["lat"][:]), np.asarray(p["lon"][:])
        assert lat.dtype == np.float32
        lead_us = np.asarray(p["time"][:])
        init_us = np.asarray(p["init_time"][:])
    return target, prediction, lat, lon, lead_us, init_us


def _times(init_us, lead_us):
    """ACE's batch time coordinate: (sample, time) cftime datetimes, the valid times."""
    base = cftime.DatetimeJulian(1970, 1, 1)
    rows = [[base + datetime.timedelta(microseconds=int(i + k)) for k in lead_us] for i in init_us]
    return xr.DataArray(rows, dims=["sample", "time"])


def ace_time_mean(target, prediction, initial_target, initial_prediction, lat, lon, lead_us, init_us, dt_us):
    """ACE's InferenceEvaluatorAggregator (time_mean only) over one forecast: the initial condition
    (sample, 1, lat, lon) recorded as ACE's loop records it, then the forward steps (sample, time, lat, lon)
    in windows of WINDOW steps. Returns the summary logs."""
    with Distributed.force_non_distributed():
        coordinates = LatLonCoordinates(lat=torch.tensor(lat.astype(np.float64)),
                                        lon=torch.tensor(lon.astype(np.float64)))
        weights = coordinates.area_weights
        cos_lat = np.broadcast_to(np.cos(np.deg2rad(lat.astype(np.float64)))[:, None], (len(lat), len(lon)))
        np.testing.assert_allclose(weights.numpy(), cos_lat / cos_lat.sum(), rtol=1e-15, atol=0)
        info = DatasetInfo(horizontal_coordinates=coordinates, timestep=datetime.timedelta(microseconds=dt_us))
        forward = target.shape[1]
        aggregator = build_inference_evaluator_aggregator(
            metrics=[TimeMeanMetricConfig(target="denorm")], dataset_info=info, n_ic_steps=1,
            n_forward_steps=forward, initial_time=_times(init_us, [0]).isel(time=0), normalize=dict,
            save_diagnostics=False, enable_time_series=False)
        aggregator.record_initial_condition(PairedData(
            prediction={NAME: torch.tensor(initial_prediction)}, reference={NAME: torch.tensor(initial_target)},
            time=_times(init_us, [0])))
        for start in range(0, forward, WINDOW):
            rows = slice(start, min(start + WINDOW, forward))
            aggregator.record_batch(PairedData(
                prediction={NAME: torch.tensor(prediction[:, rows])}, reference={NAME: torch.tensor(target[:, rows])},
                time=_times(init_us, lead_us[rows])))
        logs = aggregator.get_summary_logs()
    return {"rmse": logs[f"time_mean/rmse/{NAME}"], "bias": logs[f"time_mean/bias/{NAME}"]}


def relative(got, want):
    return abs(got - want) / max(abs(want), ATOL)


def test_time_means_are_aces_own_time_mean_aggregator_on_files_that_start_at_lead_one(tmp_path):
    f = ff.Forecast(ics=3, members=1, leads=5, nlat=13, nlon=22, seed=21, first_lead=1)
    truth, pred = tmp_path / "autoregressive_target.nc", tmp_path / "autoregressive_predictions.nc"
    ff.write_ace(f, truth, pred)
    target, prediction, lat, lon, lead_us, init_us = read_ace_files(truth, pred, NAME)
    assert target.dtype == prediction.dtype == np.float64 and np.isfinite(target).all()
    assert np.isfinite(prediction).all()
    dt_us = 6 * ff.HOUR_US
    assert list(lead_us) == [dt_us * k for k in range(1, 6)]  # ACE's files: lead 1 first
    # The initial condition is not in these files (ACE writes it to initial_condition.nc): a state the time
    # means must not see, far off, so that counting it would show.
    initial = np.full(target[:, :1].shape, 1000.0)
    want = ace_time_mean(target, prediction, initial, initial + 50.0, lat, lon, lead_us, init_us, dt_us)
    assert isinstance(want["rmse"], float) and isinstance(want["bias"], float)

    # The old rule (the first row taken for lead 0 and left out): ACE's numbers without the first forward
    # step, fed to ACE as the initial condition. The data must tell the two apart by far more than RTOL.
    old = ace_time_mean(target[:, 1:], prediction[:, 1:], target[:, :1], prediction[:, :1], lat, lon, lead_us[1:],
                        init_us, dt_us)
    for key in ("rmse", "bias"):
        assert relative(old[key], want[key]) > 1e-3, (key, old[key], want[key])

    worst = {"rmse": 0.0, "bias": 0.0}
    for ranks, mesh in MESHES:
        report = run_gridshard(ranks, mesh, truth, pred, tmp_path / f"{mesh}.json", tmp_path)
        assert report["forecast"]["time_means_rows"] == [0, 1, 2, 3, 4], mesh
        got = report["variables"][NAME]["time_mean"]
        for key in ("rmse", "bias"):
            worst[key] = max(worst[key], relative(got[key], want[key]))
            np.testing.assert_allclose(got[key], want[key], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{mesh}: gridshard time_mean {key} vs ACE's time_mean/{key}/{NAME}")
    off = {key: relative(old[key], want[key]) for key in ("rmse", "bias")}
    print(f"max relative difference to ACE's time_mean: rmse {worst['rmse']:.3g}, bias {worst['bias']:.3g}"
          f" (the old rule's: rmse {off['rmse']:.3g}, bias {off['bias']:.3g})")
