"""The numpy pipeline for the ensemble scores, timed on the arrays that ensemble_bench wrote (so both sides
see identical data): the ensemble-mean RMSE, the spread, the spread-skill ratio, the CRPS and the fair CRPS
of a (members, nlat, nlon) ensemble against the truth, area-weighted with cos-lat weights over the points
where the truth and every member are finite, in float64, as WeatherBench 2 defines them:

    skill = mean_m |x_m - y|,  spread term = sum_{j,k} |x_j - x_k| (by sorting the members: 2 sum_i (2i - M - 1) x_(i)),
    crps = wmean(skill - spread term / (2 M^2)),  fair = wmean(skill - spread term / (2 M (M - 1))).

The headline time starts from float64 arrays (converted once, untimed), numpy's cheaper reading.

Usage: /usr/bin/python3 numpy_ensemble.py DATA_DIR OUT_JSON [--repetitions N]
"""

import json

import numpy as np

from timing import peer_arguments, time_median  # bench/timing.py, beside this script


def wmean(x, a):
    valid = ~np.isnan(x)
    return np.where(valid, x * a, 0.0).sum() / np.where(valid, a, 0.0).sum()


def scores(truth, members, weights):
    m = members.shape[0]
    a = np.broadcast_to(weights[:, None], truth.shape)
    valid = np.isfinite(truth) & np.isfinite(members).all(axis=0)
    mean = members.mean(axis=0)
    squared_error = np.where(valid, (mean - truth) ** 2, np.nan)
    variance = np.where(valid, members.var(axis=0, ddof=1), np.nan)
    skill = np.abs(members - truth).mean(axis=0)
    ranks = (2.0 * np.arange(1, m + 1) - m - 1.0)[:, None, None]
    pairs = 2.0 * (np.sort(members, axis=0) * ranks).sum(axis=0)
    crps = np.where(valid, skill - pairs / (2.0 * m * m), np.nan)
    fair = np.where(valid, skill - pairs / (2.0 * m * (m - 1.0)), np.nan)
    rmse = np.sqrt(wmean(squared_error, a))
    spread = np.sqrt(wmean(variance, a))
    return [rmse, spread, spread / rmse, wmean(crps, a), wmean(fair, a)]


def main():
    args = peer_arguments(__doc__)
    truth = np.load(args.data_dir / "ensemble_truth.npy").astype(np.float64)
    members = np.load(args.data_dir / "ensemble_members.npy").astype(np.float64)
    weights = np.load(args.data_dir / "ensemble_weights.npy")
    result = scores(truth, members, weights)
    t_numpy, samples = time_median(lambda: scores(truth, members, weights), args.repetitions)
    report = {
        "numpy_version": np.__version__,
        "shape": list(members.shape),
        "repetitions": args.repetitions,
        "t_numpy_s": t_numpy,
        "result": [float(v) for v in result],
        "samples_numpy_s": samples,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
