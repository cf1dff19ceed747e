"""The exact sum over the data group against MPI's own: ``Distributed.reduce_sum`` with ``exact=True`` (the
library's reduce_sum_exact: one MAX allreduce of 12 bytes and one SUM allreduce of 16 bytes per element, then a
rounding per element) and ``exact=False`` (one MPI_Allreduce of the values), on float32 arrays of a loss's size
(8 values), a metric row's (1,440) and a gradient buffer's (2^20), under mpirun on a data-parallel mesh; and the
device path's on CPU float32 tensors over gloo (one all_reduce of 18 int64 per element, then a rounding in torch
operations) against gloo's own sum of the tensor (``exact=False`` on the device path). Medians of the repetitions,
each the slowest rank's time of a round of calls; rank 0 writes JSON.

Usage: mpirun -n 2 /usr/bin/python3 exact_data_sum.py OUT_JSON [--repetitions N]
"""

import argparse
import json
import pathlib
import statistics
import time

import numpy as np
from mpi4py import MPI

import gridshard

SIZES = {"loss (8)": 8, "row (1440)": 1440, "buffer (2^20)": 1 << 20}


def timed(dist, values, exact, rounds):
    work = values.copy() if isinstance(values, np.ndarray) else values.clone()
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        work[...] = values
        dist.reduce_sum(work, exact=exact)
    elapsed = (time.perf_counter() - start) / rounds
    return MPI.COMM_WORLD.allreduce(elapsed, op=MPI.MAX)


def compare(dist, values, repetitions, most_rounds):
    """Medians of the exact sum's and the plain sum's times, and their samples: each sample a round of calls over
    about 2^16 elements, at most ``most_rounds`` calls."""
    rounds = max(1, min(most_rounds, (1 << 16) // values.shape[0]))
    samples = {True: [], False: []}
    for repetition in range(repetitions + 1):
        for exact in (True, False):
            t = timed(dist, values, exact, rounds)
            if repetition > 0:  # the first of each: untimed
                samples[exact].append(t)
    return statistics.median(samples[True]), statistics.median(samples[False]), samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    dist = gridshard.Distributed()
    rng = np.random.default_rng(dist.data_parallel_rank)
    calls, device_calls = {}, {}
    for name, size in SIZES.items():
        values = rng.standard_normal(size).astype(np.float32)
        exact_s, plain_s, samples = compare(dist, values, args.repetitions, 1 << 16)
        calls[name] = {"t_exact_us": exact_s * 1e6, "t_mpi_sum_us": plain_s * 1e6,
                       "exact_over_mpi_sum": exact_s / plain_s, "samples_exact_s": samples[True],
                       "samples_mpi_sum_s": samples[False]}
    import torch

    device = gridshard.Distributed(device_path="always")
    for name, size in SIZES.items():
        values = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
        exact_s, plain_s, samples = compare(device, values, args.repetitions, 64)  # gloo: ms a call
        device_calls[name] = {"t_exact_us": exact_s * 1e6, "t_gloo_sum_us": plain_s * 1e6,
                              "exact_over_gloo_sum": exact_s / plain_s, "samples_exact_s": samples[True],
                              "samples_gloo_sum_s": samples[False]}
    if MPI.COMM_WORLD.Get_rank() == 0:
        result = {"ranks": MPI.COMM_WORLD.Get_size(), "calls": calls, "device_path_calls": device_calls,
                  "exact_reduce_sum_over_mpi_sum_buffer": calls["buffer (2^20)"]["exact_over_mpi_sum"],
                  "device_exact_reduce_sum_over_gloo_sum_row": device_calls["row (1440)"]["exact_over_gloo_sum"]}
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
