"""An exception that no one catches on one rank ends every rank of the job, with a message naming the rank
and the exception, once a gridshard.Distributed spans more than one rank (issue 18, item 6); the off switch
(GRIDSHARD_ABORT_ON_EXCEPTION=0, or abort_on_exception=False) keeps mpi4py's default, where the other ranks
go on waiting. Each case is its own mpirun of uncaught_case.py (MPIEXEC and MPIEXEC_FLAGS from CMake),
bounded: its waiting ranks give up after 10 s, and a job still running after 90 s is ended."""
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ABORT_LINE = "gridshard: rank {rank} of {ranks}: uncaught RuntimeError: raised on purpose by one rank"


def run_job(ranks, *args, environment=None, timeout=90, script="uncaught_case.py"):
    """Runs uncaught_case.py under mpirun; (seconds, stdout + stderr). A job that outlives ``timeout`` is
    ended (mpirun's process group, SIGTERM then SIGKILL) and the test fails."""
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    flags = shlex.split(os.environ.get("MPIEXEC_FLAGS", ""))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    env.pop("GRIDSHARD_ABORT_ON_EXCEPTION", None)
    env.update(environment or {})
    command = [launcher, "-n", str(ranks), *flags, sys.executable, str(HERE / script), *map(str, args)]
    start = time.monotonic()
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           start_new_session=True)
    try:
        output, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            os.killpg(job.pid, sig)
            try:
                output, _ = job.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        pytest.fail(f"the job was still running after {timeout} s:\n{output[-3000:]}")
    return time.monotonic() - start, job.returncode, output


@pytest.mark.parametrize("ranks, raiser", [(2, 1), (3, 0)])
def test_an_uncaught_exception_on_one_rank_ends_every_rank(ranks, raiser):
    seconds, status, output = run_job(ranks, raiser)
    assert ABORT_LINE.format(rank=raiser, ranks=ranks) in output, output[-3000:]
    assert "RuntimeError: raised on purpose by one rank" in output and "Traceback" in output, output[-3000:]
    assert "still running" not in output, output[-3000:]  # ended, not left to time out
    assert status != 0, (status, seconds)


@pytest.mark.parametrize("ranks, raiser", [(2, 1), (3, 0)])
def test_a_non_zero_exit_on_one_rank_ends_every_rank(ranks, raiser):
    seconds, status, output = run_job(ranks, raiser, "exit")
    assert f"gridshard: rank {raiser} of {ranks}: sys.exit(3)" in output, output[-3000:]
    assert "still running" not in output, output[-3000:]
    assert status != 0, (status, seconds)


def test_a_caught_exit_is_forgotten_once_the_program_goes_on():
    seconds, status, output = run_job(2, 1, "caught")
    assert status == 0 and "gridshard: rank" not in output, output[-3000:]
    assert output.count("ended normally") == 2, output[-3000:]


@pytest.mark.parametrize("switch", ["environment", "argument"])
def test_the_off_switch_leaves_the_other_ranks_running(switch):
    environment = {"GRIDSHARD_ABORT_ON_EXCEPTION": "0"} if switch == "environment" else {}
    seconds, _, output = run_job(2, 1, *(["off"] if switch == "argument" else []), environment=environment)
    assert "gridshard: rank" not in output, output[-3000:]
    assert "RuntimeError: raised on purpose by one rank" in output, output[-3000:]
    assert "rank 0: still running 10 s after the exception" in output, output[-3000:]


def test_aces_abort_from_another_thread_ends_the_job_while_the_main_one_waits_in_a_collective():
    """ACE's abort(): local (rank 0 takes no part), from a thread other than the main one, which is blocked in a
    barrier: the job ends within seconds, with a non-zero status and the line naming the rank."""
    seconds, status, output = run_job(2, script="abort_case.py", timeout=60)
    assert status != 0, (status, output[-3000:])
    assert "gridshard: rank 1 of 2: abort(1)" in output, output[-3000:]
    assert "barrier returned" not in output and "still running" not in output, output[-3000:]
    assert seconds < 30, seconds
