"""`gridshard eval` with the ranks talking as ranks on different nodes do: TCP between every pair, no shared
memory (Open MPI's `--mca pml ob1 --mca btl tcp,self`, from CMake as MPIEXEC_TCP_FLAGS), at 4 and 8 ranks,
gives the bits of one process, for two fields and for a forecast."""
import json
import os
import shlex

import pytest

TCP_FLAGS = shlex.split(os.environ.get("MPIEXEC_TCP_FLAGS", ""))
pytestmark = pytest.mark.skipif(not TCP_FLAGS, reason="no TCP-only flags for this MPI (MPIEXEC_TCP_FLAGS empty)")

CASES = {
    "two fields": ["--nlat", "91", "--nlon", "180", "--ntime", "3"],
    "forecast": ["--nlat", "46", "--nlon", "90", "--ntime", "4", "--initial-conditions", "3", "--ensemble-size", "4",
                 "--region", "tropics"],
}


def scores(path):
    document = json.loads(path.read_text())
    return {k: v for k, v in document.items() if k not in ("mesh", "forecast")}, document.get("forecast", {})


@pytest.mark.parametrize("case", list(CASES))
def test_tcp_only_gives_the_bits_of_one_process(case, run, mpirun, tmp_path):
    serial = tmp_path / "serial.json"
    r = run("eval", *CASES[case], "--quiet", "--json", serial)
    assert r.returncode == 0, r.stderr
    for ranks, mesh in ((4, "1x2x2"), (8, "2x2x2")):
        out = tmp_path / f"tcp-{mesh}.json"
        r = mpirun(ranks, "eval", *CASES[case], "--mesh", mesh, "--quiet", "--json", out, launcher_flags=TCP_FLAGS)
        assert r.returncode == 0, r.stderr
        got, want = scores(out), scores(serial)
        assert got[0] == want[0], f"{case} over TCP at {mesh} differs from one process"
        for key in ("initial_conditions", "members", "lead_times"):
            assert got[1].get(key) == want[1].get(key)
