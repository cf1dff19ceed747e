"""The spherical power spectrum of 721 x 1440 float32 fields, ACE's convention, gridshard against torch-harmonics'
RealSHT (the transform ACE's aggregator uses: fme's float32 RealSHT, or torch_harmonics.sht.RealSHT), on the same
cores: one field and a batch of 16, medians of interleaved repetitions; and the memory each needs: torch-harmonics'
Legendre table (its `weights` buffer) and the growth of each one's peak resident memory over a run of its own.

    .ace/venv/bin/python bench/spectrum_vs_torch_harmonics.py [--repetitions 5] [--threads 2] [--json OUT]

Run by run_bench.py (`make bench`, or `--only spectrum`) in ACE's venv; PYTHONPATH names the build's module."""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

NLAT, NLON = 721, 1440


def fields(channels):
    """Temperature-like fields: large scales plus point noise (as bench_support.hpp makes them)."""
    rng = np.random.default_rng(11)
    lat = np.deg2rad(np.linspace(90, -90, NLAT))[:, None]
    lon = np.deg2rad(np.arange(NLON) * 360 / NLON)[None, :]
    base = 280 - 40 * np.sin(lat) ** 2 + 5 * np.sin(3 * lon + 2 * lat)
    return (base[None] + rng.normal(0, 0.5, (channels, NLAT, NLON))).astype(np.float32)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_run(which, channels, threads):
    """In a process of its own: the peak RSS growth of one call (after the data and, for torch-harmonics, the
    table exist), printed as JSON."""
    import torch

    torch.set_num_threads(threads)
    x = fields(channels)
    if which == "torch_harmonics":
        from torch_harmonics.sht import RealSHT

        sht = RealSHT(NLAT, NLON, grid="legendre-gauss")
        before = peak_rss_mib()
        coefficients = sht(torch.from_numpy(x))
        (coefficients.abs() ** 2).sum(dim=-1)
        table = sht.weights.numel() * sht.weights.element_size() / 2**20
    else:
        import gridshard

        from mpi4py import MPI

        dist = gridshard.Distributed(MPI.COMM_SELF)
        before = peak_rss_mib()
        dist.spherical_power_spectrum(x)
        table = 0.0
    print(json.dumps({"growth_mib": peak_rss_mib() - before, "table_mib": table}))


def timed(call, repetitions):
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--memory-run", nargs=2, metavar=("WHICH", "CHANNELS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.memory_run:
        one_run(args.memory_run[0], int(args.memory_run[1]), args.threads)
        return
    import torch
    from mpi4py import MPI
    from torch_harmonics.sht import RealSHT

    import gridshard

    torch.set_num_threads(args.threads)
    dist = gridshard.Distributed(MPI.COMM_SELF)
    started = time.perf_counter()
    sht = RealSHT(NLAT, NLON, grid="legendre-gauss")
    table_seconds = time.perf_counter() - started
    out = {"grid": [NLAT, NLON], "threads": args.threads, "repetitions": args.repetitions,
           "torch_harmonics_table_seconds": table_seconds}
    for channels in (1, 16):
        x = fields(channels)
        tensor = torch.from_numpy(x)
        ours, theirs = [], []
        ours_value = dist.spherical_power_spectrum(x)  # warm: plans, pages
        theirs_value = ((sht(tensor).abs() ** 2).sum(dim=-1)).double().numpy()
        for _ in range(args.repetitions):  # interleaved, so a slow spell of the machine hits both
            ours += timed(lambda: dist.spherical_power_spectrum(x), 1)
            theirs += timed(lambda: (sht(tensor).abs() ** 2).sum(dim=-1), 1)
        scale = np.abs(theirs_value).max(axis=-1, keepdims=True)
        out[f"fields_{channels}"] = {
            "gridshard_s": statistics.median(ours), "torch_harmonics_s": statistics.median(theirs),
            "speedup": statistics.median(theirs) / statistics.median(ours),
            "largest_difference_relative_to_largest_power": float(np.max(np.abs(ours_value - theirs_value) / scale))}
    for channels in (1, 16):
        for which in ("gridshard", "torch_harmonics"):
            r = subprocess.run([sys.executable, __file__, "--threads", str(args.threads), "--memory-run", which,
                                str(channels)], capture_output=True, text=True, check=True, env=os.environ)
            out[f"fields_{channels}"][f"{which}_peak_growth_mib"] = json.loads(r.stdout.strip().splitlines()[-1])[
                "growth_mib"]
            if which == "torch_harmonics":
                out["torch_harmonics_table_mib"] = json.loads(r.stdout.strip().splitlines()[-1])["table_mib"]
    out["spectrum_speedup_vs_torch_harmonics"] = out["fields_1"]["speedup"]
    out["spectrum_speedup_vs_torch_harmonics_16_fields"] = out["fields_16"]["speedup"]
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
