"""The byte gate of `gridshard eval`: every output (the table on stdout, the JSON report, the --zonal file and
every diagnostics file) of a fixed set of runs, compared byte for byte with the outputs the release before the
evaluation layer wrote (tests/golden/expected/, made with `--write`).

The inputs are made here from fixed seeds (tests/cli's writers); the runs cover both evaluations: the built-in
pair and forecast, CF file pairs with levels, packed and masked variables, ACE's folded ensemble layout, a member
dim, climatologies (per lead time, day of year), box and mask regions, every data split, both split rules,
cell-area weights, the validity policies, fast sums and collective I/O, at meshes of 1 to 6 ranks.

    python3 tests/golden/golden_outputs.py --bin build/bin/gridshard [--write]
"""
import argparse
import re
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))

import forecast_files  # noqa: E402
import make_files  # noqa: E402

EXPECTED = os.path.join(HERE, "expected")

# ace_ensemble's outputs were made again (by the release of 2026-12-02, whose other 51 outputs matched the first
# goldens byte for byte) when its mask input became the same on every CPU: numpy's sin and cos had put
# last-bit differences into mask.nc between AVX-512 and AVX2 machines (forecast_files.write_mask).
# The table on stdout prints every NaN as "nan" since the same release: it had printed the NaN's sign ("-nan"),
# which depends on how the compiler ordered an addition of two NaNs, so the sanitizer's debug build printed "nan"
# where the release printed "-nan" (builtin_pair_fast, ace_ensemble_leads_split; "-nan" became " nan" in their
# expected stdout.txt, the same width). No number changed.
# The outputs that changed on purpose since the goldens were made, each with what changed and why; the rest of
# their bytes must still be the goldens'. The ensemble scores and the anomaly correlation count the points where
# the truth, every member and the climatology are finite whatever --policy says; since the evaluation layer a
# report says so where --policy differs (skip_nan here): "score_policies" in the JSON's "forecast" object and one
# line under the table's header. No number changed.
EXPECTED_CHANGES = {
    ("ace_ensemble_members_split", "report.json"): lambda text: re.sub(rb',"score_policies":\{[^}]*\}', b"", text),
    ("ace_ensemble_members_split", "stdout.txt"):
        lambda text: b"".join(line for k, line in enumerate(text.splitlines(True)) if k != 2),
}

# name, ranks, mesh, arguments (inputs relative to the work folder), outputs the run writes.
TWO_FIELD = ["--json", "report.json", "--zonal", "zonal.nc"]
FORECAST = ["--json", "report.json", "--diagnostics", "diag"]
CASES = [
    ("builtin_pair", 4, "2x1x2", ["--nlat", "37", "--nlon", "72", "--ntime", "5"] + TWO_FIELD),
    ("builtin_pair_div_up_cell_area", 3, "1x3x1",
     ["--nlat", "37", "--nlon", "72", "--ntime", "3", "--split", "div_up", "--weights", "cell_area",
      "--policy", "skip_nan"] + TWO_FIELD),
    ("builtin_pair_fast", 2, "1x1x2", ["--nlat", "19", "--nlon", "36", "--ntime", "2", "--summation", "fast",
                                       "--policy", "propagate"] + TWO_FIELD),
    ("files_pair", 4, "1x2x2", ["--truth", "pair_truth.nc", "--pred", "pair_pred.nc"] + TWO_FIELD),
    ("files_pair_vars", 3, "3x1x1", ["--truth", "pair_truth.nc", "--pred", "pair_pred.nc", "--vars", "t2m,ta",
                                     "--weights", "cell_area"] + TWO_FIELD),
    ("files_pair_collective", 2, "2x1x1", ["--truth", "pair_truth.nc", "--pred", "pair_pred.nc",
                                           "--io", "collective"] + TWO_FIELD),
    ("builtin_forecast", 4, "2x1x2", ["--nlat", "19", "--nlon", "36", "--initial-conditions", "3",
                                      "--ensemble-size", "4", "--ntime", "4", "--region", "tropics",
                                      "--region", "box:10,60,20,200"] + FORECAST),
    ("ace_ensemble", 4, "2x2x1", ["--truth", "ace_truth.nc", "--pred", "ace_pred.nc", "--climatology",
                                  "clim_lead.nc", "--region", "tropics", "--region", "land:mask.nc:land_fraction"]
     + FORECAST),
    ("ace_ensemble_members_split", 3, "3x1x1", ["--truth", "ace_truth.nc", "--pred", "ace_pred.nc",
                                                "--data-split", "members", "--climatology", "clim_mean.nc",
                                                "--policy", "skip_nan"] + FORECAST),
    ("ace_ensemble_leads_split", 2, "2x1x1", ["--truth", "ace_truth.nc", "--pred", "ace_pred.nc",
                                              "--data-split", "lead-times", "--include-initial-step",
                                              "--split", "div_up"] + FORECAST),
    ("ace_ensemble_collective", 4, "2x1x2", ["--truth", "ace_truth.nc", "--pred", "ace_pred.nc",
                                             "--io", "collective"] + FORECAST),
    ("member_dim_day_of_year", 6, "1x2x3", ["--truth", "member_truth.nc", "--pred", "member_pred.nc",
                                            "--climatology", "clim_doy.nc", "--vars", "t2m"] + FORECAST),
    ("deterministic_forecast", 1, "1x1x1", ["--truth", "det_truth.nc", "--pred", "det_pred.nc",
                                            "--weights", "cell_area"] + FORECAST),
]


