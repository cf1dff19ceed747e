"""One synthetic inference run scored inside ACE's loop protocol, the case test_ace_aggregator.py compares.

    python ace_loop_case.py OUT_DIR --ace          # ACE's own aggregator, one process (float32 or --float64)
    mpirun -n N python ace_loop_case.py OUT_DIR    # gridshard's drop-in (gridshard.ace.use_in_ace), any mesh
    mpirun -n N python ace_loop_case.py OUT_DIR --ace   # with FME_DISTRIBUTED_BACKEND=model: ACE's own on shards

Both build the aggregator through ACE's own `InferenceEvaluatorAggregatorConfig(...).build(...)`, then call
`record_initial_condition`, `record_batch(PairedData)` for windows of 2 and 1 forward steps, `flush_diagnostics` and
`get_summary_logs`, each rank with its box (`get_local_slices`) of its block of samples (2 initial conditions x 4
members, IC-major, as ACE folds them). OUT_DIR gets the diagnostics files and logs.json (rank 0: every scalar, float
hex; the per-window rows too). ACE's near_zero_fraction metric is on (variables "a" and "b", a threshold each,
its maps), its trend (of "a", "b" and a variable the data lacks, which ACE leaves out), its video (of "b") and
an ensemble metric's mean maps (log_mean_maps, images).
Its video has ACE's extended videos on; with --climate its annual metric has monthly reference data (its R2). Under
spatial parallelism a --climate config with a metric gridshard does not know (one a later fme might add) is refused
first, and the message is kept in logs.json; the power spectrum is gridshard's there, of variable "b" only (ACE's
`variables` filter), and of every variable elsewhere. --float64 feeds float64 tensors (ACE's loop in float64),
--masked a variable "sst" missing over land with the dataset's mask of it (ACE's mask provider).
"""
import argparse
import datetime
import json
import os

import cftime
import numpy as np
import torch
import xarray as xr

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--ace", action="store_true", help="ACE's own aggregator (one process)")
parser.add_argument("--float64", action="store_true", help="tensors in float64")
parser.add_argument("--no-zonal-mean", action="store_true", help="leave the zonal mean out")
parser.add_argument("--no-trend", action="store_true",
                    help="leave the trend out (ACE's own on shards forms its RMSE, a collective, on rank 0 only)")
parser.add_argument("--no-video", action="store_true", help="leave the video out")
parser.add_argument("--masked", action="store_true",
                    help="a third variable, 'sst', missing over land, with the dataset's mask_sst (0 there)")
parser.add_argument("--outcomes", help="a folder: each rank writes there what the run raised (or 'ok'), and goes on")
parser.add_argument("--flush-first", action="store_true", help="flush_diagnostics before any record")
parser.add_argument("--uneven", action="store_true", help="the last data rank records one sample fewer")
parser.add_argument("--climate", action="store_true",
                    help="a run of 5.1 years: 62 forward steps of 30 days (windows of 2, 1 and 59) on 11 latitudes, a "
                         "variable 'TS' with an ENSO-like oscillation; ACE's annual, ENSO index and ENSO coefficient "
                         "metrics (its defaults), seasonal and histogram metrics on; its IPO metric off")
parser.add_argument("--ipo", action="store_true",
                    help="a run of 82 years: 1000 forward steps of 30 days (windows of 500) of 'a' and 'sst' (missing "
                         "over land, a decadal tripole in the Pacific); ACE's IPO index metric and its mean and "
                         "time-mean metrics only")
parser.add_argument("--write-files", action="store_true",
                    help="rank 0 also writes the case's target and prediction as the files of a run (OUT/truth.nc, "
                         "OUT/pred.nc: ACE's layout, members folded into sample, the initial condition at lead 0)")
parser.add_argument("--extra-score", action="store_true",
                    help="the drop-in with a score added through the registry alone: test_only_rmse, rmse's definition")
args = parser.parse_args()

if not args.ace:
    import gridshard.ace

    gridshard.ace.use_in_ace()
    if args.extra_score:
        gridshard.register_score("forecast", "test_only_rmse", "rmse", ace_key="mean/test_only_rmse/{var}",
                                 ace_normalized=True, ace_step_log="fields_and_normalized")
elif "OMPI_COMM_WORLD_RANK" in os.environ:  # ACE's own backend over gloo: torch.distributed's env from Open MPI's
    os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
    os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
    os.environ["LOCAL_RANK"] = os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]
from fme.ace.aggregator.inference import (  # noqa: E402
    EnsembleMetricConfig, HistogramMetricConfig, InferenceEvaluatorAggregatorConfig, PowerSpectrumMetricConfig,
    StepMeanMetricConfig, ZonalMeanMetricConfig)
