"""The communication model of docs/scaling.md: per rank and step, the bytes and messages of each metric of
`gridshard eval` on a sharded grid, against gathering every field to every rank, and an alpha-beta estimate of
their time, for the 0.25-degree grid (721 x 1440) and a 3 km grid (6000 x 12000), 20 float32 channels, at
64, 256 and 1024 ranks.

The shards, neighbours and halo bytes come from the tool itself (`gridshard decompose --json`, no MPI), the
exact-sum sizes from numerics/exact_sum.hpp (1,144 bytes a sum; the compact sums of the zonal means 19
int64 a sum for float data), the collectives' costs from the textbook algorithms MPI libraries use
(Rabenseifner's allreduce: 2 log2 P messages and 2 n (P - 1) / P bytes; the ring allgather: P - 1
messages and N (P - 1) / P bytes received).

Usage: /usr/bin/python3 bench/comm_model.py GRIDSHARD_BIN [--alpha-beta NAME=MEASURED_JSON]... [--markdown]
(MEASURED_JSON: what bench/comm_model_bench.cpp writes, e.g. under mpirun -n 2 with and without TCP only.)
"""
import argparse
import json
import math
import subprocess

CHANNELS = 20
EXACT_SUM_BYTES = 1144         # ExactSum::wire_size * 8
COMPACT_SUM_BYTES = 19 * 8     # a windowed exact sum of float32 values (the zonal means)
FIELD_BYTES = 4                # float32
GRIDS = {"0.25 deg (721 x 1440)": (721, 1440), "3 km (6000 x 12000)": (6000, 12000)}
MESHES = ["1x8x8", "1x16x16", "4x16x16", "1x32x32"]
# Interconnects: (alpha seconds, beta bytes per second) per message.
TYPICAL = {
    "InfiniBand HDR": (1.0e-6, 23e9),
    "Slingshot-11": (2.0e-6, 23e9),
}
# Compute of the fused evaluation, ns per point of one channel pair, one core (docs/performance.md:
# 31.3 ms for (8, 721, 1440) on the 2-core VM).
EVALUATION_NS_PER_POINT = 31.3e-3 / (8 * 721 * 1440) * 1e9


