"""The device path's cost on CPU tensors against the library's: ACE's area-weighted MSE loss, forward and backward.

One rank; a float32 (8, 721, 1440) prediction and target and cos-lat weights (per row: a broadcast view, as
gridshard's spherical_area_weights; and per point, a dense tensor, as ACE's): the loss
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
    rows = torch.from_numpy(gridshard.spherical_area_weights(np.linspace(-90, 90, shape[1]), 1)[:, :1].copy())
    forms = {"per_row": rows.expand(shape[1], shape[2]),  # gridshard's spherical_area_weights, a broadcast view
             "per_point": rows.expand(shape[1], shape[2]).contiguous()}  # ACE's, a dense (nlat, nlon) tensor
    paths = {mode: gridshard.Distributed(MPI.COMM_SELF, device_path=mode) for mode in ("always", "never")}
    samples = {(form, mode): [] for form in forms for mode in paths}
    for k in range(args.repetitions + 2):
        for form, weights in forms.items():
            results = {}
            for mode, dist in paths.items():
                start = time.perf_counter()
                results[mode] = loss_and_gradient(dist, truth, prediction, weights)
                if k >= 2:
                    samples[form, mode].append(time.perf_counter() - start)
            if not all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                       for a, b in zip(results["always"], results["never"])):
                raise SystemExit(f"device_path_overhead: the device path's loss or gradient ({form} weights) differs "
                                 f"from the library's")
    median = {key: statistics.median(values) for key, values in samples.items()}
    figures = {
        "device_path_overhead_vs_library_cpu": median["per_row", "always"] / median["per_row", "never"],
        "device_path_overhead_vs_library_cpu_per_point_weights":
            median["per_point", "always"] / median["per_point", "never"],
        "t_device_path_s": median["per_row", "always"],
        "t_library_s": median["per_row", "never"],
        "t_device_path_per_point_weights_s": median["per_point", "always"],
        "t_library_per_point_weights_s": median["per_point", "never"],
        "shape": list(shape),
        "torch_threads": torch.get_num_threads(),
        "same_bits": True,
        "samples_device_path_s": samples["per_row", "always"],
        "samples_library_s": samples["per_row", "never"],
    }
    args.out.write_text(json.dumps(figures, indent=2))
    print(json.dumps({k: v for k, v in figures.items() if not k.startswith("samples")}, indent=2))


if __name__ == "__main__":
    main()
