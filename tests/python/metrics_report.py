"""Every metric of gridshard.Distributed on one case, written as hex floats by world rank 0, so runs on
different meshes (and the CLI) can be compared bit for bit.

    mpirun -n N python3 metrics_report.py OUT.json --mesh DxHxW [--split div_up] [--truth T.nc --pred P.nc]

Without files the case is built from a seed; with a pair of files (a variable `v` on (time, lat, lon), as
tests/cli/make_files.py writes them) the report holds the scores `gridshard eval` reports, per time step."""
import argparse
import json

import numpy as np
from mpi4py import MPI

import gridshard


def hexes(values):
    return [float(v).hex() for v in np.asarray(values, dtype=np.float64).ravel()]


def built_in_case(dist):
    rng = np.random.default_rng(7)
    shape = (4, 2, 11, 13)
    truth = (250 + 30 * rng.standard_normal(shape)).astype(np.float32)
    prediction = (truth + rng.standard_normal(shape)).astype(np.float32)
    truth[1, 0, 5, 2:5] = np.nan
    weights = gridshard.spherical_area_weights(np.linspace(-85, 85, 11), 13)
    point_weights = rng.uniform(0.1, 1.0, (11, 13))
    region = (rng.uniform(size=(11, 13)) > 0.5).astype(np.float64)
    s = dist.get_local_slices(shape)
    t, p = truth[s], prediction[s]
    w, pw, r = (a[s[-2:]] for a in (weights, point_weights, region))
    return {
        "weighted_sum": dist.weighted_sum(t, w),
        "weighted_mean": dist.weighted_mean(t, pw),
        "weighted_nanmean": dist.weighted_nanmean(t, w),
        "weighted_std": dist.weighted_std(p, pw),
        "weighted_mean_bias": dist.weighted_mean_bias(t, p, w),
        "root_mean_squared_error": dist.root_mean_squared_error(t, p, pw),
        "weighted_mean_gradient_magnitude": dist.weighted_mean_gradient_magnitude(p, w),
        "gradient_magnitude_percent_diff": dist.gradient_magnitude_percent_diff(t, p, w, img_shape=(11, 13)),
        "rmse_of_time_mean": dist.rmse_of_time_mean(p, p * 1.01, w),
        "time_and_global_mean_bias": dist.time_and_global_mean_bias(p, p * 1.01, pw, time_dim=1),
        "regional_weighted_mean": dist.regional_weighted_mean(t, w, r),
        "gradient_magnitude": dist.gather_global(dist.gradient_magnitude(p), (4, 2, 11, 13), data_parallel_dim=None),
        "zonal_mean": dist.gather_global(dist.zonal_mean(t)[..., None], (4, 2, 11, 1), data_parallel_dim=None)
        if dist.spatial_parallelism[1] == 1
        else np.zeros(1),
    }


def file_case(dist, truth_path, prediction_path):
    import netCDF4

    with netCDF4.Dataset(truth_path) as t_file, netCDF4.Dataset(prediction_path) as p_file:
        truth = np.asarray(t_file["v"][:])
        prediction = np.asarray(p_file["v"][:])
        lat = np.asarray(t_file["lat"][:], dtype=np.float64)
    weights = gridshard.spherical_area_weights(lat, truth.shape[-1])  # the tool's default cos_lat weights
    s = dist.get_local_slices(truth.shape)
    t, p, w = truth[s], prediction[s], weights[s[-2:]]
    return {
        "mean_truth": dist.weighted_mean(t, w),
        "mean_pred": dist.weighted_mean(p, w),
        "bias": dist.weighted_mean_bias(t, p, w),
        "rmse": dist.root_mean_squared_error(t, p, w),
        "std_truth": dist.weighted_std(t, w),
        "std_pred": dist.weighted_std(p, w),
        "grad_mag_percent_diff": dist.gradient_magnitude_percent_diff(t, p, w, img_shape=truth.shape[-2:]),
        "rmse_of_time_mean": dist.rmse_of_time_mean(t, p, w),
        "time_and_global_mean_bias": dist.time_and_global_mean_bias(t, p, w),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--mesh", required=True)
    parser.add_argument("--split", default="div_up")
    parser.add_argument("--truth")
    parser.add_argument("--pred")
    args = parser.parse_args()
    d, h, w = (int(k) for k in args.mesh.split("x"))
    dist = gridshard.Distributed(spatial_parallelism=(h, w), split=args.split)
    assert dist.mesh_shape == (d, h, w)
    if args.truth:
        results = file_case(dist, args.truth, args.pred)
    else:
        results = built_in_case(dist)
    # Results are per data replica; the report holds replica 0's, which world rank 0 has.
    if MPI.COMM_WORLD.Get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump({k: hexes(v) for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
