"""One script, several meshes and split rules, the same bits; and the Python module against the tool on
one file pair, bit for bit. Each case is its own mpirun (MPIEXEC and MPIEXEC_FLAGS from CMake)."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "cli"))
import make_files  # noqa: E402


def mpirun(ranks, *args, timeout=300):
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    flags = shlex.split(os.environ.get("MPIEXEC_FLAGS", ""))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    command = [launcher, "-n", str(ranks), *flags, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def report(tmp_path, ranks, mesh, split="div_up", files=()):
    out = tmp_path / f"{mesh}-{split}.json"
    mpirun(ranks, sys.executable, HERE / "metrics_report.py", out, "--mesh", mesh, "--split", split, *files)
    return json.loads(out.read_text())


def test_the_same_script_gives_the_same_bits_on_different_meshes(tmp_path):
    serial = report(tmp_path, 1, "1x1x1")
    assert len(serial) == 13 and all(serial.values())
    for ranks, mesh, split in [(3, "1x3x1", "balanced"), (4, "2x1x2", "div_up"), (6, "1x2x3", "div_up")]:
        got = report(tmp_path, ranks, mesh, split)
        for name, values in serial.items():
            if name == "zonal_mean" and mesh.split("x")[2] != "1":
                continue  # gathered only on meshes without a lon split (see metrics_report.py)
            assert got[name] == values, (mesh, split, name)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_the_python_module_gives_the_tools_numbers(tmp_path, dtype):
    """The tool reports doubles; the module returns the input's dtype, the same double rounded once."""
    rng = np.random.default_rng(3)
    truth = (280 + 15 * rng.standard_normal((3, 19, 24))).astype(dtype)
    prediction = (truth + rng.standard_normal(truth.shape)).astype(dtype)
    truth_file, prediction_file = tmp_path / "t.nc", tmp_path / "p.nc"
    make_files.write_grid_file(truth_file, truth, dtype=dtype)
    make_files.write_grid_file(prediction_file, prediction, dtype=dtype)
    tool_json = tmp_path / "eval.json"
    mpirun(4, os.environ["GRIDSHARD_BIN"], "eval", "--truth", truth_file, "--pred", prediction_file, "--mesh",
           "1x2x2", "--quiet", "--json", tool_json)
    tool = json.loads(tool_json.read_text())["variables"]["v"]
    python = report(tmp_path, 4, "1x2x2", files=("--truth", truth_file, "--pred", prediction_file))

    def rounded(values):
        return [float(np.asarray(v, dtype=np.float64).astype(dtype)).hex() for v in values]

    for score in ("mean_truth", "mean_pred", "bias", "rmse", "std_truth", "std_pred", "grad_mag_percent_diff"):
        assert python[score] == rounded(tool["per_time"][score]), score
    for score in ("rmse_of_time_mean", "time_and_global_mean_bias"):
        assert python[score] == rounded([tool[score]]), score


def test_the_readme_example_runs(tmp_path):
    """The Python example of the README, as printed there, under mpirun -n 4: every rank prints the same
    three means."""
    readme = (HERE.parent.parent / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "first.py"
    script.write_text(example)
    printed = re.findall(r"\[[^\]]*\]", mpirun(4, sys.executable, script).stdout)  # ranks' lines may interleave
    assert len(printed) == 4 and len(set(printed)) == 1 and len(printed[0].strip("[]").split()) == 3, printed
