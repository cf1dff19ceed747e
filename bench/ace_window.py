"""One inference window recorded by ACE's own inference aggregator and by gridshard's drop-in, side by side.

    .ace/venv/bin/python bench/ace_window.py --out RESULT.json [--repetitions 3] [--build-dir build]

Both sides run at a 1x2x2 mesh (4 ranks: 1 data x 2 lat x 2 lon) under mpirun, on CPU tensors:

- ace:       ACE's ModelTorchDistributed over gloo (FME_DISTRIBUTED_BACKEND=model, FME_FORCE_CPU=1), torch.distributed
             env derived from Open MPI's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT);
- gridshard: gridshard.ace.use_in_ace() before fme's aggregator is imported (FME_DISTRIBUTED_BACKEND=gridshard).

The case: a 721 x 1440 grid (lat 90..-90 inclusive, lon 0..359.75), 4 variables, 2 samples, float32, built through
`InferenceEvaluatorAggregatorConfig(step_means=[], ensembles=[], power_spectrum=disabled).build(...)` with
n_forward_steps = 4 * repetitions, one `record_initial_condition`, then `repetitions` windows of 4 forward steps.
Each rank holds only its box (`get_local_slices`). Only `record_batch` is timed: after a barrier, per rank; a
window's time is the slowest rank's; the figure is the median over windows. Peak RSS is each rank's VmHWM
(/proc/self/status) at the end of the run (the sides are separate mpirun runs, so their peaks don't mix); the
VmHWM before the aggregator is built is kept too (imports and backend set-up).

With `--climate` the case is a climate run's window instead: 30-day steps of a run declared 62 steps long (5.1 years,
so that ACE's build keeps its annual, ENSO index and ENSO coefficient metrics), variable v0 named `sst`, and every
climate family on besides those: seasonal, trend, near-zero fraction (with maps), histogram and video (of `sst` alone,
its extended videos too: a video keeps global maps per step of the run); ACE's side is its own aggregator in one
process on the whole (gathered) tensors, since ACE's climate families do not run on shards, against gridshard's
drop-in at 1x2x2. ACE's IPO index needs a run of 80 years, whose video and memory this bench cannot hold: it is left
out. The figures are `ace_climate_window_speedup_1x2x2` and `ace_climate_window_memory_ratio_1x2x2` (gridshard's
largest rank's peak over ACE's one process's).

The driver launches mpirun for each side, re-invoking this script with `--side ace|gridshard --work DIR`, and writes
`ace_window_speedup_1x2x2` (ACE's median s/window / gridshard's) and `ace_window_memory_ratio_1x2x2`
(max over ranks of gridshard's peak RSS / ACE's peak RSS on the same rank) with the raw figures. A side that fails
keeps its error (the tail of its output) in the JSON and the other is reported alone.
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

NLAT, NLON, NVARS, SAMPLES, WINDOW = 721, 1440, 4, 2, 4
CLIMATE_FORWARD_STEPS = 62  # --climate: 5.1 years of 30-day steps
MESH = (2, 2)
PYTHON = sys.executable  # ACE's venv (make test-ace), which runs this script
BUILD_PYTHON = str(pathlib.Path(__file__).resolve().parent.parent / "build" / "python")  # --build-dir changes it


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def worker(args):
    side = args.side
    if side == "gridshard":
        import gridshard.ace

        gridshard.ace.use_in_ace()
    else:  # ACE's own backend: torch.distributed's env from Open MPI's
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
        os.environ["LOCAL_RANK"] = os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]
    import contextlib
    import datetime

    import cftime
    import numpy as np
    import torch
    import xarray as xr
    from fme.ace.aggregator.inference import InferenceEvaluatorAggregatorConfig, PowerSpectrumMetricConfig
    from fme.ace.aggregator.inference.main import (HistogramMetricConfig, NearZeroFractionMetricConfig,
                                                   SeasonalMetricConfig, TrendMetricConfig, VideoMetricConfig)
    from fme.ace.data_loading.batch_data import PairedData
    from fme.core.coordinates import LatLonCoordinates
    from fme.core.dataset_info import DatasetInfo
    from fme.core.distributed import Distributed

    torch.set_num_threads(1)
    reps = args.repetitions
    nlat, nlon = args.nlat, args.nlon
    stack = contextlib.ExitStack()
    stack.enter_context(Distributed.context())
    dist = Distributed.get_instance()
    rank = dist.rank
    backend = type(dist._distributed).__name__
    assert dist.has_spatial_parallelism or args.climate, backend
    rows, cols = dist.get_local_slices((nlat, nlon))
    d_rank, d_size = dist.data_parallel_rank, dist.total_data_parallel_ranks
    local = SAMPLES // d_size
    lat = np.linspace(90.0, -90.0, nlat).astype(np.float32)
    lon = (np.arange(nlon) * 360.0 / nlon).astype(np.float32)
    la = np.deg2rad(lat[rows])[:, None]
    lo = np.deg2rad(lon[cols])[None, :]
    names = ["sst" if k == 0 and args.climate else f"v{k}" for k in range(NVARS)]
    means = {n: 260.0 + 10 * k for k, n in enumerate(names)}
    stds = {n: 15.0 + 5 * k for k, n in enumerate(names)}
    bases = {n: (250.0 + 40.0 * k + 20.0 * np.cos(la) * np.sin(2 * lo + k)).astype(np.float32)
             for k, n in enumerate(names)}

    def fields(first, n):
        """Truth and prediction of this rank's box, steps first..first+n-1 (the same on both sides)."""
        rng = np.random.default_rng([rank, d_rank, first])
        shape = (local, n) + bases[names[0]].shape
        truth, pred = {}, {}
        for name in names:
            t = bases[name] + rng.standard_normal(shape, dtype=np.float32)
            p = t + 0.3 + 0.7 * rng.standard_normal(shape, dtype=np.float32)
            truth[name], pred[name] = torch.from_numpy(t), torch.from_numpy(p)
        return truth, pred

    def normalize(data):
        return {n: (v - means[n]) / stds[n] for n, v in data.items() if n in means}

    t0 = cftime.DatetimeJulian(2000, 1, 1)

    step = datetime.timedelta(days=30) if args.climate else datetime.timedelta(hours=6)

    def times(first, n):
        row = [t0 + step * (first + k) for k in range(n)]
        return xr.DataArray([row] * local, dims=["sample", "time"])

    info = DatasetInfo(horizontal_coordinates=LatLonCoordinates(lat=torch.from_numpy(lat), lon=torch.from_numpy(lon)),
                       timestep=step)
    out_dir = os.path.join(args.work, f"diag_{rank}")
    os.makedirs(out_dir, exist_ok=True)
    hwm_before = _status_kib("VmHWM")
    config = InferenceEvaluatorAggregatorConfig(step_means=[], ensembles=[],
                                                power_spectrum=PowerSpectrumMetricConfig(enabled=False))
    forward_steps = WINDOW * reps
    if args.climate:  # every climate family ACE builds for a run of 5.1 years, but the IPO index (80 years)
        config = InferenceEvaluatorAggregatorConfig(
            step_means=[], ensembles=[], power_spectrum=PowerSpectrumMetricConfig(enabled=False),
            seasonal=SeasonalMetricConfig(enabled=True), trend=TrendMetricConfig(enabled=True),
            near_zero_fraction=NearZeroFractionMetricConfig(enabled=True, variables=names, eps=255.0,
                                                            include_maps=True),
            histogram=HistogramMetricConfig(enabled=True),
            video=VideoMetricConfig(enabled=True, variables=["sst"], enable_extended_videos=True))
        forward_steps = max(forward_steps, CLIMATE_FORWARD_STEPS)
    aggregator = config.build(dataset_info=info, n_ic_steps=1, n_forward_steps=forward_steps,
                              initial_time=times(0, 1).isel(time=0), normalize=normalize, output_dir=out_dir)
    truth, pred = fields(0, 1)
    aggregator.record_initial_condition(PairedData(prediction=pred, reference=truth, time=times(0, 1)))
    del truth, pred
    seconds = []
    for w in range(reps):
        first = 1 + WINDOW * w
        truth, pred = fields(first, WINDOW)
        data = PairedData(prediction=pred, reference=truth, time=times(first, WINDOW))
        dist.barrier()
        profiler = None
        if args.profile and w == reps - 1:  # the last window, under cProfile (timing not kept comparable)
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        start = time.perf_counter()
        aggregator.record_batch(data)
        seconds.append(time.perf_counter() - start)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(args.profile, f"{side}_rank_{rank}.prof"))
        del data, truth, pred
    dist.barrier()
    mine = {"rank": rank, "backend": backend, "box": [rows.start, rows.stop, cols.start, cols.stop],
            "seconds": seconds, "vmhwm_kib": _status_kib("VmHWM"), "vmhwm_before_build_kib": hwm_before}
    with open(os.path.join(args.work, f"rank_{rank}.json"), "w") as f:
        json.dump(mine, f)
    stack.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_side(side, args):
    work = tempfile.mkdtemp(prefix=f"ace_window_{side}_")
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1", FME_FORCE_CPU="1",
               TMPDIR=tmp, FME_DISTRIBUTED_H=str(MESH[0]), FME_DISTRIBUTED_W=str(MESH[1]),
               PYTHONPATH=BUILD_PYTHON + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
    n = MESH[0] * MESH[1]
    if side == "ace" and args.climate:  # ACE's own, one process, the whole tensors
        env.update(FME_DISTRIBUTED_BACKEND="none")
        n = 1
    elif side == "ace":
        env.update(FME_DISTRIBUTED_BACKEND="model", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    else:
        env.update(FME_DISTRIBUTED_BACKEND="gridshard")
    cmd = ["mpiexec", "-n", str(n), "--oversubscribe", PYTHON, os.path.abspath(__file__), "--side", side,
           "--work", work, "--repetitions", str(args.repetitions), "--nlat", str(args.nlat), "--nlon", str(args.nlon)]
    if args.climate:
        cmd.append("--climate")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        cmd += ["--profile", os.path.abspath(args.profile)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=args.timeout)
        rc, text = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        output = e.stdout or ""
        rc, text = "timeout", output.decode(errors="replace") if isinstance(output, bytes) else output
    wall = time.perf_counter() - start
    ranks = []
    for r in range(n):
        path = os.path.join(work, f"rank_{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                ranks.append(json.load(f))
    result = {"returncode": rc, "wall_s": wall}
    if rc != 0 or len(ranks) != n:
        result["error"] = text[-4000:]
    else:
        per_window = [max(r["seconds"][w] for r in ranks) for w in range(args.repetitions)]
        ordered, half = sorted(per_window), len(per_window) // 2
        median = ordered[half] if len(ordered) % 2 else 0.5 * (ordered[half - 1] + ordered[half])
        result.update(seconds_per_window=per_window, median_s=median,
                      backend=ranks[0]["backend"], ranks=ranks,
                      peak_rss_mib_per_rank=[r["vmhwm_kib"] / 1024 for r in ranks],
                      peak_rss_before_build_mib_per_rank=[r["vmhwm_before_build_kib"] / 1024 for r in ranks])
    shutil.rmtree(work, ignore_errors=True)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="RESULT.json (driver)")
    p.add_argument("--build-dir", help="the build folder whose python/ gridshard is imported from (default build)")
    p.add_argument("--repetitions", type=int, default=3, help="windows timed (median)")
    p.add_argument("--side", choices=["ace", "gridshard"], help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--nlat", type=int, default=NLAT, help=argparse.SUPPRESS)
    p.add_argument("--nlon", type=int, default=NLON, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=1200, help="seconds per side")
    p.add_argument("--sides", default="ace,gridshard", help=argparse.SUPPRESS)
    p.add_argument("--profile", help="DIR: cProfile the last window of each rank into DIR/SIDE_rank_R.prof")
    p.add_argument("--climate", action="store_true", help="a climate run's window with every climate family on")
    args = p.parse_args()
    if args.build_dir:
        global BUILD_PYTHON
        BUILD_PYTHON = str(pathlib.Path(args.build_dir).resolve() / "python")
    if args.side:
        return worker(args)
    if not args.out:
        p.error("--out is required")
    result = {"case": {"nlat": args.nlat, "nlon": args.nlon, "variables": NVARS, "samples": SAMPLES,
                       "window_forward_steps": WINDOW, "dtype": "float32", "mesh": "1x2x2",
                       "repetitions": args.repetitions}}
    for side in args.sides.split(","):
        result[side] = run_side(side, args)
        print(side, {k: v for k, v in result[side].items() if k != "ranks"}, flush=True)
    ace, gs = result.get("ace", {}), result.get("gridshard", {})
    name = "ace_climate_window" if args.climate else "ace_window"
    if args.climate:
        result["case"].update(forward_steps_declared=CLIMATE_FORWARD_STEPS, ace_mesh="1x1x1 (one process)",
                              families=["annual", "enso_index", "enso_coefficient", "seasonal", "trend",
                                        "near_zero_fraction", "histogram", "video (sst)"])
    if "median_s" in ace and "median_s" in gs:
        result[f"{name}_speedup_1x2x2"] = ace["median_s"] / gs["median_s"]
        result[f"{name}_memory_ratio_1x2x2"] = (
            max(gs["peak_rss_mib_per_rank"]) / ace["peak_rss_mib_per_rank"][0] if args.climate else
            max(g / a for g, a in zip(gs["peak_rss_mib_per_rank"], ace["peak_rss_mib_per_rank"])))
    result[f"{name}_ace_median_s"] = ace.get("median_s")
    result[f"{name}_gridshard_median_s"] = gs.get("median_s")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k.startswith(name)}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
