"""The numpy pipeline for a forecast evaluation, timed against `gridshard eval` on the same ACE-layout file
pair (make bench, step 8): for every initial condition and lead time, the truth and every member read with
netCDF4, then ACE's per-sample scores (weighted RMSE, bias, means of the prediction and target, the std of
the prediction, the gradient-magnitude percent difference) averaged over the samples, the ensemble scores
(ensemble-mean RMSE, spread, CRPS, fair CRPS) averaged over initial conditions, the zonal means, and the
time-mean maps, in float64, vectorised over the members, as a careful user would write it.

Usage: /usr/bin/python3 numpy_forecast.py TRUTH.nc PRED.nc MEMBERS OUT_JSON [--repetitions N]
"""

import argparse
import json
import time

import netCDF4
import numpy as np


def wmean(x, a):
    """Weighted means over the last two axes over the finite points."""
    valid = np.isfinite(x)
    return np.where(valid, x * a, 0.0).sum(axis=(-2, -1)) / np.where(valid, a, 0.0).sum(axis=(-2, -1))


def gradient_mean(x, a):
    g_lat, g_lon = np.gradient(x, axis=(-2, -1))
    return wmean(np.sqrt(g_lat**2 + g_lon**2), a)


def evaluate(truth_path, pred_path, members, variable="t2m"):
    with netCDF4.Dataset(truth_path) as t_file, netCDF4.Dataset(pred_path) as p_file:
        t_var, p_var = t_file[variable], p_file[variable]
        t_var.set_auto_mask(False)
        p_var.set_auto_mask(False)
        lat = np.asarray(t_file["lat"][:], dtype=np.float64)
        samples, leads = p_var.shape[:2]
        ics = samples // members
        a = np.broadcast_to(np.cos(np.deg2rad(lat))[:, None], p_var.shape[-2:])
        per_step = {k: np.zeros(leads) for k in ("weighted_rmse", "weighted_bias", "weighted_mean_gen",
                                                 "weighted_mean_target", "weighted_std_gen",
                                                 "weighted_grad_mag_percent_diff", "ensemble_mean_rmse", "spread",
                                                 "crps", "fair_crps")}
        zonal_gen = np.zeros((leads, p_var.shape[-2]))
        gen_sum = np.zeros(p_var.shape[-2:])
        bias_sum = np.zeros(p_var.shape[-2:])
        for ic in range(ics):
            for lead in range(leads):
                y = np.asarray(t_var[ic * members, lead], dtype=np.float64)
                x = np.asarray(p_var[ic * members:(ic + 1) * members, lead], dtype=np.float64)
                error = x - y
                per_step["weighted_rmse"][lead] += np.sqrt(wmean(error**2, a)).sum()
                per_step["weighted_bias"][lead] += wmean(error, a).sum()
                mean_gen = wmean(x, a)
                per_step["weighted_mean_gen"][lead] += mean_gen.sum()
                per_step["weighted_mean_target"][lead] += members * wmean(y, a)
                per_step["weighted_std_gen"][lead] += np.sqrt(wmean((x - mean_gen[:, None, None]) ** 2, a)).sum()
                g_t = gradient_mean(y, a)
                per_step["weighted_grad_mag_percent_diff"][lead] += (100 * (gradient_mean(x, a) - g_t) / g_t).sum()
                xbar = x.mean(axis=0)
                per_step["ensemble_mean_rmse"][lead] += np.sqrt(wmean((xbar - y) ** 2, a))
                per_step["spread"][lead] += np.sqrt(wmean(x.var(axis=0, ddof=1), a))
                skill = np.abs(error).mean(axis=0)
                ranks = (2.0 * np.arange(1, members + 1) - members - 1.0)[:, None, None]
                pairs = 2.0 * (np.sort(x, axis=0) * ranks).sum(axis=0)
                per_step["crps"][lead] += wmean(skill - pairs / (2.0 * members**2), a)
                per_step["fair_crps"][lead] += wmean(skill - pairs / (2.0 * members * (members - 1)), a)
                zonal_gen[lead] += np.nanmean(x, axis=-1).sum(axis=0)
                if lead > 0:
                    gen_sum += x.sum(axis=0)
                    bias_sum += error.sum(axis=0)
        for k in per_step:
            per_step[k] /= ics * (1 if k in ("ensemble_mean_rmse", "spread", "crps", "fair_crps") else members)
        bias_map = bias_sum / (ics * members * (leads - 1))
        return {"per_step": {k: v.tolist() for k, v in per_step.items()},
                "rmse": float(np.sqrt(wmean(bias_map**2, a))), "bias": float(wmean(bias_map, a))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("truth")
    parser.add_argument("pred")
    parser.add_argument("members", type=int)
    parser.add_argument("out")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    result = evaluate(args.truth, args.pred, args.members)
    samples = []
    for _ in range(args.repetitions):
        start = time.perf_counter()
        evaluate(args.truth, args.pred, args.members)
        samples.append(time.perf_counter() - start)
    with open(args.out, "w") as f:
        json.dump({"t_numpy_s": sorted(samples)[len(samples) // 2], "samples_numpy_s": samples,
                   "numpy_version": np.__version__, "result": result}, f, indent=2)


if __name__ == "__main__":
    main()
