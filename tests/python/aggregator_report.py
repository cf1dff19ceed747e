"""Under mpirun: a forecast file pair (prediction (sample, member, time, lat, lon), truth (sample, time, lat, lon))
scored through gridshard.Aggregator on shards, window by window, each data rank its block of initial conditions;
rank 0 writes every per-lead score, time mean, zonal profile and map as JSON (float hex), for comparison with
`gridshard eval` on the same files.

    mpirun -n 4 python3 aggregator_report.py OUT.json --mesh 1x2x2 --truth T.nc --pred P.nc [--window 2]
        [--normalize MEANS.nc STDS.nc]   # also the normalised scores under ACE's keys, and their channel mean
        [--spectrum]                     # also ACE's power spectra and their norm biases
        [--near-zero JSON]               # also ACE's near-zero fractions (its config fields as JSON) and their maps
        [--trend]                        # also ACE's trend, the times from the prediction's init_time and time
        [--video]                        # also ACE's video
        [--seasonal]                     # also ACE's seasonal means, the dates from init_time and time
        [--annual SECONDS]               # also ACE's annual means of a run of this timestep
        [--nino34]                       # also ACE's Nino 3.4 index of sst
        [--histogram]                    # also ACE's histograms, over ACE's windows: lead 0, then --window leads each
        [--ipo]                          # also ACE's IPO index of sst
        [--enso-coefficient-index FILE]  # also ACE's ENSO coefficient against the index in FILE
"""
import argparse
import json

import netCDF4
import numpy as np
from mpi4py import MPI

import gridshard

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--mesh", required=True)
parser.add_argument("--split", default="balanced")
parser.add_argument("--truth", required=True)
parser.add_argument("--pred", required=True)
parser.add_argument("--window", type=int, default=2)
parser.add_argument("--torch", action="store_true", help="record torch tensors instead of numpy arrays")
parser.add_argument("--normalize", nargs=2, default=None)
parser.add_argument("--spectrum", action="store_true")
parser.add_argument("--near-zero", type=json.loads, default=None)
parser.add_argument("--trend", action="store_true")
parser.add_argument("--video", action="store_true")
parser.add_argument("--extended-video", action="store_true", help="with --video, ACE's extended videos too")
parser.add_argument("--seasonal", action="store_true")
parser.add_argument("--nino34", action="store_true", help="ACE's Nino 3.4 index of the variables ACE names")
parser.add_argument("--ipo", action="store_true", help="ACE's IPO index of sst")
parser.add_argument("--histogram", action="store_true", help="ACE's histograms, the windows ACE's")
parser.add_argument("--annual", type=float, default=None, help="ACE's annual means of a run of this timestep (s)")
parser.add_argument("--enso-coefficient-index", help="ACE's ENSO coefficient against the index in this file")
parser.add_argument("--annual-reference", help="ACE's monthly reference data of the annual means (its R2)")
args = parser.parse_args()
data, h, w = map(int, args.mesh.split("x"))
dist = gridshard.Distributed(spatial_parallelism=(h, w), split=args.split)

