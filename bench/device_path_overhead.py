"""The device path's cost on CPU tensors against the library's: ACE's area-weighted MSE loss, forward and backward.

One rank; a float32 (8, 721, 1440) prediction and target and cos-lat weights (per row, as ACE's): the loss
``weighted_mean((p - t)^2, w).mean()`` and its backward, once by ``Distributed(device_path="always")`` (torch
operations, the exact sums in int64 limbs: what runs on a GPU) and once by ``device_path="never"`` (the C++
library), alternately, the median of the repetitions after two untimed ones each. The two losses and gradients
must be the same bits. On a CPU the library is the faster way; the figure says what the device path's integer
arithmetic costs where no GPU runs it.

Usage: /usr/bin/python3 device_path_overhead.py OUT_JSON [--repetitions N] [--shape C H W]
"""

import argparse
import json
import pathlib
import statistics
import time

import numpy as np
import torch
from mpi4py import MPI

import gridshard


def loss_and_gradient(dist, truth, prediction, weights):
    predicted = prediction.clone().requires_grad_(True)
    loss = dist.weighted_mean((predicted - truth) ** 2, weights).mean()
    loss.backward()
    return loss.detach(), predicted.grad


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--shape", type=int, nargs=3, default=(8, 721, 1440))
    args = parser.parse_args()
    shape = tuple(args.shape)
    rng = np.random.default_rng(0)
    truth = torch.from_numpy((280 + 20 * rng.standard_normal(shape)).astype(np.float32))
    prediction = truth + torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    lat = np.deg2rad(np.linspace(-90, 90, shape[1]))
    weights = gridshard.spherical_area_weights(np.rad2deg(lat), shape[2])
    paths = {mode: gridshard.Distributed(MPI.COMM_SELF, device_path=mode) for mode in ("always", "never")}
    samples = {mode: [] for mode in paths}
    results = {}
    for k in range(args.repetitions + 2):
        for mode, dist in paths.items():
            start = time.perf_counter()
            results[mode] = loss_and_gradient(dist, truth, prediction, torch.as_tensor(weights))
            if k >= 2:
                samples[mode].append(time.perf_counter() - start)
    same = all(torch.equal(a.view(torch.int32), b.view(torch.int32))
               for a, b in zip(results["always"], results["never"]))
    if not same:
        raise SystemExit("device_path_overhead: the device path's loss or gradient differs from the library's")
    t_device, t_library = statistics.median(samples["always"]), statistics.median(samples["never"])
    figures = {
        "device_path_overhead_vs_library_cpu": t_device / t_library,
        "t_device_path_s": t_device,
        "t_library_s": t_library,
        "shape": list(shape),
        "torch_threads": torch.get_num_threads(),
        "same_bits": same,
        "samples_device_path_s": samples["always"],
        "samples_library_s": samples["never"],
    }
    args.out.write_text(json.dumps(figures, indent=2))
    print(json.dumps({k: v for k, v in figures.items() if not k.startswith("samples")}, indent=2))


if __name__ == "__main__":
    main()
