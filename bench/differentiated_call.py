"""A differentiated reduction against the plain call, from Python at one mesh (mpirun -n 4: 1x2x2).

For `weighted_mean`, `weighted_std` and `zonal_mean` of a float32 torch tensor, on a small (4, 32, 64) and a
medium (8, 181, 360) grid with cos-lat weights: the time of the plain call (a tensor that does not require grad)
and of the differentiated one (forward and backward of its sum), each timed after a barrier, the slowest rank's,
the median of the repetitions after five untimed ones. A differentiated call takes its value and the sums of its
backward from one library call, so it should cost the plain call plus torch's few elementwise operations.

Usage: mpirun -n 4 /usr/bin/python3 differentiated_call.py OUT_JSON [--repetitions N]
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

SHAPES = ((4, 32, 64), (8, 181, 360))
CALLS = {
    "weighted_mean": lambda dist, x, w: dist.weighted_mean(x, w),
    "weighted_std": lambda dist, x, w: dist.weighted_std(x, w),
    "zonal_mean": lambda dist, x, w: dist.zonal_mean(x),
}


def timed(comm, run, repetitions):
    samples = []
    for k in range(repetitions + 5):
        comm.Barrier()
        start = time.perf_counter()
        run()
        elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
        if k >= 5:
            samples.append(elapsed)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=101)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 4:
        raise SystemExit("differentiated_call.py runs at 4 ranks (1x2x2)")
    torch.set_num_threads(1)
    dist = gridshard.Distributed(comm, spatial_parallelism=(2, 2))
    results = {}
    for shape in SHAPES:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        weights = np.cos(np.deg2rad(np.linspace(-89, 89, shape[1])))[:, None] * np.ones(shape[1:])
        slices = dist.get_local_slices(shape)
        local = torch.from_numpy(np.ascontiguousarray(x[slices]))
        w = np.ascontiguousarray(weights[slices[1:]])
        repetitions = args.repetitions if shape == SHAPES[0] else max(11, args.repetitions // 5)
        for name, call in CALLS.items():
            plain = timed(comm, lambda: call(dist, local, w), repetitions)

            def differentiated():
                leaf = local.clone().requires_grad_(True)
                call(dist, leaf, w).sum().backward()
            grad = timed(comm, differentiated, repetitions)
            results[f"{name} {shape}"] = {"t_plain_s": plain, "t_differentiated_s": grad,
                                          "differentiated_over_plain": grad / plain}
    if comm.rank == 0:
        args.out.write_text(json.dumps({"mesh": "1x2x2", "repetitions": args.repetitions, "calls": results},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
