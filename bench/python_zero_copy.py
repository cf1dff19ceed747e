"""`python_zero_copy`: how much the peak resident memory of a fresh process grows when
`gridshard.Distributed().weighted_mean(x, w)` reads a 1 GiB C-contiguous float32 field, as a fraction of
the field's size (0 when the module reads the caller's buffer in place; 1 for one copy of it).

x has shape (2, 8192, 16384) float32 (1 GiB), a numpy array or a torch tensor (--kind), allocated and
filled in place block by block (no temporary larger than a few MB, so the peak before the call is the
field itself); w are the cos-lat weights of 8192 latitudes (`gridshard.spherical_area_weights`, a broadcast
view: per-row weights). The peak (VmHWM of /proc/self/status) is read after the fill and after the call;
the result is checked against a float64 numpy sum computed block by block afterwards.

Usage: mpirun -n 1 /usr/bin/python3 python_zero_copy.py OUT_JSON --kind numpy|torch
"""

import argparse
import json
import pathlib

import numpy as np

import gridshard

SHAPE = (2, 8192, 16384)
BLOCK_ROWS = 64  # rows filled at a time: 64 x 16384 float32 = 4 MiB of temporaries


def status_kib(field):
    """A field of /proc/self/status in KiB (VmHWM: peak resident memory, VmRSS: resident now)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def fill(x):
    """Temperature-like values, written in place row block by row block (touching every page)."""
    channels, rows, cols = x.shape
    lon = np.linspace(0.0, 2.0 * np.pi, cols, endpoint=False, dtype=np.float32)
    wave = np.sin(3.0 * lon).astype(np.float32)
    for c in range(channels):
        for r0 in range(0, rows, BLOCK_ROWS):
            r = np.arange(r0, min(r0 + BLOCK_ROWS, rows), dtype=np.float32)[:, None]
            np.multiply(wave, np.float32(10.0), out=x[c, r0:r0 + r.shape[0]])
            x[c, r0:r0 + r.shape[0]] += np.float32(250.0 + c) + np.float32(40.0 / rows) * r


def reference(x, row_weights):
    """sum(w x) / sum(w) per channel in float64, block by block."""
    channels, rows, _ = x.shape
    out = []
    for c in range(channels):
        total = 0.0
        for r0 in range(0, rows, BLOCK_ROWS):
            block = x[c, r0:r0 + BLOCK_ROWS].astype(np.float64)
            total += float(row_weights[r0:r0 + BLOCK_ROWS] @ block.sum(axis=1))
        out.append(total / (float(row_weights.sum()) * x.shape[2]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--kind", choices=("numpy", "torch"), required=True)
    args = parser.parse_args()

    dist = gridshard.Distributed()
    lats = np.linspace(-90.0, 90.0, SHAPE[1])
    if args.kind == "torch":
        import torch

        tensor = torch.empty(SHAPE, dtype=torch.float32)
        x = tensor.numpy()  # the same memory, to fill in place
        field = tensor
        weights = gridshard.spherical_area_weights(torch.from_numpy(lats).float(), SHAPE[2])
    else:
        x = np.empty(SHAPE, dtype=np.float32)
        field = x
        weights = gridshard.spherical_area_weights(lats.astype(np.float32), SHAPE[2])
    fill(x)
    assert x.flags.c_contiguous

    rss_before = status_kib("VmRSS")
    hwm_before = status_kib("VmHWM")
    result = dist.weighted_mean(field, weights)
    hwm_after = status_kib("VmHWM")
    rss_after = status_kib("VmRSS")

    result = [float(v) for v in (result.tolist() if hasattr(result, "tolist") else result)]
    row_weights = np.asarray(weights)[:, 0].astype(np.float64)
    expected = reference(x, row_weights)
    agreement = max(abs(a - b) / abs(b) for a, b in zip(result, expected, strict=True))
    report = {
        "kind": args.kind,
        "shape": list(SHAPE),
        "dtype": "float32",
        "nbytes": x.nbytes,
        "vm_hwm_before_kib": hwm_before,
        "vm_hwm_after_kib": hwm_after,
        "vm_rss_before_kib": rss_before,
        "vm_rss_after_kib": rss_after,
        "peak_increase_bytes": (hwm_after - hwm_before) * 1024,
        "fraction": (hwm_after - hwm_before) * 1024 / x.nbytes,
        "result": result,
        "reference": expected,
        "result_vs_reference_max_relative_difference": agreement,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
