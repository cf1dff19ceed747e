"""The peer the emulator codes use: an ACE-style PyTorch gradient_magnitude_percent_diff, timed on the
arrays that single_rank_bench wrote (so both sides see identical data).

As an emulator computes it on its float32 tensors, with every core (torch.set_num_threads):
g_lat, g_lon = torch.gradient(x, dim=(-2, -1)); mag = sqrt(g_lat^2 + g_lon^2); G = weighted NaN-aware
mean of mag with the cos-lat weights broadcast over longitude; result 100 * (Gp - Gt) / Gt per channel.

Usage: /usr/bin/python3 torch_gradmag.py DATA_DIR OUT_JSON [--repetitions N]
"""

import json
import os

import numpy as np
import torch

from timing import peer_arguments, time_median  # bench/timing.py, beside this script


def weighted_nanmean(x, weights):
    """sum over valid of a*x / sum over valid of a, per channel; weights (nlat, 1) broadcast over lon."""
    valid = ~torch.isnan(x)
    numerator = torch.where(valid, x * weights, 0.0).sum(dim=(-2, -1))
    denominator = torch.where(valid, weights.expand_as(x), 0.0).sum(dim=(-2, -1))
    return numerator / denominator


def gradient_magnitude(x):
    g_lat, g_lon = torch.gradient(x, dim=(-2, -1))
    return torch.sqrt(g_lat**2 + g_lon**2)


def percent_diff(truth, prediction, weights):
    g_truth = weighted_nanmean(gradient_magnitude(truth), weights)
    g_prediction = weighted_nanmean(gradient_magnitude(prediction), weights)
    return 100.0 * (g_prediction - g_truth) / g_truth


def main():
    args = peer_arguments(__doc__)

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    truth = torch.from_numpy(np.load(args.data_dir / "gradmag_truth.npy"))
    prediction = torch.from_numpy(np.load(args.data_dir / "gradmag_prediction.npy"))
    weights = torch.from_numpy(np.load(args.data_dir / "gradmag_weights.npy").astype(np.float32))[:, None]

    with torch.no_grad():
        result = percent_diff(truth, prediction, weights)
        t_torch, samples = time_median(lambda: percent_diff(truth, prediction, weights), args.repetitions)
    report = {
        "torch_version": torch.__version__,
        "threads": threads,
        "dtype": str(truth.dtype),
        "shape": list(truth.shape),
        "repetitions": args.repetitions,
        "t_torch_s": t_torch,
        "result": result.double().tolist(),
        "samples_torch_s": samples,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