from fme.ace.aggregator.inference.annual import AnnualMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.enso.dynamic_index import EnsoIndexMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.enso.enso_coefficient import EnsoCoefficientMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.ipo.ipo_index import IpoIndexMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.near_zero_fraction import NearZeroFractionMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.seasonal import SeasonalMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.trend import TrendMetricConfig  # noqa: E402
from fme.ace.aggregator.inference.video import VideoMetricConfig  # noqa: E402
from fme.core.wandb import WandB  # noqa: E402

# ACE's video images need moviepy, which the pinned venv leaves out; images are not compared, so a text stands in.
WandB.Video = lambda self, *args, **kwargs: 'a video (not drawn: no moviepy)'
from fme.ace.data_loading.batch_data import PairedData  # noqa: E402
from fme.core.coordinates import LatLonCoordinates  # noqa: E402
from fme.core.dataset_info import DatasetInfo  # noqa: E402
from fme.core.distributed import Distributed  # noqa: E402
from fme.core.spatial_mask_provider import SpatialMaskProvider  # noqa: E402

NLAT, NLON, ICS, MEMBERS = 11 if args.climate or args.ipo else 10, 16, 2, 4
FORWARD = 1000 if args.ipo else 62 if args.climate else 3
STEP = datetime.timedelta(days=30) if args.climate or args.ipo else datetime.timedelta(hours=6)
WINDOWS = ((1, 500), (501, 500)) if args.ipo else ((1, 2), (3, 1), (4, 59)) if args.climate else ((1, 2), (3, 1))
NAMES = ["a", "sst"] if args.ipo else ["a", "b"] + (["sst"] if args.masked else []) + (["TS"] if args.climate else [])
dtype = torch.float64 if args.float64 else torch.float32
rng = np.random.default_rng(3)
lat = np.linspace(-81.0, 81.0, NLAT).astype(np.float32)
lon = (np.arange(NLON) * 360.0 / NLON).astype(np.float32)
la = np.deg2rad(lat)[:, None]
lo = np.deg2rad(lon)[None, :]
# A continent, a polar cap and a coastal point: the land of "sst" (its mask is 0 there).
LAND = np.zeros((NLAT, NLON), dtype=bool)
LAND[3:7, 4:9] = True
LAND[NLAT - 1, :] = True
LAND[1, 12] = True
samples = ICS * MEMBERS
truth, pred = {}, {}
for k, name in enumerate(NAMES):
    base = 250.0 + 40.0 * k + 20.0 * np.cos(la) * np.sin(2 * lo + k)
    t = base[None, None] + rng.normal(0, 1.0, (ICS, 1 + FORWARD, NLAT, NLON))
    if name == "TS":  # an ENSO-like oscillation of 3.5 years in the tropical Pacific, each initial condition's phase
        years = np.arange(1 + FORWARD)[None, :] * STEP.days / 365.25 + 0.7 * np.arange(ICS)[:, None]
        pacific = np.exp(-(np.rad2deg(la) / 10.0) ** 2) * np.exp(-((np.rad2deg(lo) - 215.0) / 40.0) ** 2)
        t = t + 1.5 * np.sin(2 * np.pi * years / 3.5)[:, :, None, None] * pacific[None, None]
    if name == "sst" and args.ipo:  # a tripole of a 20-year period: T2 in phase, T1 and T3 against it
        years = np.arange(1 + FORWARD)[None, :] * STEP.days / 365.25 + 3.0 * np.arange(ICS)[:, None]
        tripole = np.where(np.abs(np.rad2deg(la)) < 12, 1.0, np.where(np.abs(np.rad2deg(la)) < 50, -0.5, 0.0))
        tripole = tripole * np.exp(-((np.rad2deg(lo) - 200.0) / 60.0) ** 2)
        t = t + 0.8 * np.sin(2 * np.pi * years / 20.0)[:, :, None, None] * tripole[None, None]
    t = np.repeat(t, MEMBERS, axis=0)  # the same target for every member of an initial condition
    p = t + 0.3 + rng.normal(0, 0.7, t.shape) * np.sqrt(np.arange(1 + FORWARD))[None, :, None, None]
    if name == "b":
        t[:, :, 0, :3] = np.nan  # a few missing target points
        p[:, :, 0, :3] = np.nan
    if name == "sst" and not args.ipo:  # missing over land in both, where the dataset's mask is 0
        t[:, :, LAND] = np.nan
        p[:, :, LAND] = np.nan
    truth[name], pred[name] = t.astype(np.float32), p.astype(np.float32)
means = {n: 260.0 + 10 * k for k, n in enumerate(NAMES)}
stds = {n: 15.0 + 5 * k for k, n in enumerate(NAMES)}

import contextlib  # noqa: E402

