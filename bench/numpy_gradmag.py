"""The numpy reference pipeline for gradient_magnitude_percent_diff, timed on the arrays that
single_rank_bench wrote (so both sides see identical data).

For truth and prediction in float64: g = np.gradient(x, axis=(-2, -1)); mag = sqrt(g_lat^2 + g_lon^2);
G = weighted nan-mean of mag with the cos-lat weights; result 100 * (Gp - Gt) / Gt per channel.

The headline time starts from float64 arrays (the conversion from float32 is done once, untimed), which
is the cheaper reading of the comparison for numpy; the time including the conversion from the float32
inputs (what gridshard's time includes) is reported alongside.

Usage: /usr/bin/python3 numpy_gradmag.py DATA_DIR OUT_JSON [--repetitions N]
"""

import json

import numpy as np

from timing import peer_arguments, time_median  # bench/timing.py, beside this script


def weighted_nanmean(mag, weights):
    """sum over valid of a*x / sum over valid of a, per channel; weights (nlat,) broadcast over lon."""
    a = weights[:, None]
    valid = ~np.isnan(mag)
    numerator = np.where(valid, mag * a, 0.0).sum(axis=(-2, -1))
    denominator = np.where(valid, a, 0.0).sum(axis=(-2, -1))
    return numerator / denominator


def mean_gradient_magnitude(x, weights):
    g_lat, g_lon = np.gradient(x, axis=(-2, -1))
    mag = np.sqrt(g_lat**2 + g_lon**2)
    return weighted_nanmean(mag, weights)


def percent_diff(truth, prediction, weights):
    g_truth = mean_gradient_magnitude(truth, weights)
    g_prediction = mean_gradient_magnitude(prediction, weights)
    return 100.0 * (g_prediction - g_truth) / g_truth


def main():
    args = peer_arguments(__doc__)

    truth32 = np.load(args.data_dir / "gradmag_truth.npy")
    prediction32 = np.load(args.data_dir / "gradmag_prediction.npy")
    weights = np.load(args.data_dir / "gradmag_weights.npy")
    truth = truth32.astype(np.float64)
    prediction = prediction32.astype(np.float64)

    result = percent_diff(truth, prediction, weights)
    t_float64, samples_float64 = time_median(lambda: percent_diff(truth, prediction, weights), args.repetitions)
    t_from_float32, samples_from_float32 = time_median(
        lambda: percent_diff(truth32.astype(np.float64), prediction32.astype(np.float64), weights), args.repetitions
    )
    report = {
        "numpy_version": np.__version__,
        "shape": list(truth.shape),
        "repetitions": args.repetitions,
        "t_numpy_s": t_float64,
        "t_numpy_from_float32_s": t_from_float32,
        "result": result.tolist(),
        "samples_numpy_s": samples_float64,
        "samples_numpy_from_float32_s": samples_from_float32,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
