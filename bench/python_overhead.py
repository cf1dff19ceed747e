"""The Python side of `python_overhead_small_us`: one small `gridshard.Distributed().weighted_mean` call, timed
as small_call_bench times the C++ call on the same numbers (one rank, mpirun -n 1).

One channel of an (8, 16) float32 numpy grid, x[i, j] = 1 + (16 i + j) / 4, with per-row cos-lat weights
(`gridshard.spherical_area_weights` of numpy.linspace(-90, 90, 8), a broadcast view the module reads as
per-row weights); reproducible sums. Each sample times --calls calls; the median over --repetitions
samples, after one untimed sample, is reported per call in microseconds.

Usage: mpirun -n 1 /usr/bin/python3 python_overhead.py OUT_JSON [--repetitions N] [--calls N]
"""

import argparse
import json
import pathlib
import statistics
import time

import numpy as np

import gridshard


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=21)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    dist = gridshard.Distributed()
    if dist.world_size != 1:
        raise SystemExit("python_overhead.py: run it on one rank")
    x = (1.0 + np.arange(8 * 16, dtype=np.float32) * np.float32(0.25)).reshape(8, 16)
    weights = gridshard.spherical_area_weights(np.linspace(-90.0, 90.0, 8), 16)
    result = dist.weighted_mean(x, weights)

    def sample():
        mean = dist.weighted_mean
        start = time.perf_counter()
        for _ in range(args.calls):
            mean(x, weights)
        return (time.perf_counter() - start) / args.calls

    sample()  # warm-up
    per_call_s = [sample() for _ in range(args.repetitions)]
    report = {
        "numpy_version": np.__version__,
        "shape": list(x.shape),
        "weights": "cos_lat per row",
        "calls_per_sample": args.calls,
        "repetitions": args.repetitions,
        "t_call_us": statistics.median(per_call_s) * 1e6,
        "result": [float(result)],
        "samples_call_us": [s * 1e6 for s in per_call_s],
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
