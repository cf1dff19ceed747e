"""Runs gridshard's benchmarks (`make bench`) and reports the headline ratios.

Steps, in this order so nothing else competes for the two cores while a figure is timed:
  1. single_rank_bench (mpirun -n 1): the fused suite against a plain read of the same buffers, and
     gradient_magnitude_percent_diff; writes the .npy inputs of step 2.
  2. torch_gradmag.py and numpy_gradmag.py: the ACE-style torch pipeline (all cores) and the numpy one
     on those very arrays.
  3. halo_vs_gather_bench (mpirun -n 4, mesh 1x2x2): halo path against gather path.
  4. kernels_bench (mpirun -n 1): Google Benchmark table of the hot kernels.
  5. gridshard eval (one process) against the four CDO runs (fldmean, zonmean, fldstd, RMSE chain) on
     one generated 721 x 1440 x 4-step, three-variable file pair.
  6. The Python module (BUILD_DIR/python): python_gradmag_vs_gather.py (mpirun -n 4, mesh 1x2x2), ACE's
     gather-then-torch path against gridshard.Distributed on the same shards; small_call_bench and
     python_overhead.py (mpirun -n 1), one small weighted_mean call in C++ and through Python;
     python_zero_copy.py (a fresh process each for numpy and torch), the peak memory a weighted_mean of a
     1 GiB field adds; differentiated_call.py (mpirun -n 4, 1x2x2), differentiated reductions against the plain
     calls; device_path_overhead.py (mpirun -n 1), the device path on CPU tensors against the library;
     exact_data_sum.py (mpirun -n 2), the exact sum over the data group against MPI's;
     quantile_bench.py (mpirun -n 4), exact quantiles against a weighted mean.
  7. ensemble_bench (mpirun -n 1, one thread and all cores): the five ensemble scores of 16 members of a
     721 x 1440 field against a plain read of the members, and numpy_ensemble.py on the same arrays.
  8. gridshard eval (one process) against numpy_forecast.py (netCDF4 + numpy) on an ACE-layout forecast
     file pair (make_forecast_files.py: 2 initial conditions x 8 members x 4 lead times, 721 x 1440).
  9. comm_model_bench (mpirun -n 2, shared memory, then TCP only): this machine's latency and bandwidth, and
     the communication model of docs/scaling.md computed with them (details.communication_model).
 10. Strong scaling: gridshard eval --timings on the 721 x 1440, 16-step, three-variable pair at 1, 2, 4 and
     8 ranks (each rank's seconds per phase); the halo bytes per rank at 4, 16 and 32 ranks, which must fall
     with the perimeter, and eval runs at 16 and 32 ranks.
 11. I/O modes: the same pair, netCDF-4 and a classic (64-bit offset) copy, read with --io independent and
     --io collective at 1, 2 and 4 ranks (the slowest rank's read phase), and the built-in forecast's
     diagnostics (721 x 1440 maps) written by rank 0 or collectively; the scores must be the same bits and
     the files the same bytes.
 12. The power spectrum: one 721 x 1440 float32 field and a batch of 16 against torch-harmonics' RealSHT on the
     same cores (spectrum_vs_torch_harmonics.py, in ACE's venv), with the peak memory of each; the bytes the
     busiest rank receives at 1x2x2 and 1x4x4 over an all-gather of the fields (spectrum_traffic_bench).
 13. Training: the area-weighted MSE and the gradient score with their backward passes through ACE's
     Distributed at 1x2x2, on ACE's torch backend (gloo) and on gridshard's (training_vs_ace.py, in ACE's venv);
     the two sides' losses and gradient norms must agree.
Writes BUILD_DIR/bench/results.json and prints a table: metric, value, target, met?

Missed targets are reported, not failed: the run fails only when a program fails or when two paths
that must compute the same answer disagree (a benchmark of wrong results is worthless).

Usage: /usr/bin/python3 bench/run_bench.py [--build-dir build] [--only python|forecast]
(--only python runs step 6 alone and writes BUILD_DIR/bench/results_python.json instead; --only forecast
steps 7 and 8, into results_forecast.json; --only scaling steps 9 and 10; --only io step 11; --only spectrum step
12; --only training step 13.)
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent

# (key, target, comparison, what it is); the order of the printed table.
TARGETS = [
    ("fused_suite_fraction_of_read_bandwidth", 0.50, ">=",
     "t_read / t_suite, reproducible, (8,721,1440) f32, 1 thread"),
    ("fused_suite_fast_fraction_of_read_bandwidth", None, None, "t_read / t_suite, Summation::fast"),
    ("fused_suite_threads_speedup", 1.7, ">=", "t_suite 1 thread / t_suite all cores, reproducible, one rank"),
    ("reproducible_overhead", 0.15, "<=", "t_suite_reproducible / t_suite_fast - 1"),
    ("gradmag_fraction_of_read_bandwidth", 0.35, ">=", "t_read / t_gradmag, (3,721,1440) f32, 1 thread"),
    ("gradmag_speedup_vs_torch", 10.0, ">=", "ACE-style torch (float32, all cores) / gridshard (all cores)"),
    ("ace_window_speedup_1x2x2", 10.0, ">=", "ACE's inference aggregator (model backend, gloo) / gridshard's drop-in, "
     "one window (721x1440, 4 vars, 2 samples, 4 steps) at 1x2x2, CPU tensors"),
    ("ace_window_memory_ratio_1x2x2", 1.0, "<=", "peak RSS per rank, gridshard's drop-in / ACE's, the same window"),
    ("ace_climate_window_speedup_1x2x2", 5.0, ">=", "ACE's inference aggregator in one process on the whole tensors / "
     "gridshard's drop-in at 1x2x2, one window of a 5.1-year run (721x1440, 4 vars, 2 samples, 4 steps of 30 days) "
     "with every climate family ACE builds for it on (annual, ENSO index and coefficient, seasonal, trend, near-zero, "
     "histogram, video of one variable)"),
    ("spectrum_speedup_vs_torch_harmonics", 2.0, ">=", "torch-harmonics RealSHT + power / gridshard "
     "spherical_power_spectrum, one 721x1440 f32 field, ACE's convention, both on all cores"),
    ("spectrum_speedup_vs_torch_harmonics_16_fields", 2.0, ">=", "the same for a batch of 16 fields"),
    ("spectrum_memory_fraction_of_torch_harmonics", None, None, "gridshard's memory over one call / torch-harmonics' "
     "(its Legendre table and its call's growth), 16 fields"),
    ("spectrum_bytes_fraction_of_allgather_1x2x2", None, None, "bytes the busiest rank receives / an all-gather of "
     "the fields, one field (16 fields in the details)"),
    ("spectrum_bytes_fraction_of_allgather_1x4x4", 0.25, "<=", "the same at 1x4x4, the larger of 1 and 16 fields"),
    ("area_weighted_mse_backward_time_vs_ace_1x2x2", 1.5, "<=", "gridshard / ACE's torch backend (gloo): "
     "AreaWeightedMSELoss forward and backward, (8,721,1440) f32 at 1x2x2, exact against float32 sums"),
    ("gradmag_backward_speedup_vs_ace_1x2x2", 10.0, ">=", "ACE's gather path / gridshard's halo path: "
     "gradient_magnitude_percent_diff forward and backward, (4,721,1440) f32 at 1x2x2"),
    ("gradmag_speedup_vs_numpy", None, None, "t_numpy (float64) / t_gridshard, 1 thread"),
    ("halo_vs_gather_speedup_1x2x2", 25.0, ">=", "t_gather / t_halo, 4 ranks, (3,721,1440)"),
    ("halo_bytes_fraction_of_gather_1x2x2", 0.01, "<=", "bytes sent per rank, halo / gather"),
    ("eval_speedup_vs_cdo", 10.0, ">=", "CDO fldmean+zonmean+fldstd+rmse chain / gridshard eval, 1 process"),
    ("eval_speedup_vs_cdo_16_steps", 8.0, ">=", "the same on a 721 x 1440, 16-step, three-variable pair"),
    ("eval_over_read_16_steps", 1.5, "<=",
     "t gridshard eval / t the read-only pass (eval_read_bench: the same source, netCDF calls and buffers, nothing "
     "else), the 16-step pair, 1 process, whole runs"),
    ("eval_time_per_step_64_over_4", 1.1, "<=",
     "the wall time a step adds to eval between 16 and 64 steps over what it adds between 4 and 16 (whole runs of the "
     "4-, 16- and 64-step pairs, 1 process; the differences cancel the start-up)"),
    ("eval_quantiles_over_eval", None, None,
     "t eval --quantiles 0.5,0.99,0.9999 / t eval, the 4-step pair, 1 process (the passes after the first read the "
     "run again)"),
    ("eval_strong_scaling_2_ranks", None, None, "t(1 rank) / t(2 ranks), eval of 721 x 1440 x 16 steps x 3 variables"),
    ("eval_strong_scaling_4_ranks", None, None, "the same at 4 ranks (oversubscribed on 2 cores)"),
    ("eval_strong_scaling_8_ranks", None, None, "the same at 8 ranks (oversubscribed on 2 cores)"),
    ("io_collective_read_speedup_netcdf4_2_ranks", None, None,
     "t_read independent / t_read collective, slowest rank, eval of the 16-step pair (netCDF-4), 1x1x2"),
    ("io_collective_read_speedup_netcdf4_4_ranks", None, None, "the same at 1x2x2 (oversubscribed on 2 cores)"),
    ("io_collective_read_speedup_classic_2_ranks", None, None, "the same on a 64-bit offset copy (PnetCDF), 1x1x2"),
    ("io_collective_read_speedup_classic_4_ranks", None, None, "the same at 1x2x2 (oversubscribed on 2 cores)"),
    ("io_collective_total_speedup_netcdf4_4_ranks", None, None,
     "t independent / t collective, the whole eval (the read phase of a collective read holds the wait for the "
     "slowest rank), netCDF-4, 1x2x2"),
    ("io_collective_total_speedup_classic_4_ranks", None, None, "the same on the 64-bit offset copy"),
    ("io_collective_diagnostics_speedup_4_ranks", None, None,
     "t independent / t collective, built-in forecast 721 x 1440 with --diagnostics, whole run, 1x2x2"),
    ("python_gradmag_vs_ace_gather_1x2x2", 40.0, ">=",
     "t_ace / t_gridshard from Python, 4 ranks: gloo gathers + torch vs Distributed, (3,721,1440) f32"),
    ("python_overhead_small_us", 30.0, "<=", "us per weighted_mean call, Python minus C++, (8,16) f32, 1 rank"),
    ("python_differentiated_weighted_mean_over_plain_1x2x2", None, None,
     "t (forward + backward) / t plain call, weighted_mean of a (4,32,64) f32 tensor, 4 ranks (one library call)"),
    ("python_zero_copy", 0.05, "<", "peak RSS increase / nbytes, weighted_mean of 1 GiB f32, max of numpy, torch"),
    ("device_path_overhead_vs_library_cpu", None, None,
     "t device path (torch operations, exact sums in int64) / t library, ACE's area-weighted MSE forward + backward, "
     "(8,721,1440) f32 CPU tensors, 1 rank (on a GPU the device path avoids the host; here the library is faster)"),
    ("exact_reduce_sum_over_mpi_sum_buffer", None, None,
     "t reduce_sum(exact=True) / t reduce_sum(exact=False), 2^20 f32 over 2 data ranks (the loss-sized and row-sized "
     "figures beside it in the details)"),
    ("quantile_time_over_weighted_mean", 4.0, "<=",
     "t quantile(x, [0.5, 0.99, 0.9999]) / t weighted_mean(x, w), one (8,721,1440) f32 variable, 1x2x2 (4 ranks)"),
    ("weighted_quantile_time_over_weighted_mean", None, None,
     "t quantile(x, [0.5, 0.99, 0.9999], method='inverted_cdf', weights=area weights) / t weighted_mean(x, w), the "
     "same variable and mesh (exact sums of the weights per bin)"),
    ("device_exact_reduce_sum_over_gloo_sum_row", None, None,
     "t device path reduce_sum(exact=True) / t its exact=False (gloo's all_reduce of the tensor), 1440 f32 CPU "
     "tensors over 2 data ranks (the loss-sized and buffer-sized figures in the details)"),
    ("ensemble_scores_fraction_of_read", 0.10, ">=",
     "t_read / t_ensemble_scores, 16 members x (721,1440) f32, five scores, 1 thread"),
    ("ensemble_scores_threads_speedup", None, None, "ensemble_scores, 1 thread / all cores"),
    ("ensemble_scores_speedup_vs_numpy", 10.0, ">=", "numpy float64 (sorted members) / gridshard, 1 thread each"),
    ("climate_families_cost_over_default", 1.5, "<=",
     "gridshard eval with ACE's climate families a 4-step run takes (near-zero fractions, trend, video, seasonal, "
     "histogram) / "
     "without, one process"),
    ("forecast_eval_speedup_vs_numpy", 5.0, ">=",
     "netCDF4 + numpy / gridshard eval, ACE layout 2 ICs x 8 members x 4 leads (721,1440) f32, 1 process"),
]
PYTHON_KEYS = ("python_gradmag_vs_ace_gather_1x2x2", "python_overhead_small_us", "python_zero_copy",
               "python_differentiated_weighted_mean_over_plain_1x2x2", "device_path_overhead_vs_library_cpu",
               "exact_reduce_sum_over_mpi_sum_buffer", "device_exact_reduce_sum_over_gloo_sum_row",
               "quantile_time_over_weighted_mean", "weighted_quantile_time_over_weighted_mean")

# Results that two paths compute must agree this closely (relative), or the run fails.
AGREEMENT_TOLERANCE = 1e-9
# The gradient metric of float fields is float arithmetic per point (docs/design.md §3) and torch sums in
# float32: against those peers the percent differences agree to float accuracy, not to double's.
GRADMAG_AGREEMENT_TOLERANCE = 1e-5
# The Python figures: ACE's path sums the float32 magnitudes in float32 over the whole field (against 1e-5
# above, its sums run over 4x the points of a per-shard torch), and the module returns a float32 field's
# metrics as float32.
PYTHON_GRADMAG_AGREEMENT_TOLERANCE = 1e-4
PYTHON_FLOAT32_RESULT_TOLERANCE = 1e-6
SMALL_CALL_ROUNDS = 3  # alternate runs of small_call_bench and python_overhead.py


def mpi_launcher(build_dir):
    """mpiexec as CMake found it (so the launcher matches the MPI the binaries link), and its flags."""
    executable = None
    cache = build_dir / "CMakeCache.txt"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith("MPIEXEC_EXECUTABLE:"):
                executable = line.split("=", 1)[1].strip()
    executable = executable or shutil.which("mpiexec") or shutil.which("mpirun")
    if not executable:
        sys.exit("run_bench: no mpiexec found")
    env = dict(os.environ)
    flags = []
    version = subprocess.run([executable, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        # As the test harness: root allowed, more ranks than cores allowed, no CMA single copy (blocked in
        # containers). Busy polling is never forced; oversubscribed Open MPI yields when idle.
        flags = ["--oversubscribe", "--bind-to", "none"]  # no binding: a rank's threads get every core
        env.update(
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMPI_MCA_btl_vader_single_copy_mechanism="none",
            OMPI_MCA_rmaps_base_oversubscribe="1",
        )
    return executable, flags, env


def run(command, env=None, capture=False):
    print("+ " + " ".join(str(c) for c in command), flush=True)
    result = subprocess.run([str(c) for c in command], env=env, text=True, capture_output=capture)
    if result.returncode != 0:
        if capture:
            sys.stderr.write(result.stdout + result.stderr)
        sys.exit(f"run_bench: {command[0]} failed with status {result.returncode}")
    return result


def load(path):
    return json.loads(pathlib.Path(path).read_text())


def max_relative_difference(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


def without_samples(figures):
    return {k: v for k, v in figures.items() if not k.startswith("samples_")}


def kernel_rows(kernels_json):
    """name, time per iteration, throughput: the kernels table in results.json."""
    rows = {}
    for b in kernels_json["benchmarks"]:
        rows[b["name"]] = {
            "real_time": b["real_time"],
            "time_unit": b["time_unit"],
            "iterations": b["iterations"],
            **{k: b[k] for k in ("items_per_second", "bytes_per_second", "time_per_point") if k in b},
        }
    return rows


def cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def met(value, target, comparison):
    if target is None:
        return None
    return {">=": value >= target, "<=": value <= target, ">": value > target, "<": value < target}[comparison]


def print_table(results):
    print()
    print(f"{'metric':<45} {'value':>10}   {'target':<9} {'met?':<5}")
    print("-" * 74)
    for key, target, comparison, _ in TARGETS:
        if key not in results:
            continue  # a step not run (--only)
        value = results[key]
        ok = met(value, target, comparison)
        target_text = f"{comparison} {target:g}" if target is not None else "-"
        met_text = "-" if ok is None else ("yes" if ok else "no")
        print(f"{key:<45} {value:>10.4g}   {target_text:<9} {met_text:<5}")
    d = results["details"]
    print()
    print("medians (seconds):")
    if "suite" not in d:
        if "python" in d:
            print_python_details(d["python"])
        if "ensemble" in d:
            print_forecast_details(d)
        if "strong_scaling" in d:
            print_scaling_details(d)
        if "io_reads" in d:
            print_io_details(d)
        return
    suite, grad, halo = d["suite"], d["gradmag"], d["halo_vs_gather"]
    print(
        f"  suite (8,721,1440): read {suite['t_read_s']:.5f} ({suite['read_bandwidth_gb_s']:.1f} GB/s), "
        f"reproducible {suite['t_suite_reproducible_s']:.4f}, fast {suite['t_suite_fast_s']:.4f}"
    )
    print(
        f"  gradmag (3,721,1440): read {grad['t_read_s']:.5f}, gridshard {grad['t_gridshard_s']:.4f} "
        f"(all cores {grad['t_gridshard_all_cores_s']:.4f}), torch {grad['t_torch_s']:.4f} "
        f"({grad['torch_threads']} threads), numpy {grad['t_numpy_s']:.4f} "
        f"(from float32 {grad['t_numpy_from_float32_s']:.4f})"
    )
    print(
        f"  1x2x2 mesh: halo {halo['t_halo_s']:.4f}, gather {halo['t_gather_s']:.4f} "
        f"(of which gathers {halo['t_gather_communication_s']:.4f}); bytes/rank halo "
        f"{halo['halo_bytes_per_rank_max']:.0f}, gather {halo['gather_bytes_per_rank_max']:.0f}"
    )
    cdo = d["eval_vs_cdo"]
    print(f"  eval (721,1440) x 4 steps x 3 variables, 1 process: gridshard {cdo['t_gridshard_s']:.3f}, "
          f"4 CDO runs {cdo['t_cdo_s']:.3f}")
    cdo16 = d["eval_vs_cdo_16_steps"]
    print(f"  eval (721,1440) x 16 steps x 3 variables, 1 process: gridshard {cdo16['t_gridshard_s']:.3f}, "
          f"4 CDO runs {cdo16['t_cdo_s']:.3f}")
    q = d["eval_quantiles"]
    print(f"  eval of the 4-step pair, 1 process: {q['t_plain_s']:.3f} s, with three quantiles "
          f"{q['t_quantiles_s']:.3f} s")
    print_python_details(d["python"])
    print_forecast_details(d)
    print_scaling_details(d)
    print_io_details(d)


def print_io_details(d):
    print("  eval 721 x 1440 x 16 steps x 3 variables, read phase of the slowest rank (s), independent / collective:")
    for case, r in d["io_reads"].items():
        print(f"    {case} ({r['ranks']} ranks{', oversubscribed' if r['oversubscribed'] else ''}): "
              f"{r['independent']['read']:.3f} / {r['collective']['read']:.3f} (total {r['independent']['total']:.3f}"
              f" / {r['collective']['total']:.3f}); speed-up {r['read_speedup']:.2f}")
    t = d["io_diagnostics_s"]
    print(f"  built-in forecast with --diagnostics ({d['io_diagnostics_bytes'] / 1e6:.1f} MB), 1x2x2: independent "
          f"{t['independent']:.3f}, collective {t['collective']:.3f}")


def print_scaling_details(d):
    print("  strong scaling, eval 721 x 1440 x 16 steps x 3 variables, ms per step (slowest rank):")
    for mesh, r in d["strong_scaling"].items():
        ms = r["ms_per_step"]
        print(f"    {mesh} ({r['ranks']} ranks{', oversubscribed' if r['oversubscribed'] else ''}): "
              f"read {ms['read']:.1f}, halo {ms['halo']:.2f}, compute {ms['compute']:.2f}, allreduce "
              f"{ms['allreduce']:.2f}, zonal {ms['zonal']:.2f}, time sums {ms['time_sums']:.2f}, total "
              f"{ms['total']:.1f}; speed-up {r['speedup']:.2f}")
    for mesh, p in d["halo_bytes_by_mesh"].items():
        print(f"    halo bytes per channel, {mesh}: {p['halo_bytes_per_channel']} (box {p['box'][0]} x {p['box'][1]})")


def print_forecast_details(d):
    e, f = d["ensemble"], d["forecast_eval"]
    print(f"  ensemble scores (16,721,1440): read {e['t_read_s']:.5f}, gridshard {e['t_ensemble_s']:.4f} "
          f"(all cores {e['t_ensemble_all_cores_s']:.4f}), numpy {e['t_numpy_s']:.4f}")
    print(f"  forecast eval, ACE layout 2 x 8 x 4 (721,1440), 1 process: gridshard {f['t_gridshard_s']:.3f}, "
          f"netCDF4 + numpy {f['t_numpy_s']:.3f}")


def print_python_details(p):
    g, o, z = p["gradmag_1x2x2"], p["overhead_small"], p["zero_copy"]
    print(
        f"  python, 1x2x2 mesh (3,721,1440): ACE gather + torch {g['t_ace_gather_s']:.4f} (of which gathers "
        f"{g['t_ace_gather_communication_s']:.4f}, torch {g['torch_threads']} thread(s) per rank), "
        f"Distributed {g['t_gridshard_s']:.4f}"
    )
    print(
        f"  python, weighted_mean (8,16) per call: Python {o['t_python_us']:.2f} us, C++ {o['t_cpp_us']:.2f} us; "
        f"1 GiB weighted_mean peak RSS increase: numpy {z['numpy']['peak_increase_bytes'] / 2**20:.2f} MiB, "
        f"torch {z['torch']['peak_increase_bytes'] / 2**20:.2f} MiB"
    )


def python_figures(build_dir, out_dir, mpiexec, mpi_flags, env, repetitions):
    """Step 6: the Python module's figures and their details, and the agreement problems."""
    python_dir = build_dir / "python"
    if not (python_dir / "gridshard").is_dir():
        sys.exit(f"run_bench: no Python module in {python_dir} (configure with -DGRIDSHARD_PYTHON=ON and build)")
    py_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(python_dir), env.get("PYTHONPATH")]))}
    python = "/usr/bin/python3"
    problems = []

    # ACE's gather path against Distributed's halo path, four ranks on a 1x2x2 mesh, in one job.
    run([mpiexec, "-n", "4", *mpi_flags, python, BENCH_DIR / "python_gradmag_vs_gather.py",
         out_dir / "python_gradmag_1x2x2.json", "--repetitions", str(max(7, repetitions))], env=py_env)
    gradmag = load(out_dir / "python_gradmag_1x2x2.json")
    if gradmag["gridshard_vs_ace_max_relative_difference"] > PYTHON_GRADMAG_AGREEMENT_TOLERANCE:
        problems.append("gridshard.Distributed and ACE's gather path disagree on gradient_magnitude_percent_diff: "
                        f"{gradmag['gridshard_vs_ace_max_relative_difference']:.3g}")

    # Differentiated reductions against the plain calls, four ranks on a 1x2x2 mesh.
    run([mpiexec, "-n", "4", *mpi_flags, python, BENCH_DIR / "differentiated_call.py",
         out_dir / "python_differentiated_call.json", "--repetitions", str(max(21, 5 * repetitions))], env=py_env)
    differentiated = load(out_dir / "python_differentiated_call.json")

    # One small call, C++ and Python: medians of samples of 20000 calls, the two programs run alternately in
    # three rounds (they cannot share a process), so a drifting machine load hits both alike.
    samples = str(max(3, repetitions // 4))
    cpp_samples, py_samples = [], []
    for _ in range(SMALL_CALL_ROUNDS):
        run([mpiexec, "-n", "1", *mpi_flags, build_dir / "bin" / "small_call_bench", "--out",
             out_dir / "small_call.json", "--repetitions", samples, "--calls", "20000"], env=py_env)
        run([mpiexec, "-n", "1", *mpi_flags, python, BENCH_DIR / "python_overhead.py", out_dir / "python_overhead.json",
             "--repetitions", samples, "--calls", "20000"], env=py_env)
        cpp, py = load(out_dir / "small_call.json"), load(out_dir / "python_overhead.json")
        cpp_samples += cpp["samples_call_us"]
        py_samples += py["samples_call_us"]
    cpp["t_call_us"], py["t_call_us"] = statistics.median(cpp_samples), statistics.median(py_samples)
    small_agreement = max_relative_difference(py["result"], cpp["result"])
    if small_agreement > PYTHON_FLOAT32_RESULT_TOLERANCE:
        problems.append(f"Python and C++ weighted_mean disagree on the small grid: {small_agreement:.3g}")

    # The peak memory of one weighted_mean on a 1 GiB field, a fresh process per kind.
    zero_copy = {}
    for kind in ("numpy", "torch"):
        path = out_dir / f"python_zero_copy_{kind}.json"
        run([mpiexec, "-n", "1", *mpi_flags, python, BENCH_DIR / "python_zero_copy.py", path, "--kind", kind],
            env=py_env)
        zero_copy[kind] = load(path)
        difference = zero_copy[kind]["result_vs_reference_max_relative_difference"]
        if difference > PYTHON_FLOAT32_RESULT_TOLERANCE:
            problems.append(f"weighted_mean of the 1 GiB {kind} field disagrees with numpy's: {difference:.3g}")

    # The device path on CPU tensors against the library, one rank; it fails the run if their bits differ.
    run([mpiexec, "-n", "1", *mpi_flags, python, BENCH_DIR / "device_path_overhead.py",
         out_dir / "device_path_overhead.json", "--repetitions", str(max(3, repetitions))], env=py_env)
    device_path = load(out_dir / "device_path_overhead.json")
    # The exact sum over the data group against MPI's own, 2 data ranks.
    run([mpiexec, "-n", "2", *mpi_flags, python, BENCH_DIR / "exact_data_sum.py", out_dir / "exact_data_sum.json",
         "--repetitions", str(max(3, repetitions))], env=py_env)
    exact_data_sum = load(out_dir / "exact_data_sum.json")
    # Exact quantiles against one pass of a sum, 1x2x2.
    run([mpiexec, "-n", "4", *mpi_flags, python, BENCH_DIR / "quantile_bench.py", out_dir / "quantile.json",
         "--repetitions", str(max(3, repetitions))], env=py_env)
    quantile = load(out_dir / "quantile.json")

    figures = {
        "device_path_overhead_vs_library_cpu": device_path["device_path_overhead_vs_library_cpu"],
        "exact_reduce_sum_over_mpi_sum_buffer": exact_data_sum["exact_reduce_sum_over_mpi_sum_buffer"],
        "device_exact_reduce_sum_over_gloo_sum_row": exact_data_sum["device_exact_reduce_sum_over_gloo_sum_row"],
        "quantile_time_over_weighted_mean": quantile["quantile_time_over_weighted_mean"],
        "weighted_quantile_time_over_weighted_mean": quantile["weighted_quantile_time_over_weighted_mean"],
        "python_gradmag_vs_ace_gather_1x2x2": gradmag["t_ace_gather_s"] / gradmag["t_gridshard_s"],
        "python_gradmag_ace_gather_s": gradmag["t_ace_gather_s"],
        "python_gradmag_gridshard_s": gradmag["t_gridshard_s"],
        "python_overhead_small_us": py["t_call_us"] - cpp["t_call_us"],
        "python_zero_copy": max(z["fraction"] for z in zero_copy.values()),
        "python_differentiated_weighted_mean_over_plain_1x2x2":
            differentiated["calls"]["weighted_mean (4, 32, 64)"]["differentiated_over_plain"],
    }
    details = {
        "gradmag_1x2x2": without_samples(gradmag),
        "overhead_small": {
            "t_python_us": py["t_call_us"],
            "t_cpp_us": cpp["t_call_us"],
            "shape": py["shape"],
            "calls_per_sample": py["calls_per_sample"],
            "samples": len(py_samples),
            "cpp_threads": cpp["threads"],
            "python_vs_cpp_max_relative_difference": small_agreement,
        },
        "zero_copy": zero_copy,
        "differentiated_calls_1x2x2": differentiated["calls"],
        "device_path_overhead": without_samples(device_path),
        "exact_data_sum": {name: without_samples(call) for name, call in exact_data_sum["calls"].items()},
        "device_exact_data_sum": {name: without_samples(call)
                                  for name, call in exact_data_sum["device_path_calls"].items()},
        "quantile": {k: v for k, v in quantile.items() if k != "samples_s"},
    }
    samples_s = {
        "gradmag_1x2x2": {k: v for k, v in gradmag.items() if k.startswith("samples_")},
        "overhead_small_us": {"python": py_samples, "cpp": cpp_samples},
    }
    return figures, details, samples_s, problems


def forecast_figures(build_dir, out_dir, mpiexec, mpi_flags, env, repetitions):
    """Steps 7 and 8: the ensemble scores against a read of the members and against numpy; the forecast
    evaluation of an ACE-layout file pair against a netCDF4 + numpy pipeline. Figures, details, problems."""
    problems = []
    cores = os.cpu_count() or 1
    bench = build_dir / "bin" / "ensemble_bench"
    run([mpiexec, "-n", "1", *mpi_flags, bench, "--out", out_dir / "ensemble.json", "--data-dir", out_dir,
         "--repetitions", str(repetitions)], env={**env, "OMP_NUM_THREADS": "1"})
    run([mpiexec, "-n", "1", *mpi_flags, bench, "--out", out_dir / "ensemble_threads.json", "--data-dir", out_dir,
         "--repetitions", str(repetitions)], env={**env, "OMP_NUM_THREADS": str(cores)})
    one, threaded = load(out_dir / "ensemble.json"), load(out_dir / "ensemble_threads.json")
    run(["/usr/bin/python3", BENCH_DIR / "numpy_ensemble.py", out_dir, out_dir / "numpy_ensemble.json",
         "--repetitions", str(max(3, repetitions // 7))], env={**env, "OMP_NUM_THREADS": "1"})
    numpy_ensemble = load(out_dir / "numpy_ensemble.json")
    ensemble_agreement = max_relative_difference(one["result"], numpy_ensemble["result"])
    if ensemble_agreement > AGREEMENT_TOLERANCE:
        problems.append(f"gridshard and numpy disagree on the ensemble scores: {ensemble_agreement:.3g}")

    truth, prediction = out_dir / "forecast_truth.nc", out_dir / "forecast_pred.nc"
    if not truth.exists() or not prediction.exists():
        run(["/usr/bin/python3", BENCH_DIR / "make_forecast_files.py", truth, prediction])
    gridshard_json, numpy_json = out_dir / "forecast_eval.json", out_dir / "numpy_forecast.json"
    gridshard_command = [build_dir / "bin" / "gridshard", "eval", "--truth", truth, "--pred", prediction, "--quiet",
                         "--json", gridshard_json]
    numpy_command = ["/usr/bin/python3", BENCH_DIR / "numpy_forecast.py", truth, prediction, "8", numpy_json,
                     "--repetitions", "1"]
    print(f"+ gridshard eval vs numpy_forecast.py on {truth.name}, interleaved", flush=True)
    gridshard_samples, numpy_samples = [], []
    for _ in range(3):
        start = time.perf_counter()
        run(gridshard_command, env=env, capture=True)
        gridshard_samples.append(time.perf_counter() - start)
        run(numpy_command, env=env, capture=True)
        numpy_samples.append(load(numpy_json)["t_numpy_s"])
    tool = load(gridshard_json)["variables"]["t2m"]["per_step"]
    reference = load(numpy_json)["result"]["per_step"]
    for score, values in reference.items():
        tolerance = GRADMAG_AGREEMENT_TOLERANCE if "grad_mag" in score else AGREEMENT_TOLERANCE
        pairs = [(x, y) for x, y in zip(tool[score], values, strict=True) if y != 0 and x is not None]
        worst = max((abs(x - y) / abs(y) for x, y in pairs), default=0.0)
        if worst > tolerance:
            problems.append(f"gridshard eval and numpy_forecast.py disagree on {score}: {worst:.3g}")
    t_gridshard, t_numpy = statistics.median(gridshard_samples), statistics.median(numpy_samples)
    # ACE's climate families a 4-step run takes (the near-zero fractions with their maps, the trend, the video, the
    # seasonal means, the histograms; the annual means and the ENSO index need more than 730 days) on top of the
    # default scores, against the default scores alone, interleaved on the same pair.
    families_command = gridshard_command + ["--near-zero-fraction", "--near-zero-fraction-eps", "280",
                                            "--near-zero-fraction-include-maps", "--trend", "--video",
                                            "--enable-extended-videos", "--seasonal", "--histogram"]
    print(f"+ gridshard eval with and without the climate families on {truth.name}, interleaved", flush=True)
    default_samples, families_samples = [], []
    for _ in range(3):
        for command, samples in ((gridshard_command, default_samples), (families_command, families_samples)):
            start = time.perf_counter()
            run(command, env=env, capture=True)
            samples.append(time.perf_counter() - start)
    figures = {
        "ensemble_scores_fraction_of_read": one["fraction_of_read"],
        "ensemble_scores_threads_speedup": one["t_ensemble_s"] / threaded["t_ensemble_s"],
        "ensemble_scores_speedup_vs_numpy": numpy_ensemble["t_numpy_s"] / one["t_ensemble_s"],
        "forecast_eval_speedup_vs_numpy": t_numpy / t_gridshard,
        "climate_families_cost_over_default": statistics.median(families_samples) / statistics.median(default_samples),
    }
    details = {
        "ensemble": {**without_samples(one), "t_ensemble_all_cores_s": threaded["t_ensemble_s"], "threads": cores,
                     "t_numpy_s": numpy_ensemble["t_numpy_s"], "numpy_result": numpy_ensemble["result"],
                     "gridshard_vs_numpy_max_relative_difference": ensemble_agreement},
        "climate_families": {"families": ["near_zero_fraction (with maps)", "trend", "video (extended)", "seasonal",
                                          "histogram (one window)"],
                             "samples_default_s": default_samples, "samples_families_s": families_samples},
        "forecast_eval": {"t_gridshard_s": t_gridshard, "t_numpy_s": t_numpy, "samples_gridshard_s": gridshard_samples,
                          "samples_numpy_s": numpy_samples, "layout": "ACE: sample = 2 x 8 (member fastest), time 4",
                          "grid": [721, 1440]},
    }
    return figures, details, problems


SCALING_MESHES = [(1, "1x1x1"), (2, "1x1x2"), (4, "1x2x2"), (8, "1x2x4")]
PERIMETER_MESHES = [(4, "1x2x2"), (16, "1x4x4"), (32, "1x4x8")]


def scaling_figures(build_dir, out_dir, mpiexec, mpi_flags, env):
    """Step 10: strong scaling of `gridshard eval` on the 721 x 1440, 16-step, three-variable file pair at 1, 2,
    4 and 8 ranks (4 and 8 oversubscribed on a 2-core machine), each rank's seconds per phase (--timings); and
    the halo bytes a rank sends at 4, 16 and 32 ranks (from the tool's own decomposition), which must fall as
    the perimeter of a rank's box does. Figures, details, problems."""
    problems = []
    sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "cli"))
    import make_files  # the generator the CLI tests use

    truth, prediction = out_dir / "cdo_truth_16.nc", out_dir / "cdo_pred_16.nc"
    if not truth.exists() or not prediction.exists():
        make_files.write(truth, 721, 1440, 16, seed=1, with_levels=False)
        make_files.write(prediction, 721, 1440, 16, seed=2, shift=0.2, with_levels=False)
    runs, reference = {}, None
    for ranks, mesh in SCALING_MESHES:
        samples = []
        for _ in range(3):
            path = out_dir / f"scaling_{mesh}.json"
            run([mpiexec, "-n", str(ranks), *mpi_flags, build_dir / "bin" / "gridshard", "eval", "--truth", truth,
                 "--pred", prediction, "--mesh", mesh, "--quiet", "--timings", "--json", path], env=env, capture=True)
            document = load(path)
            scores = document["variables"]
            if reference is None:
                reference = scores
            elif scores != reference:
                problems.append(f"gridshard eval on {mesh} differs from one process")
            samples.append(document["timings"])
        # Per phase, the slowest rank, then the median over the runs.
        phases = list(samples[0]["seconds_per_rank"][0])
        worst = {p: statistics.median(max(r[p] for r in t["seconds_per_rank"]) for t in samples) for p in phases}
        steps = samples[0]["steps_per_rank"]
        runs[mesh] = {"ranks": ranks, "oversubscribed": ranks > (os.cpu_count() or 1),
                      "steps_per_rank": steps, "seconds_slowest_rank": worst,
                      "ms_per_step": {p: 1e3 * v / steps for p, v in worst.items()}}
    base = runs["1x1x1"]["seconds_slowest_rank"]["total"]
    for mesh, r in runs.items():
        r["speedup"] = base / r["seconds_slowest_rank"]["total"]
    perimeter = {}
    for ranks, mesh in PERIMETER_MESHES:
        decomposition = json.loads(run([build_dir / "bin" / "gridshard", "decompose", "--nlat", "721", "--nlon", "1440",
                                        "--mesh", mesh, "--periodic-lon", "--json"], capture=True).stdout)
        worst = max(decomposition["ranks"], key=lambda r: r["halo_bytes_per_channel"])
        rows, cols = worst["shape"]
        perimeter[mesh] = {"ranks": ranks, "halo_bytes_per_channel": worst["halo_bytes_per_channel"],
                           "box": [rows, cols], "perimeter_cells": 2 * (rows + cols)}
    previous = None
    for mesh, p in perimeter.items():
        p["bytes_per_perimeter_cell"] = p["halo_bytes_per_channel"] / p["perimeter_cells"]
        if previous is not None and not p["halo_bytes_per_channel"] < previous["halo_bytes_per_channel"]:
            problems.append(f"halo bytes per rank did not fall from {previous['mesh']} to {mesh}")
        p["mesh"] = mesh
        previous = p
    # And the gradient metric's exchange really runs at 16 and 32 ranks, bits as one process.
    small = ["eval", "--nlat", "181", "--nlon", "360", "--ntime", "2", "--quiet", "--timings"]
    run([build_dir / "bin" / "gridshard", *small, "--json", out_dir / "perimeter_1x1x1.json"], capture=True)
    one = load(out_dir / "perimeter_1x1x1.json")["variables"]
    for ranks, mesh in PERIMETER_MESHES[1:]:
        path = out_dir / f"perimeter_{mesh}.json"
        run([mpiexec, "-n", str(ranks), *mpi_flags, build_dir / "bin" / "gridshard", *small, "--mesh", mesh,
             "--json", path], env=env, capture=True)
        document = load(path)
        if document["variables"] != one:
            problems.append(f"gridshard eval on {mesh} differs from one process")
        perimeter[mesh]["eval_halo_s_slowest_rank"] = max(r["halo"] for r in document["timings"]["seconds_per_rank"])
    figures = {"eval_strong_scaling_2_ranks": runs["1x1x2"]["speedup"],
               "eval_strong_scaling_4_ranks": runs["1x2x2"]["speedup"],
               "eval_strong_scaling_8_ranks": runs["1x2x4"]["speedup"]}
    return figures, {"strong_scaling": runs, "halo_bytes_by_mesh": perimeter}, problems


IO_MESHES = [(1, "1x1x1"), (2, "1x1x2"), (4, "1x2x2")]


def io_figures(build_dir, out_dir, mpiexec, mpi_flags, env, repetitions=3):
    """Step 11: --io independent against --io collective. The 16-step pair of step 10 (netCDF-4, HDF5
    through parallel netCDF) and a 64-bit offset copy (PnetCDF), at 1, 2 and 4 ranks: the slowest rank's read
    phase (--timings), the median of alternating runs; then the built-in forecast (721 x 1440, 2 initial
    conditions x 4 members x 3 leads) with --diagnostics at 1x2x2, whole runs. Figures, details, problems."""
    problems = []
    gridshard = build_dir / "bin" / "gridshard"
    files = {"netcdf4": (out_dir / "cdo_truth_16.nc", out_dir / "cdo_pred_16.nc")}
    if not all(p.exists() for p in files["netcdf4"]):
        sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "cli"))
        import make_files  # the generator the CLI tests use
        make_files.write(files["netcdf4"][0], 721, 1440, 16, seed=1, with_levels=False)
        make_files.write(files["netcdf4"][1], 721, 1440, 16, seed=2, shift=0.2, with_levels=False)
    files["classic"] = tuple(out_dir / (p.stem + "_cdf2.nc") for p in files["netcdf4"])
    for source, copy in zip(files["netcdf4"], files["classic"]):
        if not copy.exists():
            run(["nccopy", "-u", "-k", "nc6", source, copy])
    reads, reference = {}, {}
    for fmt, (truth, prediction) in files.items():
        for ranks, mesh in IO_MESHES:
            samples = {"independent": [], "collective": []}
            for _ in range(repetitions):
                for mode in samples:
                    path = out_dir / f"io_{fmt}_{mesh}_{mode}.json"
                    run([mpiexec, "-n", str(ranks), *mpi_flags, gridshard, "eval", "--truth", truth, "--pred",
                         prediction, "--mesh", mesh, "--io", mode, "--quiet", "--timings", "--json", path], env=env,
                        capture=True)
                    document = load(path)
                    if reference.setdefault(fmt, document["variables"]) != document["variables"]:
                        problems.append(f"eval --io {mode} on {fmt} at {mesh} differs from one independent process")
                    per_rank = document["timings"]["seconds_per_rank"]
                    samples[mode].append({"read": max(r["read"] for r in per_rank),
                                          "total": max(r["total"] for r in per_rank)})
            reads[f"{fmt}_{mesh}"] = {
                mode: {k: statistics.median(s[k] for s in runs) for k in ("read", "total")}
                for mode, runs in samples.items()}
            reads[f"{fmt}_{mesh}"]["ranks"] = ranks
            reads[f"{fmt}_{mesh}"]["oversubscribed"] = ranks > (os.cpu_count() or 1)
    for value in reads.values():
        value["read_speedup"] = value["independent"]["read"] / value["collective"]["read"]
        value["total_speedup"] = value["independent"]["total"] / value["collective"]["total"]
    forecast = ["eval", "--initial-conditions", "2", "--ensemble-size", "4", "--ntime", "3", "--quiet"]
    written, times = {}, {"independent": [], "collective": []}
    for _ in range(repetitions):
        for mode in times:
            folder = out_dir / f"io_diagnostics_{mode}"
            folder.mkdir(exist_ok=True)
            began = time.monotonic()
            run([mpiexec, "-n", "4", *mpi_flags, gridshard, *forecast, "--mesh", "1x2x2", "--io", mode,
                 "--diagnostics", folder], env=env, capture=True)
            times[mode].append(time.monotonic() - began)
            written[mode] = {p.name: p.read_bytes() for p in sorted(folder.glob("*.nc"))}
    if written["independent"] != written["collective"]:
        problems.append("the diagnostics written collectively differ from rank 0's")
    diagnostics = {mode: statistics.median(t) for mode, t in times.items()}
    figures = {
        "io_collective_read_speedup_netcdf4_2_ranks": reads["netcdf4_1x1x2"]["read_speedup"],
        "io_collective_read_speedup_netcdf4_4_ranks": reads["netcdf4_1x2x2"]["read_speedup"],
        "io_collective_read_speedup_classic_2_ranks": reads["classic_1x1x2"]["read_speedup"],
        "io_collective_read_speedup_classic_4_ranks": reads["classic_1x2x2"]["read_speedup"],
        "io_collective_total_speedup_netcdf4_4_ranks": reads["netcdf4_1x2x2"]["total_speedup"],
        "io_collective_total_speedup_classic_4_ranks": reads["classic_1x2x2"]["total_speedup"],
        "io_collective_diagnostics_speedup_4_ranks": diagnostics["independent"] / diagnostics["collective"],
    }
    return figures, {"io_reads": reads, "io_diagnostics_s": diagnostics,
                     "io_diagnostics_bytes": sum(len(b) for b in written["collective"].values())}, problems


def communication_model(build_dir, out_dir, mpiexec, mpi_flags, env, tcp_flags):
    """Step 9: this machine's alpha and beta (shared memory, and TCP only when the MPI has flags for it), and the
    communication model of docs/scaling.md computed with them."""
    transports = {"here, shared memory": ("shm", [])}
    if tcp_flags:
        transports["here, TCP"] = ("tcp", tcp_flags)
    measured, arguments = {}, []
    for name, (tag, extra) in transports.items():
        path = out_dir / f"comm_model_{tag}.json"
        run([mpiexec, "-n", "2", *mpi_flags, *extra, build_dir / "bin" / "comm_model_bench", "--out", path], env=env)
        measured[name] = load(path)
        arguments += ["--alpha-beta", f"{name}={path}"]
    model = run(["/usr/bin/python3", BENCH_DIR / "comm_model.py", build_dir / "bin" / "gridshard", *arguments],
                capture=True)
    return {"measured": measured, "model": json.loads(model.stdout)}


def with_targets(results):
    """results with the targets and the met flags of the figures it holds."""
    results["targets"] = {key: {"target": t, "comparison": c, "meaning": m}
                          for key, t, c, m in TARGETS if t and key in results}
    results["met"] = {key: met(results[key], t, c) for key, t, c, _ in TARGETS if t and key in results}
    return results


def time_eval_against_cdo(gridshard, out_dir, repetitions, ntime=4):
    """Median wall time of `gridshard eval` (one process, cell_area weights, every score of the three
    variables of truth and prediction) against the four CDO runs a user would need for fldmean, zonmean,
    fldstd and RMSE, on one generated 721 x 1440 x `ntime` CF file pair."""
    sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "cli"))
    import make_files  # the generator the CLI tests use

    suffix = "" if ntime == 4 else f"_{ntime}"
    truth, prediction = out_dir / f"cdo_truth{suffix}.nc", out_dir / f"cdo_pred{suffix}.nc"
    if not truth.exists() or not prediction.exists():
        make_files.write(truth, 721, 1440, ntime, seed=1, with_levels=False)
        make_files.write(prediction, 721, 1440, ntime, seed=2, shift=0.2, with_levels=False)
    gridshard_command = [gridshard, "eval", "--truth", truth, "--pred", prediction, "--weights", "cell_area",
                         "--quiet", "--json", out_dir / "eval_vs_cdo.json"]
    cdo = ["cdo", "-s", "-b", "F64"]
    cdo_commands = [
        [*cdo, "fldmean", truth, out_dir / "cdo_fldmean.nc"],
        [*cdo, "zonmean", truth, out_dir / "cdo_zonmean.nc"],
        [*cdo, "fldstd", truth, out_dir / "cdo_fldstd.nc"],
        [*cdo, "-sqrt", "-fldmean", "-sqr", "-sub", prediction, truth, out_dir / "cdo_rmse.nc"],
    ]

    def wall(commands):
        start = time.perf_counter()
        for command in commands:
            result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"run_bench: {command[0]} failed: {result.stderr.strip()}")
        return time.perf_counter() - start

    print(f"+ gridshard eval vs 4 CDO runs on {truth.name}, {repetitions} repetitions", flush=True)
    gridshard_samples, cdo_samples = [], []
    for _ in range(repetitions):  # interleaved, so drifting machine load hits both alike
        gridshard_samples.append(wall([gridshard_command]))
        cdo_samples.append(wall(cdo_commands))
    return {"t_gridshard_s": sorted(gridshard_samples)[len(gridshard_samples) // 2],
            "t_cdo_s": sorted(cdo_samples)[len(cdo_samples) // 2],
            "samples_gridshard_s": gridshard_samples, "samples_cdo_s": cdo_samples,
            "grid": [721, 1440], "ntime": ntime, "variables": ["t2m", "sst", "z"]}


def wall_times(commands, repetitions):
    """Median wall time of each of `commands` (label -> argv), the commands alternating in every repetition."""
    samples = {label: [] for label in commands}
    for _ in range(repetitions):
        for label, command in commands.items():
            start = time.perf_counter()
            result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"run_bench: {command[0]} failed: {result.stderr.strip()}")
            samples[label].append(time.perf_counter() - start)
    return {label: statistics.median(v) for label, v in samples.items()}, samples


def time_eval_against_read(gridshard, read_bench, out_dir, repetitions):
    """Median wall times of `gridshard eval` and of the read-only pass of the same files (eval_read_bench), one process
    each, alternating, on the 16-step pair time_eval_against_cdo wrote."""
    truth, prediction = out_dir / "cdo_truth_16.nc", out_dir / "cdo_pred_16.nc"
    print(f"+ gridshard eval vs its read alone on {truth.name}, {repetitions} repetitions", flush=True)
    medians, samples = wall_times({
        "eval": [gridshard, "eval", "--truth", truth, "--pred", prediction, "--weights", "cell_area", "--quiet",
                 "--json", out_dir / "eval_read_eval.json"],
        "read": [read_bench, "--truth", truth, "--pred", prediction, "--out", out_dir / "eval_read.json"]},
        repetitions)
    return {"t_eval_s": medians["eval"], "t_read_s": medians["read"], "samples": samples}


def time_eval_steps(gridshard, out_dir, repetitions):
    """Median wall times of `gridshard eval` on the 4-, 16- and 64-step pairs of the same generator, one process,
    alternating, and what a step adds in the long run ((t64 - t16) / 48) and in the short one ((t16 - t4) / 12): the
    differences cancel the start-up, which whole runs include."""
    sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "cli"))
    import make_files  # the generator the CLI tests use

    truth, prediction = out_dir / "cdo_truth_64.nc", out_dir / "cdo_pred_64.nc"
    if not truth.exists() or not prediction.exists():
        make_files.write(truth, 721, 1440, 64, seed=1, with_levels=False)
        make_files.write(prediction, 721, 1440, 64, seed=2, shift=0.2, with_levels=False)
    print(f"+ gridshard eval on 4, 16 and 64 steps, {repetitions} repetitions", flush=True)
    commands = {n: [gridshard, "eval", "--truth", out_dir / f"cdo_truth{suffix}.nc", "--pred",
                    out_dir / f"cdo_pred{suffix}.nc", "--weights", "cell_area", "--quiet", "--json",
                    out_dir / f"eval_steps_{n}.json"] for n, suffix in ((4, ""), (16, "_16"), (64, "_64"))}
    medians, samples = wall_times(commands, repetitions)
    return {"t_4_steps_s": medians[4], "t_16_steps_s": medians[16], "t_64_steps_s": medians[64],
            "t_step_4_to_16_s": (medians[16] - medians[4]) / 12, "t_step_16_to_64_s": (medians[64] - medians[16]) / 48,
            "samples": {str(n): v for n, v in samples.items()}}


