"""What a gridshard call costs on CUDA tensors (run by run_device_check.sh under mpirun): ACE's area-weighted MSE on
(8, 721, 1440) float32 shards, forward and backward, by the device path (torch operations on the GPU, exact sums in
int64, merged by torch.distributed), by the staging path (through pinned host memory to the library), by the
library on CPU tensors, and ACE's own way (float32 sums on the GPU, all_reduce of the partial sums over the spatial
group), with whether each gives the device path's bits. Prints one JSON line on rank 0.

    mpirun -n 4 python tests/device/device_figures.py --mesh 1x2x2 [--backend gloo|nccl]"""
import argparse
import json
import statistics
import time

import numpy as np
import torch
import torch.distributed as td
from mpi4py import MPI

import gridshard
import gridshard.torch_distributed

parser = argparse.ArgumentParser()
parser.add_argument("--mesh", default="1x1x1")
parser.add_argument("--backend", default="gloo", help="torch.distributed's: nccl for one rank per GPU")
parser.add_argument("--repetitions", type=int, default=5)
args = parser.parse_args()
_, h, w = map(int, args.mesh.split("x"))
gridshard.torch_distributed.init_process_group(args.backend)
paths = {mode: gridshard.Distributed(spatial_parallelism=(h, w), device_path=mode) for mode in ("always", "never")}
dist = paths["never"]
group = paths["always"]._device.group
shape = (8, 721, 1440)
slices = dist.get_local_slices(shape)
rng = np.random.default_rng(0)
truth = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))[slices].contiguous()
prediction = (truth + 0.1).contiguous()
area = gridshard.spherical_area_weights(np.linspace(-90, 90, 721), 1440)
weights = torch.from_numpy(np.ascontiguousarray(area[slices[1:]]))


def ace_loss(p, t, a):
    """ACE's way on shards: float32 partial sums on the device, summed over the spatial group by all_reduce."""
    parts = torch.stack([(a * (p - t) ** 2).sum(dim=(-2, -1)).mean(), a.sum()])
    if group is not None:
        td.all_reduce(parts, group=group)
    return parts[0] / parts[1]


CASES = {
    "device_path": lambda p, t, a: paths["always"].weighted_mean((p - t) ** 2, a).mean(),
    "staging_path": lambda p, t, a: paths["never"].weighted_mean((p - t) ** 2, a).mean(),
    "ace_style": ace_loss,
}


def step(case, device):
    p = prediction.to(device).requires_grad_(True)
    t, a = truth.to(device), weights.to(device)
    if device == "cuda":
        torch.cuda.synchronize()
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    loss = CASES[case](p, t, a)
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
    elapsed = MPI.COMM_WORLD.allreduce(time.perf_counter() - start, op=MPI.MAX)
    return elapsed, loss.detach().cpu(), p.grad.cpu()


figures = {"mesh": args.mesh, "backend": args.backend, "shard": list(truth.shape), "gpu": torch.cuda.get_device_name()}
results = {}
for case, device in (("device_path", "cuda"), ("staging_path", "cuda"), ("staging_path", "cpu"),
                     ("ace_style", "cuda")):
    step(case, device)  # warm
    samples = [step(case, device) for _ in range(args.repetitions)]
    name = f"{case}_{device}"
    figures[f"{name}_s"] = statistics.median(s for s, _, _ in samples)
    results[name] = samples[-1]
reference = results["device_path_cuda"]
for name, (_, loss, grad) in results.items():
    figures[f"{name}_same_loss_bits"] = bool(torch.equal(loss.view(torch.int32), reference[1].view(torch.int32)))
    figures[f"{name}_largest_gradient_difference"] = float((grad - reference[2]).abs().max())
figures["staging_over_device_path"] = figures["staging_path_cuda_s"] / figures["device_path_cuda_s"]
figures["device_path_over_ace_style"] = figures["device_path_cuda_s"] / figures["ace_style_cuda_s"]
if dist.rank == 0:
    print(json.dumps(figures))