stack = contextlib.ExitStack()
stack.enter_context(Distributed.context())  # as ACE's entry points run, for the whole case
dist = Distributed.get_instance()
d_rank = dist.data_parallel_rank
d_size = dist.total_data_parallel_ranks
local = samples // d_size
rows, cols = dist.get_local_slices((NLAT, NLON))
mine = slice(d_rank * local, (d_rank + 1) * local)


def tensors(fields, steps):
    return {n: torch.from_numpy(np.ascontiguousarray(v[mine, steps, rows, cols])).to(dtype) for n, v in fields.items()}


def normalize(data):
    return {n: (v - means[n]) / stds[n] for n, v in data.items() if n in means}


t0 = cftime.DatetimeJulian(2000, 1, 1)


def times(first, n):
    row = [t0 + STEP * (first + k) for k in range(n)]
    return xr.DataArray([row] * (mine.stop - mine.start), dims=["sample", "time"])


masks = SpatialMaskProvider({"mask_sst": torch.from_numpy((~LAND).astype(np.float32)).to(dtype)}) \
    if args.masked else None
if args.ipo:  # sst missing over land where the IPO's NaN-skipping means meet it, no mask (ACE's IPO takes none)
    for fields in (truth, pred):
        fields["sst"][:, :, LAND] = np.nan
info = DatasetInfo(horizontal_coordinates=LatLonCoordinates(lat=torch.from_numpy(lat), lon=torch.from_numpy(lon)),
                   timestep=STEP, spatial_mask_provider=masks)
build = dict(dataset_info=info, n_ic_steps=1, n_forward_steps=FORWARD, initial_time=times(0, 1).isel(time=0),
             normalize=normalize, output_dir=args.out, n_ensemble_per_ic=MEMBERS)
out = {"refused": None}
spatial = not args.ace and getattr(dist._distributed, "distributed", None) is not None and \
    dist._distributed.distributed.has_spatial_parallelism
