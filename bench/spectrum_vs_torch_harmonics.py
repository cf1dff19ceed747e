"""The spherical power spectrum of 721 x 1440 float32 fields, ACE's convention, gridshard against torch-harmonics'
RealSHT as ACE's aggregator runs it (`import fme` makes torch_harmonics.RealSHT fme's class, whose Legendre table is
float32; then |c|^2 summed over m, fme's spherical_power_spectrum), on the same cores: one field and a batch of 16,
medians of interleaved repetitions; and torch-harmonics 0.8.0's own `torch_harmonics.sht.RealSHT` (its table in
float64, about 6 times slower) beside it; and the memory each needs: torch-harmonics' Legendre table (its `weights`
buffer) and each one's peak resident memory over one call, in a process of its own (the peak reset first).

    .ace/venv/bin/python bench/spectrum_vs_torch_harmonics.py [--repetitions 5] [--threads 2] [--json OUT]

Run by run_bench.py (`make bench`, or `--only spectrum`) in ACE's venv; PYTHONPATH names the build's module."""
import argparse
import json
import os
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


def status_mib(field):
    """VmRSS or VmHWM of this process, MiB (/proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak():
    """Makes VmHWM the current resident size (Linux: 5 > /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def aces_sht():
    import fme  # noqa: F401 - replaces torch_harmonics.RealSHT by fme's float32 class, as in ACE
    import torch_harmonics

    return torch_harmonics.RealSHT(NLAT, NLON, grid="legendre-gauss")


def own_sht():
    from torch_harmonics.sht import RealSHT  # torch-harmonics' own class, its table in float64

    return RealSHT(NLAT, NLON, grid="legendre-gauss")


def one_run(which, channels, threads):
    """In a process of its own: the growth of the resident memory over one call, from after the data exist (and,
    for torch-harmonics, its table, counted apart), printed as JSON."""
    import torch

    torch.set_num_threads(threads)
    x = fields(channels)
    if which == "torch_harmonics":
        sht = aces_sht()
        reset_peak()
        before = status_mib("VmRSS")
        (sht(torch.from_numpy(x)).abs() ** 2).sum(dim=-1)
        table = sht.weights.numel() * sht.weights.element_size() / 2**20
    else:
        import gridshard

        from mpi4py import MPI

        dist = gridshard.Distributed(MPI.COMM_SELF)
        reset_peak()
        before = status_mib("VmRSS")
        dist.spherical_power_spectrum(x)
        table = 0.0
    print(json.dumps({"growth_mib": status_mib("VmHWM") - before, "table_mib": table}))


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

    import gridshard

    torch.set_num_threads(args.threads)
    dist = gridshard.Distributed(MPI.COMM_SELF)
    out = {"grid": [NLAT, NLON], "threads": args.threads, "repetitions": args.repetitions}
    for label, make in (("", aces_sht), ("own_float64_", own_sht)):
        started = time.perf_counter()
        sht = make()
        out[f"torch_harmonics_{label}table_seconds"] = time.perf_counter() - started
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
            out.setdefault(f"fields_{channels}", {}).update({
                f"gridshard_{label}s": statistics.median(ours), f"torch_harmonics_{label}s": statistics.median(theirs),
                f"{label}speedup": statistics.median(theirs) / statistics.median(ours),
                f"{label}largest_difference_relative_to_largest_power":
                    float(np.max(np.abs(ours_value - theirs_value) / scale))})
        sht = None  # this table freed before the next is built
    for channels in (1, 16):
        for which in ("gridshard", "torch_harmonics"):
            r = subprocess.run([sys.executable, __file__, "--threads", str(args.threads), "--memory-run", which,
                                str(channels)], capture_output=True, text=True, check=True, env=os.environ)
            out[f"fields_{channels}"][f"{which}_peak_growth_mib"] = json.loads(r.stdout.strip().splitlines()[-1])[
                "growth_mib"]
            if which == "torch_harmonics":
                out["torch_harmonics_table_mib"] = json.loads(r.stdout.strip().splitlines()[-1])["table_mib"]
    out["gridshard_peak_fraction_of_torch_harmonics_16_fields"] = out["fields_16"]["gridshard_peak_growth_mib"] / (
        out["torch_harmonics_table_mib"] + out["fields_16"]["torch_harmonics_peak_growth_mib"])
    out["spectrum_speedup_vs_torch_harmonics"] = out["fields_1"]["speedup"]
    out["spectrum_speedup_vs_torch_harmonics_16_fields"] = out["fields_16"]["speedup"]
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