def decompose(gridshard, nlat, nlon, mesh):
    out = subprocess.run([gridshard, "decompose", "--nlat", str(nlat), "--nlon", str(nlon), "--mesh", mesh,
                          "--periodic-lon", "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def rabenseifner(n_bytes, p):
    """Messages and bytes sent per rank of an allreduce of n_bytes over p ranks."""
    if p <= 1:
        return 0, 0
    return 2 * math.ceil(math.log2(p)), 2 * n_bytes * (p - 1) / p


def model(gridshard, nlat, nlon, mesh):
    d = decompose(gridshard, nlat, nlon, mesh)
    data, h, w = (int(v) for v in mesh.split("x"))
    spatial = h * w
    # The rank with the most halo bytes (an interior rank), and its box.
    worst = max(d["ranks"], key=lambda r: r["halo_bytes_per_channel"])
    rows, cols = worst["shape"]
    neighbours = sum(1 for v in worst["neighbours"].values() if v is not None and v >= 0)
    c = CHANNELS
    halo_bytes = 2 * c * worst["halo_bytes_per_channel"]  # truth and prediction
    eval_msgs, eval_bytes = rabenseifner((9 * c + 1) * EXACT_SUM_BYTES, spatial)
    zonal_msgs, zonal_bytes = rabenseifner(2 * 2 * c * rows * COMPACT_SUM_BYTES, w)
    check_msgs = 2 * math.ceil(math.log2(spatial)) if spatial > 1 else 0  # two 24-byte agreements
    field = nlat * nlon * c * FIELD_BYTES
    gather_bytes = 2 * field * (spatial - 1) / spatial  # truth and prediction to every spatial rank
    return {
        "mesh": mesh, "ranks": data * spatial, "box": [rows, cols], "neighbours": neighbours,
        "gridshard": {
            "halo": (neighbours, halo_bytes), "evaluation_allreduce": (eval_msgs, eval_bytes),
            "zonal_allreduce": (zonal_msgs, zonal_bytes), "checks": (check_msgs, check_msgs * 24),
        },
        "gather": {"allgather": (2 * (spatial - 1), gather_bytes)},
        "memory_gridshard_bytes": 2 * rows * cols * c * FIELD_BYTES + halo_bytes,
        "memory_gather_bytes": 2 * field,
        "compute_s": rows * cols * c * EVALUATION_NS_PER_POINT * 1e-9,
    }


def seconds(parts, alpha, beta):
    return sum(m * alpha + b / beta for m, b in parts.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gridshard")
    parser.add_argument("--alpha-beta", action="append", default=[],
                        help="NAME=FILE: comm_model_bench's JSON, a network measured here (repeatable)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    networks = {}
    for item in args.alpha_beta:
        name, path = item.split("=", 1)
        with open(path) as f:
            measured = json.load(f)
        networks[name] = (measured["latency_s"], measured["bandwidth_bytes_per_s"])
    networks.update(TYPICAL)
    rows = []
    for grid_name, (nlat, nlon) in GRIDS.items():
        for mesh in MESHES:
            m = model(args.gridshard, nlat, nlon, mesh)
            g, a = m["gridshard"], m["gather"]
            row = {"grid": grid_name, **{k: m[k] for k in ("mesh", "ranks", "box", "neighbours")},
                   "gridshard_bytes": sum(b for _, b in g.values()),
                   "gridshard_messages": sum(n for n, _ in g.values()),
                   "halo_bytes": g["halo"][1], "evaluation_allreduce_bytes": g["evaluation_allreduce"][1],
                   "zonal_allreduce_bytes": g["zonal_allreduce"][1],
                   "gather_bytes": a["allgather"][1], "gather_messages": a["allgather"][0],
                   "memory_gridshard_bytes": m["memory_gridshard_bytes"],
                   "memory_gather_bytes": m["memory_gather_bytes"],
                   "compute_s": m["compute_s"]}
            for name, (alpha, beta) in networks.items():
                row[f"t_gridshard[{name}]"] = seconds(g, alpha, beta)
                row[f"t_gather[{name}]"] = seconds(a, alpha, beta)
            rows.append(row)
    if not args.markdown:
        print(json.dumps({"networks": networks, "rows": rows}, indent=2))
        return
    mb = 1e6
    print("| grid | mesh (ranks) | box | halo | eval allreduce | zonal allreduce | gridshard total (msgs) "
          "| gather (msgs) | memory gridshard / gather |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['grid']} | {r['mesh']} ({r['ranks']}) | {r['box'][0]} x {r['box'][1]} "
              f"| {r['halo_bytes'] / mb:.3f} MB "
              f"| {r['evaluation_allreduce_bytes'] / mb:.3f} MB | {r['zonal_allreduce_bytes'] / mb:.3f} MB "
              f"| {r['gridshard_bytes'] / mb:.3f} MB ({r['gridshard_messages']}) "
              f"| {r['gather_bytes'] / mb:.1f} MB ({r['gather_messages']}) "
              f"| {r['memory_gridshard_bytes'] / mb:.2f} MB / {r['memory_gather_bytes'] / mb:.0f} MB |")
    print()
    names = list(networks)
    print("| grid | mesh | compute (1 core) | " + " | ".join(f"gridshard / gather, {n}" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for r in rows:
        cells = [f"{r[f't_gridshard[{n}]'] * 1e6:.0f} us / {r[f't_gather[{n}]'] * 1e3:.1f} ms" for n in names]
        print(f"| {r['grid']} | {r['mesh']} | {r['compute_s'] * 1e6:.0f} us | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
