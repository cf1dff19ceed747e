"""Exact quantiles against one pass of a sum: ``Distributed.quantile(x, [0.5, 0.99, 0.9999])`` (numpy's
``nanquantile`` over the two spatial dims, per channel), and its area-weighted "inverted_cdf", over
``Distributed.weighted_mean(x, w)`` on one variable of
(8, 721, 1440) float32, under mpirun on the mesh of GRIDSHARD_BENCH_MESH (default 1x2x2). Medians of the repetitions,
each the slowest rank's time, the two calls alternating; rank 0 writes JSON.

Usage: mpirun -n 4 /usr/bin/python3 quantile_bench.py OUT_JSON [--repetitions N] [--mesh DxHxW]
"""

import argparse
import json
import pathlib
import statistics
import time

import numpy as np
from mpi4py import MPI

import gridshard

QUANTILES = [0.5, 0.99, 0.9999]


def timed(call):
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    call()
    return MPI.COMM_WORLD.allreduce(time.perf_counter() - start, op=MPI.MAX)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--mesh", default="1x2x2")
    args = parser.parse_args()
    data, h, w = (int(n) for n in args.mesh.split("x"))
    dist = gridshard.Distributed(spatial_parallelism=(h, w))
    rng = np.random.default_rng(0)
    field = (280 + 20 * rng.standard_normal((8, 721, 1440))).astype(np.float32)
    shard = np.ascontiguousarray(field[dist.get_local_slices(field.shape)])
    weights = gridshard.spherical_area_weights(np.linspace(-90.0, 90.0, 721), 1440)
    weights = weights[dist.get_local_slices((721, 1440))]
    samples = {"quantile": [], "weighted_mean": [], "weighted_quantile": []}
    for repetition in range(args.repetitions + 1):
        q = timed(lambda: dist.quantile(shard, QUANTILES))
        m = timed(lambda: dist.weighted_mean(shard, weights))
        wq = timed(lambda: dist.quantile(shard, QUANTILES, method="inverted_cdf", weights=weights))
        if repetition > 0:  # the first of each: untimed
            samples["quantile"].append(q)
            samples["weighted_mean"].append(m)
            samples["weighted_quantile"].append(wq)
    if MPI.COMM_WORLD.Get_rank() == 0:
        t_quantile, t_mean = statistics.median(samples["quantile"]), statistics.median(samples["weighted_mean"])
        t_weighted = statistics.median(samples["weighted_quantile"])
        args.out.write_text(json.dumps({
            "mesh": args.mesh, "shape": [8, 721, 1440], "quantiles": QUANTILES, "t_quantile_s": t_quantile,
            "t_weighted_mean_s": t_mean, "quantile_time_over_weighted_mean": t_quantile / t_mean,
            "t_weighted_quantile_s": t_weighted, "weighted_quantile_time_over_weighted_mean": t_weighted / t_mean,
            "samples_s": samples}, indent=2))


if __name__ == "__main__":
    main()
