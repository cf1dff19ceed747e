"""`python_gradmag_vs_ace_gather_1x2x2`: gradient_magnitude_percent_diff on a 1x2x2 mesh of four ranks (run
with mpirun -n 4), ACE's way against gridshard.Distributed's, both from Python on the same torch shards.

Every rank builds the same global (3, 721, 1440) float32 truth and prediction from a seed (temperature-like:
a large-scale pattern, point noise, a prediction that is the truth plus a small error) and the cos-lat
weights of the 0.25-degree grid (`gridshard.spherical_area_weights`, float32), and keeps its shard
(`dist.get_local_slices`, made C-contiguous once, as an emulator holds its own shard).

  ace:       what ACE does under spatial parallelism, in torch: `gather_spatial_tensor` of truth, prediction
             and weights (a zero-filled global buffer, the shard written into its slice, an all_reduce over
             the spatial group of torch.distributed, gloo, initialised from the MPI world), then on every
             rank torch.gradient over (-2, -1), sqrt of the sum of squares, ACE's weighted_nanmean for truth
             and prediction, and 100 (Gp - Gt) / Gt. torch uses os.cpu_count() // 4 threads (at least 1),
             so the four ranks share the cores.
  gridshard: `Distributed(spatial_parallelism=(2, 2)).gradient_magnitude_percent_diff` on the shards (one
             halo exchange of one-cell strips, exact sums).

The two alternate (ace, gridshard, ace, ...) after one untimed call of each; each timed call follows a
barrier, and a repetition's time is the largest over the ranks. World rank 0 writes the medians, the time
the ace path spends in its three gathers, both results and their largest relative difference.

Usage: mpirun -n 4 /usr/bin/python3 python_gradmag_vs_gather.py OUT_JSON [--repetitions N]
"""

import argparse
import json
import os
import pathlib
import statistics
import time

import numpy as np
import torch
import torch.distributed
from mpi4py import MPI

import gridshard
import gridshard.torch_distributed

MESH = (1, 2, 2)  # data x h x w
GRID = (721, 1440)
CHANNELS = 3
SEED = 20240601


def global_fields():
    """Truth and prediction (CHANNELS, *GRID) float32, the same on every rank (one seed)."""
    rng = np.random.default_rng(SEED)
    nlat, nlon = GRID
    lat = np.linspace(-0.5 * np.pi, 0.5 * np.pi, nlat)[:, None]
    lon = np.linspace(0.0, 2.0 * np.pi, nlon, endpoint=False)[None, :]
    truth = np.empty((CHANNELS, nlat, nlon), dtype=np.float32)
    prediction = np.empty_like(truth)
    for c in range(CHANNELS):
        t = 250.0 + 40.0 * np.cos(lat) + c + 10.0 * np.cos(2.0 * lat) * np.sin(3.0 * lon + c)
        t = t + 2.0 * rng.random((nlat, nlon))
        truth[c] = t
        prediction[c] = t + 1.5 * (rng.random((nlat, nlon)) - 0.45)
    return torch.from_numpy(truth), torch.from_numpy(prediction)