reference = None
if args.climate:  # ACE's monthly reference data of its annual R2: 2 samples of 2000-2005 of "a" and "TS", float32
    reference = os.path.join(args.out, f"reference-{dist.rank}.nc")  # one a rank: no rank reads one being written
    months = [cftime.DatetimeJulian(2000 + k // 12, 1 + k % 12, 15) for k in range(72)]
    days = np.array([(cftime.DatetimeJulian(2000 + (k + 1) // 12, 1 + (k + 1) % 12, 1) -
                      cftime.DatetimeJulian(2000 + k // 12, 1 + k % 12, 1)).days for k in range(72)], dtype=np.float32)
    ref_rng = np.random.default_rng(11)
    fields = {n: (truth[n][0, 1, None, None] + 0.4 * np.sin(np.arange(72) / 9.0)[None, :, None, None] +
                  ref_rng.normal(0, 0.5, (2, 72, NLAT, NLON))).astype(np.float32) for n in ("a", "TS")}
    xr.Dataset({**{n: (("sample", "time", "lat", "lon"), v) for n, v in fields.items()},
                "counts": (("sample", "time"), np.stack([days, days]))},
               coords={"valid_time": (("sample", "time"), [months, months]),
                       "lat": ("lat", lat, {"units": "degrees_north"}),
                       "lon": ("lon", lon, {"units": "degrees_east"})}).to_netcdf(reference)


class LaterMetric:
    """A metric of a later fme, which gridshard does not know: ACE's video under another type."""
    enabled = strict = True

    def get_name(self):
        return "later"

    def build(self, ctx):
        return VideoMetricConfig(enabled=True).build(ctx)


if spatial and args.climate:  # a metric gridshard does not know is refused on shards
    later = InferenceEvaluatorAggregatorConfig()
    known = later._get_metrics
    later._get_metrics = lambda: known() + [LaterMetric()]
    try:
        later.build(**build)
    except ValueError as error:
        out["refused"] = str(error)
config = InferenceEvaluatorAggregatorConfig(
    step_means=[StepMeanMetricConfig(step=2, target="denorm"), StepMeanMetricConfig(step=2, target="norm")],
    ensembles=[EnsembleMetricConfig(step=2, log_mean_maps=True), EnsembleMetricConfig(step=3, target="norm")],
    power_spectrum=PowerSpectrumMetricConfig(variables=NAMES if args.ace or not spatial else ["b"]),
    zonal_mean=ZonalMeanMetricConfig(enabled=not args.no_zonal_mean),
    # thresholds inside each variable's range, "a"'s its own; "b"'s missing points are not at or below
    near_zero_fraction=NearZeroFractionMetricConfig(enabled=True, variables=["a", "b"], eps=290.0,
                                                    per_variable_eps={"a": 250.0}, include_maps=True),
    trend=TrendMetricConfig(enabled=not args.no_trend, variables=["a", "b", "absent"]),
    video=VideoMetricConfig(enabled=not args.no_video, variables=["b"], enable_extended_videos=True),
    # ACE's default; a short run drops it. The climate run's has monthly reference data (ACE's R2)
    annual=AnnualMetricConfig(variables=None if args.climate else ["a"], reference_data=reference),
    seasonal=SeasonalMetricConfig(enabled=args.climate, variables=["a", "b"] + (["sst"] if args.masked else [])),
    enso_index=EnsoIndexMetricConfig(),  # ACE's default; a short run drops it
    enso_coefficient=EnsoCoefficientMetricConfig(),  # ACE's default; a run of 5 years or less drops it
    ipo_index=IpoIndexMetricConfig(enabled=not args.climate),
    # every variable's histogram over ACE's windows, the percentiles of two
    histogram=HistogramMetricConfig(enabled=args.climate, percentile_variables=["b", "TS"] if args.climate else None))
if args.ipo:  # ACE's IPO index and the metrics it cannot turn off
    config = InferenceEvaluatorAggregatorConfig(
        step_means=[], ensembles=[], power_spectrum=PowerSpectrumMetricConfig(enabled=False),
        zonal_mean=ZonalMeanMetricConfig(enabled=False), annual=AnnualMetricConfig(enabled=False),
        enso_index=EnsoIndexMetricConfig(enabled=False), enso_coefficient=EnsoCoefficientMetricConfig(enabled=False),
        ipo_index=IpoIndexMetricConfig())
aggregator = config.build(**build)
if args.uneven and d_rank == d_size - 1:  # this rank's samples are not whole ensembles
    mine = slice(mine.start, mine.stop - 1)


def run():
    if args.flush_first:
        aggregator.flush_diagnostics()
    ic = tensors(truth, slice(0, 1))
    rows = list(aggregator.record_initial_condition(PairedData(prediction=tensors(pred, slice(0, 1)), reference=ic,
                                                               time=times(0, 1))))
    for first, n in WINDOWS:
        window = slice(first, first + n)
        data = PairedData(prediction=tensors(pred, window), reference=tensors(truth, window), time=times(first, n),
                          n_ensemble=MEMBERS)
        rows += aggregator.record_batch(data)
    try:
        aggregator.flush_diagnostics()
    except ValueError as error:  # ACE's own on shards: its tiles against the global coordinates (kept, not raised)
        if not args.ace:
            raise
        out["flush_error"] = str(error).splitlines()[0]
    return rows, aggregator.get_summary_logs()


if args.outcomes:  # a fault case: what each rank raised, then the end (the launcher sees every rank return)
    try:
        run()
        outcome = "ok"
    except Exception as error:  # noqa: BLE001 - recorded for the test
        outcome = f"{type(error).__name__}: {error}"
    with open(os.path.join(args.outcomes, f"rank-{dist.rank}.txt"), "w") as f:
        f.write(outcome)
    stack.close()
    raise SystemExit(0)
rows_out, summary = run()


def scalar(value):
    try:
        return float(np.asarray(value, dtype=np.float64)).hex()
    except (TypeError, ValueError):
        return None


out["summary"] = {k: scalar(v) for k, v in summary.items() if scalar(v) is not None}
out["images"] = sorted(k for k, v in summary.items() if scalar(v) is None)  # the keys of ACE's images
out["rows"] = [{k: scalar(v) for k, v in row.items() if scalar(v) is not None} for row in rows_out]
if dist.is_root():
    with open(os.path.join(args.out, "logs.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
if args.write_files and dist.is_root():  # the run's files, for gridshard eval (every sample starts at t0)
    import netCDF4

    for file, fields in (("truth.nc", truth), ("pred.nc", pred)):
        with netCDF4.Dataset(os.path.join(args.out, file), "w") as f:
            f.createDimension("sample", samples)
            f.createDimension("time", 1 + FORWARD)
            f.createDimension("lat", NLAT)
            f.createDimension("lon", NLON)
            f.createVariable("lat", "f4", ("lat",), fill_value=False).setncatts({"units": "degrees_north"})
            f["lat"][:] = lat
            f.createVariable("lon", "f4", ("lon",), fill_value=False).setncatts({"units": "degrees_east"})
            f["lon"][:] = lon
            lead = f.createVariable("time", "f8", ("time",), fill_value=False)
            lead.units = "days"
            lead[:] = np.arange(1 + FORWARD) * STEP.total_seconds() / 86400.0
            init = f.createVariable("init_time", "f8", ("sample",), fill_value=False)
            init.units, init.calendar = "days since 2000-01-01", "julian"
            init[:] = np.zeros(samples)
            for name, values in fields.items():
                v = f.createVariable(name, "f4", ("sample", "time", "lat", "lon"), fill_value=np.float32(np.nan))
                v.coordinates = "init_time"
                v[:] = values
stack.close()
