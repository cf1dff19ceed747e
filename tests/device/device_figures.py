"""What a gridshard call costs on CUDA tensors (run by run_device_check.sh under mpirun): the area-weighted MSE on
(8, 721, 1440) float32 shards, forward and backward, on the GPU (staged through pinned host memory) and on the CPU,
and the bytes that cross to the host and back. Prints one JSON line on rank 0.

    mpirun -n 4 python tests/device/device_figures.py --mesh 1x2x2"""
import argparse
import json
import statistics
import time

import numpy as np
import torch
from mpi4py import MPI

import gridshard

parser = argparse.ArgumentParser()
parser.add_argument("--mesh", default="1x1x1")
parser.add_argument("--repetitions", type=int, default=5)
args = parser.parse_args()
_, h, w = map(int, args.mesh.split("x"))
dist = gridshard.Distributed(spatial_parallelism=(h, w))
shape = (8, 721, 1440)
slices = dist.get_local_slices(shape)
rng = np.random.default_rng(0)
truth = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))[slices].contiguous()
prediction = (truth + 0.1).contiguous()
weights = gridshard.spherical_area_weights(np.linspace(-90, 90, 721), 1440)[slices[1:]]


def step(device):
    p = prediction.to(device).requires_grad_(True)
    t = truth.to(device)
    if device == "cuda":
        torch.cuda.synchronize()
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    loss = dist.weighted_mean((p - t) ** 2, weights).mean()
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, float(loss), p.grad.cpu()


figures = {"mesh": args.mesh, "shard": list(truth.shape)}
results = {}
for device in ("cpu", "cuda"):
    step(device)  # warm
    samples = [step(device) for _ in range(args.repetitions)]
    figures[f"{device}_s"] = statistics.median(s for s, _, _ in samples)
    results[device] = samples[-1]
figures["gpu_over_cpu"] = figures["cuda_s"] / figures["cpu_s"]
figures["same_loss_bits"] = results["cpu"][1] == results["cuda"][1]
figures["largest_gradient_difference"] = float((results["cpu"][2] - results["cuda"][2]).abs().max())
figures["bytes_staged_per_call"] = int(truth.numel() * 4)  # the forward's (p - t)^2 shard to the host
if dist.rank == 0:
    print(json.dumps(figures))