def init_torch_distributed(comm):
    """torch.distributed (gloo) over the MPI world (gridshard.torch_distributed), and this rank's spatial group."""
    gridshard.torch_distributed.init_process_group("gloo", comm)
    data, h, w = MESH
    groups = [torch.distributed.new_group(ranks=list(range(d * h * w, (d + 1) * h * w))) for d in range(data)]
    return groups[comm.Get_rank() // (h * w)]


# ----- ACE (fme.core.distributed and fme.core.metrics), on CPU tensors -----


def gather_spatial_tensor(local, slices, group):
    """ACE's gather under spatial parallelism: a zero-filled global buffer, the shard in its slice, all_reduce."""
    buffer = torch.zeros(local.shape[:-2] + GRID, dtype=local.dtype)
    buffer[(...,) + slices] = local
    torch.distributed.all_reduce(buffer, group=group)
    return buffer


def weighted_nanmean(tensor, weights, dim):
    return (tensor * weights).nansum(dim=dim) / torch.where(torch.isnan(tensor), 0.0, weights).sum(dim=dim)


def gradient_magnitude(tensor, dim):
    return torch.sqrt(sum(g**2 for g in torch.gradient(tensor, dim=dim)))


def ace_percent_diff(truth, prediction, weights, slices, group, gather_s):
    start = time.perf_counter()
    truth = gather_spatial_tensor(truth, slices, group)
    prediction = gather_spatial_tensor(prediction, slices, group)
    weights = gather_spatial_tensor(weights, slices, group)
    gather_s.append(time.perf_counter() - start)
    dim = (-2, -1)
    g_truth = weighted_nanmean(gradient_magnitude(truth, dim), weights, dim)
    g_prediction = weighted_nanmean(gradient_magnitude(prediction, dim), weights, dim)
    return 100 * (g_prediction - g_truth) / g_truth


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=7)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    if comm.Get_size() != MESH[0] * MESH[1] * MESH[2]:
        raise SystemExit(f"python_gradmag_vs_gather.py: run it on {MESH[0] * MESH[1] * MESH[2]} ranks")
    threads = max(1, (os.cpu_count() or 1) // comm.Get_size())
    torch.set_num_threads(threads)
    group = init_torch_distributed(comm)
    dist = gridshard.Distributed(spatial_parallelism=MESH[1:])

    truth, prediction = global_fields()
    weights = gridshard.spherical_area_weights(torch.linspace(-90.0, 90.0, GRID[0]), GRID[1])
    slices = dist.get_local_slices(GRID)
    t_local = truth[(...,) + slices].contiguous()
    p_local = prediction[(...,) + slices].contiguous()
    w_local = weights[slices]  # a view of the broadcast weights, constant along longitude
    del truth, prediction

    def ace():
        return ace_percent_diff(t_local, p_local, w_local, slices, group, gather_s)

    def ours():
        return dist.gradient_magnitude_percent_diff(t_local, p_local, w_local, dim=(-2, -1), img_shape=GRID)

    def timed(fn):
        comm.Barrier()
        start = time.perf_counter()
        value = fn()
        return comm.allreduce(time.perf_counter() - start, op=MPI.MAX), value

    gather_s = []
    with torch.no_grad():
        ace_result, ours_result = ace(), ours()  # warm-up: gloo's connections, first touch
        ace_samples, ours_samples, gather_samples = [], [], []
        for _ in range(args.repetitions):
            gather_s.clear()
            elapsed, _ = timed(ace)
            ace_samples.append(elapsed)
            gather_samples.append(comm.allreduce(gather_s[0], op=MPI.MAX))
            elapsed, _ = timed(ours)
            ours_samples.append(elapsed)

    ace_values = ace_result.double().tolist()
    ours_values = ours_result.double().tolist()
    agreement = max(abs(a - b) / abs(b) for a, b in zip(ours_values, ace_values, strict=True))
    agreement = comm.allreduce(agreement, op=MPI.MAX)
    if comm.Get_rank() == 0:
        report = {
            "mesh": "x".join(str(n) for n in MESH),
            "ranks": comm.Get_size(),
            "shape": [CHANNELS, *GRID],
            "dtype": str(t_local.dtype),
            "torch_version": torch.__version__,
            "torch_threads": threads,
            "repetitions": args.repetitions,
            "t_ace_gather_s": statistics.median(ace_samples),
            "t_ace_gather_communication_s": statistics.median(gather_samples),
            "t_gridshard_s": statistics.median(ours_samples),
            "ace_result": ace_values,
            "gridshard_result": ours_values,
            "gridshard_vs_ace_max_relative_difference": agreement,
            "samples_ace_gather_s": ace_samples,
            "samples_ace_gather_communication_s": gather_samples,
            "samples_gridshard_s": ours_samples,
        }
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