with netCDF4.Dataset(args.truth) as t, netCDF4.Dataset(args.pred) as p:
    names = [n for n, v in p.variables.items() if v.ndim == 5]
    truth = {n: np.asarray(t[n][:].filled(np.nan), dtype=np.float32) for n in names}
    pred = {n: np.asarray(p[n][:].filled(np.nan), dtype=np.float32) for n in names}
    lat = np.asarray(t["lat"][:], dtype=np.float64)
    timed = args.trend or args.seasonal or args.annual or args.nino34 or args.ipo
    if timed:  # each (initial condition, lead)'s valid date, by cftime in the files' calendar
        import cftime

        init, lead = p["init_time"], np.asarray(p["time"][:], dtype=np.int64)
        valid = np.asarray(init[:], dtype=np.int64)[:, None] + lead[None, :]
        pair_times = np.asarray(cftime.num2date(valid.ravel(), init.units, init.calendar)).reshape(valid.shape)
    if args.enso_coefficient_index:  # the index per (initial condition, lead), by the library's rule
        import cftime

        with netCDF4.Dataset(args.enso_coefficient_index) as f:
            index_time = f["time"]
            index_calendar = index_time.calendar
            index_dates = [(d.year, d.month, d.day, d.hour, d.minute, float(d.second)) for d in
                           cftime.num2date(index_time[:], index_time.units, index_time.calendar)]
            values = [float(v) for v in next(v for n, v in f.variables.items() if n != "time")[:]]
        init, lead_us = p["init_time"], np.asarray(p["time"][:], dtype=np.int64)
        step_us = int(lead_us[1] - lead_us[0])
        initial = [(d.year, d.month, d.day, d.hour, d.minute, float(d.second))
                   for d in cftime.num2date(init[:], init.units, init.calendar)]
        series = gridshard.sample_index_series(index_dates, values, index_calendar, initial, init.calendar,
                                               step_us / 1e6, int(lead_us[-1] // step_us))
        regression_index = series[:, lead_us // step_us]
ics, members, leads, nlat, nlon = pred[names[0]].shape
# This data rank's block of initial conditions (uneven where they do not split evenly).
blocks = np.array_split(np.arange(ics), data)
mine = blocks[dist.data_parallel_rank]
first = int(mine[0]) if len(mine) else 0
rows, cols = dist.get_local_slices((nlat, nlon))
annual_reference = __import__("gridshard.ace.calendar", fromlist=["annual_reference"]).annual_reference
aggregator = gridshard.Aggregator(dist, names, lat, nlon, ics, leads, members=members,
                                  first_initial_condition=first, local_initial_conditions=len(mine),
                                  normalize=args.normalize, spectrum=True if args.spectrum else None,
                                  near_zero_fraction=args.near_zero, trend=args.trend or None,
                                  video={"enable_extended_videos": args.extended_video} if args.video else None,
                                  seasonal=args.seasonal or None,
                                  annual={"timestep": args.annual, "reference": annual_reference(
                                      args.annual_reference, names, (rows, cols))} if args.annual else None,
                                  nino34_index={"variables": [n for n in names if n in ("sst", "TS")]}
                                  if args.nino34 else None, histogram=args.histogram or None,
                                  ipo_index={"variables": ["sst"]} if args.ipo else None,
                                  enso_coefficient={"index": regression_index[first:first + len(mine)]}
                                  if args.enso_coefficient_index else None)
convert = (lambda a: __import__("torch").from_numpy(a)) if args.torch else (lambda a: a)
windows = []
# ACE's windows with histograms (the initial condition, then forward steps --window at a time), else --window each
starts = [0] + list(range(1, leads, args.window)) if args.histogram else list(range(0, leads, args.window))
for start, stop in zip(starts, starts[1:] + [leads]):
    target = {n: convert(np.ascontiguousarray(truth[n][first:first + len(mine), start:stop, rows, cols]))
              for n in names}
    prediction = {n: convert(np.ascontiguousarray(pred[n][first:first + len(mine), :, start:stop, rows, cols]))
                  for n in names}
    aggregator.record(target, prediction, first_lead=start,
                      times=pair_times[first:first + len(mine), start:stop] if timed else None)
    windows.append((start, aggregator.lead_scores(start, stop)))
scores = aggregator.finish()
# Each window's time series as lead_scores gave it once recorded: the finished per-lead scores, bit for bit.
for start, window in windows:
    for name, series in window.items():
        for key, values in series.items():
            finished = scores[name]["regions"]["global"]["per_lead"][key][start:start + len(values), 0]
            assert np.array_equal(values, finished, equal_nan=True), (name, key, start)


def hexes(values):
    return [float(v).hex() for v in np.asarray(values).ravel()]


spectrum_keys = {s["key"] for s in gridshard.registered_scores() if s["family"] == "power_spectrum"}
if MPI.COMM_WORLD.rank == 0:
    out = {}
    for name, channel in scores.items():
        region = channel["regions"]["global"]
        out[name] = {"per_step": {k: hexes(v) for k, v in region["per_lead"].items()},
                     "time_mean": {k: float(v).hex() for k, v in region["time_means"].items()
                                   if k not in spectrum_keys},
                     "profiles": {k: hexes(v) for k, v in channel["profiles"].items()},
                     "gen_map": hexes(channel["prediction_map"]), "bias_map": hexes(channel["bias_map"])}
        if args.spectrum:
            out[name]["power_spectrum"] = {k: float(v).hex() for k, v in region["time_means"].items()
                                           if k in spectrum_keys}
            out[name]["spectra"] = {k: hexes(v) for k, v in channel["spectra"].items()}
        if channel.get("video") is not None:
            out[name]["video"] = {k: hexes(v) for k, v in channel["video"].items()}
        for index in ("nino34_index", "ipo_index"):
            if channel.get(index) is not None:
                out[name][index] = {k: hexes(v) for k, v in channel[index].items() if k in ("prediction", "target")}
        if channel.get("histogram") is not None:
            out[name]["histogram"] = {k: hexes(v) if "edges" in k else [int(c) for c in v]
                                      for k, v in channel["histogram"].items() if k != "windows_left_out"}
        if channel.get("annual") is not None:
            out[name]["annual"] = {k: hexes(v) for k, v in channel["annual"].items()}
        if channel.get("seasonal") is not None:
            out[name]["seasonal"] = {k: hexes(v) for k, v in channel["seasonal"].items()}
        if channel.get("trend_maps") is not None:
            out[name]["trend_maps"] = {k: hexes(v) for k, v in channel["trend_maps"].items()}
        if channel.get("enso_coefficient_maps") is not None:
            out[name]["enso_coefficient_maps"] = {k: hexes(v) for k, v in channel["enso_coefficient_maps"].items()}
        if channel.get("near_zero_maps") is not None:
            out[name]["near_zero_maps"] = {k: hexes(v) for k, v in channel["near_zero_maps"].items()}
        if args.normalize:
            out.setdefault("normalized", {}).update({k: hexes(v) for k, v in channel["normalized"]["ace_keys"].items()})
    if args.normalize:
        out["normalized"]["time_mean_norm/rmse/channel_mean"] = hexes(gridshard.Aggregator.normalized_channel_mean(
            scores))
    with open(args.out, "w") as f:
        json.dump(out, f)
else:
    assert all(c["prediction_map"] is None for c in scores.values())