def time_eval_quantiles(gridshard, out_dir, repetitions):
    """Median wall times of `gridshard eval` with and without three exact quantiles, alternating, one process, on the
    4-step pair time_eval_against_cdo wrote."""
    base = [gridshard, "eval", "--truth", out_dir / "cdo_truth.nc", "--pred", out_dir / "cdo_pred.nc", "--weights",
            "cell_area", "--quiet", "--json", out_dir / "eval_quantiles.json"]
    samples = {"plain": [], "quantiles": []}
    print(f"+ gridshard eval with and without --quantiles, {repetitions} repetitions", flush=True)
    for _ in range(repetitions):
        for label, extra in (("plain", []), ("quantiles", ["--quantiles", "0.5,0.99,0.9999"])):
            start = time.perf_counter()
            result = subprocess.run([str(c) for c in base + extra], capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"run_bench: gridshard eval {' '.join(extra)} failed: {result.stderr.strip()}")
            samples[label].append(time.perf_counter() - start)
    medians = {label: sorted(v)[len(v) // 2] for label, v in samples.items()}
    return {"t_plain_s": medians["plain"], "t_quantiles_s": medians["quantiles"], "samples": samples}


def ace_figures(build_dir, out_dir, repetitions=5):
    """ACE's inference aggregator and gridshard's drop-in on one window, side by side (bench/ace_window.py, in ACE's
    venv, made by scripts/ace-venv.sh): the ratios and the raw figures, or none with the reason."""
    venv_python = ROOT / ".ace" / "venv" / "bin" / "python"
    if not venv_python.exists():
        return {}, {"ace_window": "skipped: no ACE venv (bash scripts/ace-venv.sh .ace/venv)"}, []
    out = out_dir / "ace_window.json"
    run([venv_python, BENCH_DIR / "ace_window.py", "--out", out, "--repetitions", str(repetitions),
         "--build-dir", build_dir])
    figures = load(out)
    ratios = {k: figures[k] for k in ("ace_window_speedup_1x2x2", "ace_window_memory_ratio_1x2x2") if k in figures}
    problems = [] if len(ratios) == 2 else [f"ace_window: a side failed ({out} has its error)"]
    details = {"ace_window": {k: v for k, v in figures.items() if k not in ratios}}
    climate_out = out_dir / "ace_climate_window.json"  # the same window of a climate run, every climate family on
    run([venv_python, BENCH_DIR / "ace_window.py", "--climate", "--out", climate_out, "--repetitions",
         str(repetitions), "--build-dir", build_dir])
    climate = load(climate_out)
    if "ace_climate_window_speedup_1x2x2" in climate:
        ratios["ace_climate_window_speedup_1x2x2"] = climate["ace_climate_window_speedup_1x2x2"]
    else:
        problems.append(f"ace_climate_window: a side failed ({climate_out} has its error)")
    details["ace_climate_window"] = {k: v for k, v in climate.items() if k not in ratios}
    return ratios, details, problems


def spectrum_figures(build_dir, out_dir, mpiexec, mpi_flags, env, repetitions=5):
    """Step 12: the spectrum against torch-harmonics (in ACE's venv, which has it) and its bytes per rank."""
    figures, details, problems = {}, {}, []
    venv_python = ROOT / ".ace" / "venv" / "bin" / "python"
    if venv_python.exists():
        out = out_dir / "spectrum_vs_torch_harmonics.json"
        run([venv_python, BENCH_DIR / "spectrum_vs_torch_harmonics.py", "--repetitions", str(repetitions),
             "--threads", str(os.cpu_count() or 1), "--json", out],
            env={**os.environ, "PYTHONPATH": str(build_dir / "python")})
        th = load(out)
        figures["spectrum_speedup_vs_torch_harmonics"] = th["spectrum_speedup_vs_torch_harmonics"]
        figures["spectrum_speedup_vs_torch_harmonics_16_fields"] = th["spectrum_speedup_vs_torch_harmonics_16_fields"]
        figures["spectrum_memory_fraction_of_torch_harmonics"] = \
            th["gridshard_peak_fraction_of_torch_harmonics_16_fields"]
        details["spectrum_vs_torch_harmonics"] = th
        for channels in (1, 16):
            difference = th[f"fields_{channels}"]["largest_difference_relative_to_largest_power"]
            if difference > 1e-4:  # ACE's float32 table against gridshard's float64 transform
                problems.append(f"spectrum: gridshard and torch-harmonics disagree by {difference:.3g} ({channels})")
    else:
        details["spectrum_vs_torch_harmonics"] = "skipped: no ACE venv (bash scripts/ace-venv.sh .ace/venv)"
    traffic = {}
    for ranks, mesh in ((4, "1x2x2"), (16, "1x4x4")):
        for channels in (1, 16):
            out = out_dir / f"spectrum_traffic_{mesh}_{channels}.json"
            run([mpiexec, "-n", str(ranks), *mpi_flags, build_dir / "bin" / "spectrum_traffic_bench", "--mesh", mesh,
                 "--channels", str(channels), "--json", out], env={**env, "OMP_NUM_THREADS": "1"})
            traffic[f"{mesh}_{channels}_fields"] = load(out)
    figures["spectrum_bytes_fraction_of_allgather_1x2x2"] = traffic["1x2x2_1_fields"]["fraction_of_allgather"]
    figures["spectrum_bytes_fraction_of_allgather_1x4x4"] = max(
        traffic["1x4x4_1_fields"]["fraction_of_allgather"], traffic["1x4x4_16_fields"]["fraction_of_allgather"])
    details["spectrum_traffic"] = traffic
    return figures, details, problems


def training_figures(build_dir, out_dir, repetitions=7):
    """Step 13: a training step's reductions through ACE's Distributed, its backend against gridshard's."""
    venv_python = ROOT / ".ace" / "venv" / "bin" / "python"
    if not venv_python.exists():
        return {}, {"training_vs_ace": "skipped: no ACE venv (bash scripts/ace-venv.sh .ace/venv)"}, []
    out = out_dir / "training_vs_ace.json"
    run([venv_python, BENCH_DIR / "training_vs_ace.py", "--repetitions", str(repetitions), "--out", out,
         "--build-dir", build_dir])
    figures = load(out)
    keys = ("area_weighted_mse_backward_time_vs_ace_1x2x2", "gradmag_backward_speedup_vs_ace_1x2x2")
    if not all(k in figures for k in keys):
        return {}, {"training_vs_ace": figures}, [f"training: a side failed ({out} has its error)"]
    problems = [f"training: the sides' {name} differ by {difference:.3g}"
                for name, difference in figures["agreement"].items() if difference > 1e-4]
    return {k: figures[k] for k in keys}, {"training_vs_ace": {k: v for k, v in figures.items() if k not in keys}}, \
        problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=pathlib.Path, default=pathlib.Path("build"))
    parser.add_argument("--repetitions", type=int, default=21, help="timed repetitions per figure")
    parser.add_argument("--kernel-min-time", type=float, default=0.2, help="Google Benchmark min time, seconds")
    parser.add_argument("--only", choices=["python", "forecast", "scaling", "io", "ace", "spectrum", "training"],
                        help="run only these steps (python: step 6; forecast: steps 7 and 8; scaling: steps 9 and 10; "
                        "io: step 11; spectrum: step 12; training: step 13), writing results_STEPS.json instead of "
                        "results.json")
    args = parser.parse_args()

    started = time.monotonic()
    build_dir = args.build_dir.resolve()
    bin_dir = build_dir / "bin"
    out_dir = build_dir / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    mpiexec, mpi_flags, env = mpi_launcher(build_dir)
    reps = str(args.repetitions)

    if args.only == "python":
        figures, details, samples_s, problems = python_figures(build_dir, out_dir, mpiexec, mpi_flags, env,
                                                               args.repetitions)
        results = with_targets(dict(figures))
        results["details"] = {
            "python": details,
            "samples_s": {"python": samples_s},
            "machine": machine(),
            "repetitions": args.repetitions,
            "bench_seconds": round(time.monotonic() - started, 1),
        }
        finish(results, out_dir / "results_python.json", problems)
        return

    tcp_flags = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"] \
        if "--oversubscribe" in mpi_flags else []

    def scaling_steps():
        figures, details, problems = scaling_figures(build_dir, out_dir, mpiexec, mpi_flags, env)
        details["communication_model"] = communication_model(build_dir, out_dir, mpiexec, mpi_flags, env, tcp_flags)
        return figures, details, problems

    # The other --only choices: (figures, details, problems) of their steps, and what their details also record.
    only_steps = {
        "ace": (lambda: ace_figures(build_dir, out_dir), {}),
        "spectrum": (lambda: spectrum_figures(build_dir, out_dir, mpiexec, mpi_flags, env), {}),
        "training": (lambda: training_figures(build_dir, out_dir), {}),
        "forecast": (lambda: forecast_figures(build_dir, out_dir, mpiexec, mpi_flags, env, args.repetitions),
                     {"repetitions": args.repetitions}),
        "scaling": (scaling_steps, {}),
        "io": (lambda: io_figures(build_dir, out_dir, mpiexec, mpi_flags, env), {}),
    }
    if args.only in only_steps:
        steps, recorded = only_steps[args.only]
        figures, details, problems = steps()
        results = with_targets(dict(figures))
        results["details"] = {**details, "machine": machine(), **recorded,
                              "bench_seconds": round(time.monotonic() - started, 1)}
        finish(results, out_dir / f"results_{args.only}.json", problems)
        return

    # 1. One rank, one thread: suite against the read loop, and the gradient metric; then the suite again
    #    with a thread per core, for the threads' speed-up.
    cores = os.cpu_count() or 1
    run([mpiexec, "-n", "1", *mpi_flags, bin_dir / "single_rank_bench", "--out", out_dir / "single_rank.json",
         "--data-dir", out_dir, "--repetitions", reps], env={**env, "OMP_NUM_THREADS": "1"})
    single = load(out_dir / "single_rank.json")
    suite, grad = single["suite"], single["gradmag"]
    run([mpiexec, "-n", "1", *mpi_flags, bin_dir / "single_rank_bench", "--out", out_dir / "single_rank_threads.json",
         "--data-dir", out_dir, "--repetitions", reps], env={**env, "OMP_NUM_THREADS": str(cores)})
    threaded = load(out_dir / "single_rank_threads.json")["suite"]

    threaded_grad = load(out_dir / "single_rank_threads.json")["gradmag"]

    # 2. torch and numpy on the same arrays, with the system interpreter and its Debian packages.
    run(["/usr/bin/python3", BENCH_DIR / "torch_gradmag.py", out_dir, out_dir / "torch_gradmag.json",
         "--repetitions", reps])
    torch_figures = load(out_dir / "torch_gradmag.json")
    torch_agreement = max_relative_difference(grad["result"], torch_figures["result"])
    run(["/usr/bin/python3", BENCH_DIR / "numpy_gradmag.py", out_dir, out_dir / "numpy_gradmag.json",
         "--repetitions", reps])
    numpy_figures = load(out_dir / "numpy_gradmag.json")
    numpy_agreement = max_relative_difference(grad["result"], numpy_figures["result"])

    # 3. Four ranks on a 1x2x2 mesh: halo path against gather path.
    run([mpiexec, "-n", "4", *mpi_flags, bin_dir / "halo_vs_gather_bench", "--mesh", "1x2x2", "--out",
         out_dir / "halo_vs_gather.json", "--repetitions", reps], env=env)
    halo = load(out_dir / "halo_vs_gather.json")

    # 4. The kernels table (printed by Google Benchmark as it runs).
    run([mpiexec, "-n", "1", *mpi_flags, bin_dir / "kernels_bench", f"--benchmark_min_time={args.kernel_min_time}",
         "--benchmark_color=false", f"--benchmark_out={out_dir / 'kernels.json'}", "--benchmark_out_format=json"],
        env=env)
    kernels = load(out_dir / "kernels.json")

    # 5. The whole tool on one process against CDO's four runs, on the same 721 x 1440 x 4 file.
    eval_vs_cdo = time_eval_against_cdo(bin_dir / "gridshard", out_dir, max(3, args.repetitions // 7))
    eval_vs_cdo_16 = time_eval_against_cdo(bin_dir / "gridshard", out_dir, 3, ntime=16)
    eval_quantiles = time_eval_quantiles(bin_dir / "gridshard", out_dir, 5)
    eval_read = time_eval_against_read(bin_dir / "gridshard", bin_dir / "eval_read_bench", out_dir, 5)
    eval_steps = time_eval_steps(bin_dir / "gridshard", out_dir, 3)

    # 6. The Python module: ACE's gather path against Distributed, the per-call overhead, zero copy.
    python_results, python_details, python_samples, problems = python_figures(
        build_dir, out_dir, mpiexec, mpi_flags, env, args.repetitions)

    # 9 and 10. The communication model's alpha and beta, measured here, and the strong scaling (docs/scaling.md).
    communication = communication_model(build_dir, out_dir, mpiexec, mpi_flags, env, tcp_flags)
    scaling_results, scaling_details, scaling_problems = scaling_figures(build_dir, out_dir, mpiexec, mpi_flags, env)
    problems += scaling_problems
    # 11. Independent against collective I/O.
    io_results, io_details, io_problems = io_figures(build_dir, out_dir, mpiexec, mpi_flags, env)
    problems += io_problems

    # 7 and 8. The ensemble scores and the forecast evaluation.
    forecast_results, forecast_details, forecast_problems = forecast_figures(
        build_dir, out_dir, mpiexec, mpi_flags, env, args.repetitions)
    problems += forecast_problems
    ace_results, ace_details, ace_problems = ace_figures(build_dir, out_dir)
    problems += ace_problems
    # 12. The power spectrum.
    spectrum_results, spectrum_details, spectrum_problems = spectrum_figures(build_dir, out_dir, mpiexec, mpi_flags,
                                                                             env)
    problems += spectrum_problems
    # 13. Training against ACE's backend.
    training_results, training_details, training_problems = training_figures(build_dir, out_dir)
    problems += training_problems

    for peer, agreement in (("numpy", numpy_agreement), ("torch", torch_agreement)):
        if agreement > GRADMAG_AGREEMENT_TOLERANCE:
            problems.append(f"gridshard and {peer} disagree on gradient_magnitude_percent_diff: {agreement:.3g}")
    if halo["halo_vs_gather_result_max_relative_difference"] > AGREEMENT_TOLERANCE:
        problems.append("halo and gather paths disagree: "
                        f"{halo['halo_vs_gather_result_max_relative_difference']:.3g}")
    if suite["fast_vs_reproducible_max_relative_difference"] > AGREEMENT_TOLERANCE:
        problems.append("fast and reproducible suites disagree: "
                        f"{suite['fast_vs_reproducible_max_relative_difference']:.3g}")

    results = {
        "fused_suite_fraction_of_read_bandwidth": suite["fraction_reproducible"],
        "fused_suite_fast_fraction_of_read_bandwidth": suite["fraction_fast"],
        "fused_suite_threads_speedup": suite["t_suite_reproducible_s"] / threaded["t_suite_reproducible_s"],
        "reproducible_overhead": suite["reproducible_overhead"],
        "gradmag_fraction_of_read_bandwidth": grad["fraction_of_read"],
        "gradmag_speedup_vs_torch": torch_figures["t_torch_s"] / threaded_grad["t_gridshard_s"],
        "gradmag_speedup_vs_numpy": numpy_figures["t_numpy_s"] / grad["t_gridshard_s"],
        "halo_vs_gather_speedup_1x2x2": halo["t_gather_s"] / halo["t_halo_s"],
        "halo_bytes_fraction_of_gather_1x2x2": halo["bytes_fraction_max_over_ranks"],
        "eval_speedup_vs_cdo": eval_vs_cdo["t_cdo_s"] / eval_vs_cdo["t_gridshard_s"],
        "eval_speedup_vs_cdo_16_steps": eval_vs_cdo_16["t_cdo_s"] / eval_vs_cdo_16["t_gridshard_s"],
        "eval_over_read_16_steps": eval_read["t_eval_s"] / eval_read["t_read_s"],
        "eval_time_per_step_64_over_4": eval_steps["t_step_16_to_64_s"] / eval_steps["t_step_4_to_16_s"],
        "eval_quantiles_over_eval": eval_quantiles["t_quantiles_s"] / eval_quantiles["t_plain_s"],
        **python_results,
        **forecast_results,
        **scaling_results,
        **io_results,
        **ace_results,
        **spectrum_results,
        **training_results,
    }
    with_targets(results)
    results["details"] = {
        "suite": without_samples(suite),
        "suite_threads": {**without_samples(threaded), "threads": cores},
        "gradmag": {
            **without_samples(grad),
            "t_numpy_s": numpy_figures["t_numpy_s"],
            "t_numpy_from_float32_s": numpy_figures["t_numpy_from_float32_s"],
            "speedup_vs_numpy_from_float32": numpy_figures["t_numpy_from_float32_s"] / grad["t_gridshard_s"],
            "numpy_result": numpy_figures["result"],
            "numpy_version": numpy_figures["numpy_version"],
            "gridshard_vs_numpy_max_relative_difference": numpy_agreement,
            "t_gridshard_all_cores_s": threaded_grad["t_gridshard_s"],
            "t_torch_s": torch_figures["t_torch_s"],
            "torch_threads": torch_figures["threads"],
            "torch_version": torch_figures["torch_version"],
            "torch_result": torch_figures["result"],
            "gridshard_vs_torch_max_relative_difference": torch_agreement,
        },
        "halo_vs_gather": without_samples(halo),
        "eval_vs_cdo": eval_vs_cdo,
        "eval_vs_cdo_16_steps": eval_vs_cdo_16,
        "eval_quantiles": eval_quantiles,
        "eval_read": eval_read,
        "eval_steps": eval_steps,
        "kernels": kernel_rows(kernels),
        "python": python_details,
        **forecast_details,
        "communication_model": communication,
        **scaling_details,
        **io_details,
        **ace_details,
        **spectrum_details,
        **training_details,
        "samples_s": {
            "suite": {k: v for k, v in suite.items() if k.startswith("samples_")},
            "gradmag": {k: v for k, v in grad.items() if k.startswith("samples_")},
            "numpy": {k: v for k, v in numpy_figures.items() if k.startswith("samples_")},
            "torch": {k: v for k, v in torch_figures.items() if k.startswith("samples_")},
            "halo_vs_gather": {k: v for k, v in halo.items() if k.startswith("samples_")},
            "python": python_samples,
        },
        "machine": machine(),
        "repetitions": args.repetitions,
        "bench_seconds": round(time.monotonic() - started, 1),
    }
    finish(results, out_dir / "results.json", problems)


def machine():
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def finish(results, path, problems):
    """Writes results, prints the table, and fails the run when two paths disagreed."""
    path.write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)
    print(f"\nwrote {path} ({results['details']['bench_seconds']} s)")
    if problems:
        sys.exit("run_bench: " + "; ".join(problems))


if __name__ == "__main__":
    main()
