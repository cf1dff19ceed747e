"""Shared fixtures for the command-line tests: the gridshard binary, plain and under mpirun."""
import os
import shlex
import subprocess

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_mpi_session_folder(tmp_path_factory):
    """Open MPI keeps a session folder under TMPDIR for every start, singletons included; concurrent jobs
    that share one (other ctest entries run beside this suite) can race when one cleans up as another
    creates its own. The tool's processes started here get a folder of their own."""
    folder = tmp_path_factory.mktemp("ompi_session")
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = previous


@pytest.fixture(scope="session")
def gridshard_bin():
    path = os.environ.get("GRIDSHARD_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("GRIDSHARD_BIN must name the built gridshard executable")
    return path


@pytest.fixture
def run(gridshard_bin):
    """Runs `gridshard ARGS...` as one plain process and returns the CompletedProcess (text mode)."""

    def _run(*args, timeout=120):
        return subprocess.run([gridshard_bin, *map(str, args)], capture_output=True, text=True, timeout=timeout)

    return _run


def _launcher():
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    flags = shlex.split(os.environ.get("MPIEXEC_FLAGS", ""))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return launcher, flags, env


@pytest.fixture
def mpirun(gridshard_bin):
    """Runs `mpiexec -n RANKS [LAUNCHER_FLAGS] gridshard ARGS...` (MPIEXEC and MPIEXEC_FLAGS come from CMake)."""
    launcher, flags, env = _launcher()

    def _run(ranks, *args, timeout=180, launcher_flags=()):
        command = [launcher, "-n", str(ranks), *flags, *launcher_flags, gridshard_bin, *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)

    return _run


@pytest.fixture
def meshes():
    """Chooses the meshes a test runs `eval` at from its list of tuples (ranks first): every one, or, in the sanitizer
    build (GRIDSHARD_CLI_MESHES=few), the first and the sharded one of fewest ranks. The sanitizers look for memory
    errors along the code paths, which one sharded run takes; the release build compares the bits at every mesh."""
    few = os.environ.get("GRIDSHARD_CLI_MESHES") == "few"

    def _choose(candidates):
        candidates = list(candidates)
        sharded = [c for c in candidates[1:] if c[0] > 1]
        if not few or not sharded:
            return candidates
        return [candidates[0], min(sharded, key=lambda c: c[0])]

    return _choose


@pytest.fixture
def mpirun_mpmd(gridshard_bin):
    """Runs one job of several programs, `mpiexec -n N1 gridshard ARGS1... : -n N2 gridshard ARGS2...`, from
    a list of (ranks, args): ranks that see other files under the same command, as a stale copy on one node."""
    launcher, flags, env = _launcher()

    def _run(parts, timeout=180):
        command = [launcher, *flags]
        for k, (ranks, args) in enumerate(parts):
            command += ([":"] if k else []) + ["-n", str(ranks), gridshard_bin, *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)

    return _run