def make_inputs(folder):
    make_files.write(os.path.join(folder, "pair_truth.nc"), 19, 36, 3, seed=1)
    make_files.write(os.path.join(folder, "pair_pred.nc"), 19, 36, 3, seed=2, shift=0.2)
    ensemble = forecast_files.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22, levels=2)
    forecast_files.write_ace(ensemble, os.path.join(folder, "ace_truth.nc"), os.path.join(folder, "ace_pred.nc"))
    forecast_files.write_climatology(ensemble, os.path.join(folder, "clim_lead.nc"), per_lead=True)
    forecast_files.write_climatology(ensemble, os.path.join(folder, "clim_mean.nc"), per_lead=False)
    forecast_files.write_mask(ensemble, os.path.join(folder, "mask.nc"))
    one = forecast_files.Forecast(ics=2, members=3, leads=4, nlat=11, nlon=20, seed=3, first_lead=1)
    forecast_files.write_member_dim(one, os.path.join(folder, "member_truth.nc"),
                                    os.path.join(folder, "member_pred.nc"))
    forecast_files.write_day_of_year_climatology(one, os.path.join(folder, "clim_doy.nc"))
    det = forecast_files.Forecast(ics=4, members=1, leads=3, nlat=9, nlon=16, seed=5, first_lead=1)
    forecast_files.write_ace(det, os.path.join(folder, "det_truth.nc"), os.path.join(folder, "det_pred.nc"),
                             truth_per_ic=True)


def run_case(binary, work, name, ranks, mesh, arguments):
    """Runs one case in `work`/name and returns the folder of its outputs (stdout.txt among them)."""
    out = os.path.join(work, name)
    os.makedirs(os.path.join(out, "diag"))
    for entry in os.listdir(os.path.join(work, "inputs")):
        os.symlink(os.path.join(work, "inputs", entry), os.path.join(out, entry))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_mpi_yield_when_idle": "1"})
    launcher = [env.get("MPIEXEC", "mpiexec"), "-n", str(ranks)] + env.get("MPIEXEC_FLAGS", "").split()
    command = launcher + [binary, "eval", "--quiet", "--mesh", mesh] + arguments
    done = subprocess.run(command, cwd=out, capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr}")
    with open(os.path.join(out, "stdout.txt"), "w") as f:
        f.write(done.stdout)
    for entry in os.listdir(os.path.join(work, "inputs")):
        os.unlink(os.path.join(out, entry))
    if not os.listdir(os.path.join(out, "diag")):
        os.rmdir(os.path.join(out, "diag"))
    return out


def files_of(folder):
    return sorted(os.path.relpath(os.path.join(root, f), folder)
                  for root, _, names in os.walk(folder) for f in names)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--write", action="store_true", help="replace tests/golden/expected with these outputs")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "inputs"))
        make_inputs(os.path.join(work, "inputs"))
        outputs = {name: run_case(binary, work, name, ranks, mesh, arguments)
                   for name, ranks, mesh, arguments in CASES}
        if args.write:
            shutil.rmtree(EXPECTED, ignore_errors=True)
            for name, folder in outputs.items():
                shutil.copytree(folder, os.path.join(EXPECTED, name))
            print(f"wrote {sum(len(files_of(f)) for f in outputs.values())} files of {len(CASES)} cases")
            return
        differ = []
        compared = 0
        for name, folder in outputs.items():
            expected = os.path.join(EXPECTED, name)
            got, want = files_of(folder), files_of(expected)
            if got != want:
                differ.append(f"{name}: files {got} against the expected {want}")
                continue
            for f in got:
                compared += 1
                with open(os.path.join(folder, f), "rb") as got_file, open(os.path.join(expected, f), "rb") as want:
                    text = got_file.read()
                    change = EXPECTED_CHANGES.get((name, f))
                    if change is not None:
                        changed = change(text)
                        if changed == text:
                            differ.append(f"{name}/{f}: the expected change is missing")
                        text = changed
                    same = text == want.read()
                if not same:
                    differ.append(f"{name}/{f} differs from tests/golden/expected/{name}/{f}")
        if differ:
            raise SystemExit("\n".join(differ))
        print(f"{compared} outputs of {len(CASES)} cases byte-identical to tests/golden/expected")


if __name__ == "__main__":
    main()
