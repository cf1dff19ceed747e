"""Under mpirun: the ensemble and anomaly scores of a one-initial-condition forecast file pair through
gridshard.Distributed on shards, per lead time, written by rank 0 as JSON (float hex), for comparison with
`gridshard eval` on the same files.

    mpirun -n 4 python3 ensemble_report.py OUT.json --mesh 1x2x2 --truth T.nc --pred P.nc --clim C.nc
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
parser.add_argument("--clim", required=True)
parser.add_argument("--var", default="t2m")
args = parser.parse_args()
data, h, w = map(int, args.mesh.split("x"))
dist = gridshard.Distributed(spatial_parallelism=(h, w), split=args.split)

with netCDF4.Dataset(args.truth) as t, netCDF4.Dataset(args.pred) as p, netCDF4.Dataset(args.clim) as c:
    # float32 data in float64 (exactly): the tool forms these scores in double from the values it reads
    truth = np.asarray(t[args.var][:].filled(np.nan), dtype=np.float64)  # (time, lat, lon)
    members = np.asarray(p[args.var][:].filled(np.nan), dtype=np.float64)  # (number, time, lat, lon)
    clim = np.asarray(c[args.var][:], dtype=np.float64)  # (lat, lon)
    lat = np.asarray(t["lat"][:], dtype=np.float64)
nlat, nlon = truth.shape[-2:]
lat_slice, lon_slice = dist.get_local_slices((nlat, nlon))
weights = gridshard.spherical_area_weights(lat, nlon)[lat_slice, lon_slice]
scores = {name: [] for name in ("crps", "fair_crps", "spread", "ensemble_mean_rmse", "spread_skill_ratio", "acc")}
for lead in range(truth.shape[0]):
    y = truth[lead][lat_slice, lon_slice]
    x = np.ascontiguousarray(members[:, lead][:, lat_slice, lon_slice])
    scores["crps"].append(dist.crps(y, x, weights))
    scores["fair_crps"].append(dist.crps(y, x, weights, fair=True))
    scores["spread"].append(dist.ensemble_spread(y, x, weights))
    scores["ensemble_mean_rmse"].append(dist.ensemble_mean_rmse(y, x, weights))
    scores["spread_skill_ratio"].append(dist.spread_skill_ratio(y, x, weights))
    # The tool's acc is the mean over samples (here members) of each one's anomaly correlation.
    cl = np.ascontiguousarray(clim[lat_slice, lon_slice])
    per_member = [float(dist.anomaly_correlation(y, np.ascontiguousarray(x[m]), cl, weights)) for m in range(len(x))]
    total = 0.0
    for value in per_member:
        total += value
    scores["acc"].append(total / len(per_member))
if MPI.COMM_WORLD.rank == 0:
    with open(args.out, "w") as f:
        json.dump({k: [float(v).hex() for v in values] for k, values in scores.items()}, f)
