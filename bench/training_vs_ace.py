"""A training step's reductions through ACE's own code, on ACE's backend and on gridshard's, side by side at 1x2x2.

    .ace/venv/bin/python bench/training_vs_ace.py --out RESULT.json [--repetitions 5] [--build-dir build]

Both sides run 4 ranks (1 data x 2 lat x 2 lon) under mpirun on CPU tensors, through ACE's `Distributed`:

- ace:       ACE's ModelTorchDistributed over gloo (FME_DISTRIBUTED_BACKEND=model, FME_FORCE_CPU=1);
- gridshard: gridshard.ace.use_in_ace(aggregator=False) (FME_DISTRIBUTED_BACKEND=gridshard).

Two figures, each the forward and the backward, timed after a barrier on every rank, the slowest rank's, the median
of the repetitions:

- the area-weighted MSE, ACE's `AreaWeightedMSELoss` (`Distributed.weighted_mean((x - y)^2, area weights)`) on
  (8, 721, 1440) float32: `area_weighted_mse_backward_time_vs_ace_1x2x2` = gridshard's time / ACE's (target <= 1.5:
  gridshard's loss is exact, ACE's a float32 sum of per-rank sums);
- the gradient score, `Distributed.gradient_magnitude_percent_diff(t, p, w)` on (4, 721, 1440) float32, ACE's by
  gathering whole fields onto every rank and gridshard's by halo exchange, with its backward:
  `gradmag_backward_speedup_vs_ace_1x2x2` = ACE's time / gridshard's (target >= 10).

The driver runs mpirun once per side, re-invoking this script with `--side ace|gridshard`, and compares the two
sides' losses and the norms of their gradients (`agreement`, relative differences)."""
import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NLAT, NLON = 721, 1440
PYTHON = sys.executable


def worker(args):
    if args.side == "gridshard":
        import gridshard.ace

        gridshard.ace.use_in_ace(aggregator=False)
    else:
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
        os.environ["LOCAL_RANK"] = os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]
    import contextlib

    import numpy as np
    import torch
    from fme.core.distributed import Distributed
    from fme.core.loss import AreaWeightedMSELoss

    torch.set_num_threads(1)
    stack = contextlib.ExitStack()
    stack.enter_context(Distributed.context())
    dist = Distributed.get_instance()
    assert dist.has_spatial_parallelism
    lat = np.linspace(90, -90, NLAT)
    weights_global = np.broadcast_to(np.cos(np.deg2rad(lat))[:, None], (NLAT, NLON))
    rows, cols = dist.get_local_slices((NLAT, NLON))
    weights = torch.from_numpy(np.ascontiguousarray(weights_global[rows, cols], dtype=np.float32))
    rng = np.random.default_rng(dist.rank)

    def shard(channels):
        return torch.from_numpy(rng.standard_normal((channels, rows.stop - rows.start, cols.stop - cols.start))
                                .astype(np.float32))

    loss_module = AreaWeightedMSELoss(lambda x: dist.weighted_mean(x, weights, dim=(-2, -1)))
    target, base = shard(8), shard(8)
    truth4, base4 = shard(4), shard(4)

    def timed(step):
        times = []
        for _ in range(args.repetitions + 1):
            dist.barrier()
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return times[1:]  # the first warms

    seen = {}  # the last repetition's loss and its gradient's global sum of squares, to compare the sides

    def mse_step():
        prediction = base.clone().requires_grad_(True)
        (component,) = loss_module(prediction, target)  # ACE's StandardLoss of the (8,) channel losses
        loss = component.loss.mean()
        loss.backward()
        seen["mse"] = (loss.detach(), prediction.grad)

    def gradient_step():
        prediction = base4.clone().requires_grad_(True)
        score = dist.gradient_magnitude_percent_diff(truth4, prediction, weights, dim=(-2, -1),
                                                     img_shape=(NLAT, NLON))
        loss = score.sum()
        loss.backward()
        seen["gradient"] = (loss.detach(), prediction.grad)

    from mpi4py import MPI

    out = {"side": args.side, "backend": type(dist._distributed).__name__}
    for name, step in (("mse", mse_step), ("gradient", gradient_step)):
        everyone = MPI.COMM_WORLD.allgather(timed(step))
        out[name] = [max(times) for times in zip(*everyone)]  # the slowest rank's time of each repetition
        loss, grad = seen[name]
        squares = MPI.COMM_WORLD.allreduce(float((grad.double() ** 2).sum()))
        out[f"{name}_value"] = {"loss": float(loss), "gradient_sum_of_squares": squares}
    if dist.rank == 0:
        pathlib.Path(args.work, f"{args.side}.json").write_text(json.dumps(out))
    stack.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver(args):
    work = pathlib.Path(tempfile.mkdtemp(prefix="training_vs_ace."))
    mpirun = shutil.which("mpiexec") or "mpirun"
    results = {}
    for side in ("ace", "gridshard"):
        env = dict(os.environ, FME_FORCE_CPU="1", OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
                   OMPI_MCA_mpi_yield_when_idle="1", FME_DISTRIBUTED_H="2", FME_DISTRIBUTED_W="2",
                   PYTHONPATH=os.pathsep.join([str(pathlib.Path(args.build_dir).resolve() / "python"),
                                               os.environ.get("PYTHONPATH", "")]))
        if side == "ace":
            env.update(FME_DISTRIBUTED_BACKEND="model", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        else:
            env.update(FME_DISTRIBUTED_BACKEND="gridshard")
        command = [mpirun, "-n", "4", "--oversubscribe", PYTHON, __file__, "--side", side, "--work", str(work),
                   "--repetitions", str(args.repetitions)]
        r = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)
        if r.returncode != 0:
            results[side] = {"error": (r.stdout + r.stderr)[-3000:]}
            continue
        results[side] = json.loads((work / f"{side}.json").read_text())
    shutil.rmtree(work, ignore_errors=True)
    out = {"repetitions": args.repetitions, "sides": results}
    if all("error" not in results[s] for s in results):
        ace, ours = results["ace"], results["gridshard"]
        out["area_weighted_mse_backward_time_vs_ace_1x2x2"] = statistics.median(ours["mse"]) / statistics.median(
            ace["mse"])
        out["gradmag_backward_speedup_vs_ace_1x2x2"] = statistics.median(ace["gradient"]) / statistics.median(
            ours["gradient"])
        out["medians_s"] = {s: {k: statistics.median(results[s][k]) for k in ("mse", "gradient")} for s in results}
        # The two sides compute the same losses (ACE's float32 sums against gridshard's exact ones): their values
        # and the norms of their gradients, relative differences.
        out["agreement"] = {
            f"{name}_{what}": abs(ours[f"{name}_value"][what] - ace[f"{name}_value"][what]) / max(
                abs(ace[f"{name}_value"][what]), 1e-300)
            for name in ("mse", "gradient") for what in ("loss", "gradient_sum_of_squares")}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", choices=["ace", "gridshard"])
    parser.add_argument("--work")
    parser.add_argument("--out")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--build-dir", default=str(pathlib.Path(__file__).resolve().parent.parent / "build"))
    args = parser.parse_args()
    if args.side:
        worker(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
