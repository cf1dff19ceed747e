"""ACE's own distributed and metric tests, from its published package, on gridshard's ACE backend.

    .ace/venv/bin/python tests/ace/run_ace_tests.py [--build-dir build] [--out build/ace]

Runs ACE's parallel tests under mpirun at ACE's CI layouts (FME_DISTRIBUTED_BACKEND=gridshard with
FME_DISTRIBUTED_H and _W), and its serial metric tests in one process, then gridshard's own comparisons with
ACE's aggregators (OWN_SERIAL_TESTS, on ACE's non-distributed backend); writes one JUnit XML file per layout
and a summary (layout, passed, failed, skipped, and each failure's name and first line) to OUT/summary.txt.
Exits non-zero when a test fails that is not listed in KNOWN_FAILURES with its reason, or when a listed one
passes (so the list stays true)."""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# (ranks, H, W) of ACE's CI runs of its parallel tests (Makefile cpu_test_all_parallel), ACE's "torch" backend
# layouts as H = W = 1 (data-parallel only). Left out: its 8-rank 2x2x2 (69 s here; the 4-rank layouts hold each
# kind of group, 2x2x1 data ranks beside a split) and its 2-rank data-parallel one (3x1x1's groups, one rank fewer).
LAYOUTS = [(2, 2, 1), (2, 1, 2), (4, 2, 2), (4, 2, 1), (3, 1, 1)]

PARALLEL_TESTS = [
    "core/distributed/test_backend_metrics.py",
    "core/distributed/parallel_tests/test_backend.py",
    "core/distributed/parallel_tests/test_local_slices.py",
    "core/distributed/parallel_tests/test_gather_object.py",
    "core/distributed/parallel_tests/test_scatter_object.py",
    "core/distributed/parallel_tests/test_get_sampler.py",
    "core/distributed/test_distributed.py",
]
SERIAL_TESTS = ["core/test_metrics.py", "core/test_gridded_ops.py"]
# gridshard's numbers under ACE's names against ACE's own functions on the same data, at the same layouts.
OWN_PARALLEL_TESTS = [HERE / "test_ace_numbers.py"]
# gridshard's `eval` against ACE's own aggregators on the same files, in a process of their own on ACE's
# non-distributed backend (they start mpirun themselves for gridshard, at several meshes).
OWN_SERIAL_TESTS = [HERE / "test_ace_time_mean.py", HERE / "test_ace_aggregator.py",
                    HERE / "test_spectrum_references.py"]

# Tests that fail on gridshard's backend for a stated reason (test id substring -> reason).
KNOWN_FAILURES = {
    "test_gloo_all_to_all_patch": "tests torch's gloo, not the backend: it expects gloo's all_to_all to raise, "
    "and the torch 2.15 these wheels bring implements it (ACE's own torch backend fails it alike under torchrun)",
}


def fme_root(python):
    out = subprocess.run([python, "-c", "import fme, os; print(os.path.dirname(fme.__file__))"],
                         capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip())


def run(command, env, timeout):
    """The command's exit status; prints it and, when it ends, its wall time (so the log shows where time goes)."""
    print("+", " ".join(map(str, command)), flush=True)
    start = time.monotonic()
    code = subprocess.run(command, env=env, timeout=timeout).returncode
    print(f"run_ace_tests: {time.monotonic() - start:.0f} s", flush=True)
    return code


def outcomes(junit):
    """(name, outcome, message) of every test case of a JUnit XML file."""
    cases = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "").splitlines()[0:1]
                message = message[0] if message else ""
            elif child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        cases.append((name, outcome, message))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    out = args.out or args.build_dir / "ace"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    python = sys.executable
    fme = fme_root(python)
    mpiexec = shutil.which("mpiexec") or "mpirun"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(args.build_dir / "python"), str(HERE), str(ROOT / "tests" / "python")]),
        FME_FORCE_CPU="1", FME_DISTRIBUTED_BACKEND="gridshard", OMP_NUM_THREADS="1",
        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
        OMPI_MCA_btl_vader_single_copy_mechanism="none",
    )
    pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", "-p", "mpi_pytest", "-p",
                   "ace_plugin", "--rootdir", str(fme), "-o", "addopts="]
    runs = []
    for ranks, h, w in LAYOUTS:
        name = f"np{ranks}-{h}x{w}"
        layout_env = dict(env, FME_DISTRIBUTED_H=str(h), FME_DISTRIBUTED_W=str(w))
        junit = out / f"{name}.xml"
        command = [mpiexec, "-n", str(ranks), "--oversubscribe", python, *pytest_args, "-m", "parallel",
                   f"--junitxml={junit}", f"--mesh={ranks // (h * w)}x{h}x{w}", *(fme / t for t in PARALLEL_TESTS),
                   *OWN_PARALLEL_TESTS]
        runs.append((name, run(command, layout_env, 1800), junit))
    junit = out / "serial.xml"
    command = [python, *pytest_args, f"--junitxml={junit}", *(fme / t for t in SERIAL_TESTS)]
    runs.append(("serial", run(command, dict(env, FME_DISTRIBUTED_BACKEND="gridshard"), 1800), junit))
    junit = out / "own-serial.xml"
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", "--rootdir", str(HERE), "-o",
               "addopts=", f"--junitxml={junit}", *OWN_SERIAL_TESTS]
    own_env = dict(env, FME_DISTRIBUTED_BACKEND="none", GRIDSHARD_BUILD_DIR=str(args.build_dir.resolve()))
    runs.append(("own-serial", run(command, own_env, 1800), junit))

    lines, unexpected = [], []
    for name, code, junit in runs:
        if not junit.exists():
            lines.append(f"{name}: no report (exit status {code})")
            unexpected.append(name)
            continue
        cases = outcomes(junit)
        counts = {k: sum(1 for c in cases if c[1] == k) for k in ("passed", "failed", "skipped")}
        lines.append(f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
        for case, outcome, message in cases:
            known = next((reason for key, reason in KNOWN_FAILURES.items() if key in case), None)
            if outcome == "failed":
                lines.append(f"    FAILED {case}: {message[:200]}" + (f" [known: {known}]" if known else ""))
                if not known:
                    unexpected.append(case)
            elif known and outcome == "passed":
                lines.append(f"    PASSED but listed as a known failure: {case}")
                unexpected.append(case)
    summary = "\n".join(lines)
    (out / "summary.txt").write_text(summary + "\n")
    print(summary)
    sys.exit(1 if unexpected else 0)


if __name__ == "__main__":
    main()
