"""A pytest plugin for suites that run under mpirun (gridshard's own, and ACE's against gridshard): every rank
runs every test in the same order. A failure on one rank
fails the test on every rank (outcomes are combined after each test, which also keeps the ranks in step),
only world rank 0 prints, and a rank stuck in a collective ends the run (faulthandler's deadline here,
ctest's TIMEOUT above it)."""
import faulthandler
import os
import sys

import pytest
from mpi4py import MPI

WORLD = MPI.COMM_WORLD
DEADLINE_S = float(os.environ.get("GRIDSHARD_TEST_DEADLINE_S", "120"))


def mesh_shape():
    """The (data, h, w) mesh of this run: --mesh=DxHxW (or GRIDSHARD_TEST_MESH), else data-parallel over the
    world."""
    text = os.environ.get("GRIDSHARD_TEST_MESH", f"{WORLD.Get_size()}x1x1")
    d, h, w = (int(k) for k in text.split("x"))
    assert d * h * w == WORLD.Get_size(), f"GRIDSHARD_TEST_MESH={text} needs {d * h * w} ranks"
    return d, h, w


def pytest_addoption(parser):
    parser.addoption("--mesh", default=None, help="the (data x lat x lon) mesh of this run, DxHxW")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if config.getoption("--mesh"):
        os.environ["GRIDSHARD_TEST_MESH"] = config.getoption("--mesh")
    if WORLD.Get_rank() != 0:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
        config.option.verbose = -2
        config.option.reportchars = ""
        config.option.xmlpath = None  # one JUnit report, world rank 0's


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(DEADLINE_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    mine = "" if report.passed or report.skipped else f"rank {WORLD.Get_rank()}: {report.longreprtext[-3000:]}"
    failures = [text for text in WORLD.allgather(mine) if text]
    if failures and not mine:
        report.outcome = "failed"
        report.longrepr = "failed on another rank:\n" + failures[0]
    elif failures and WORLD.Get_rank() == 0 and mine != failures[0]:
        report.longrepr = f"{report.longreprtext}\n(and on another rank:)\n{failures[0]}"
