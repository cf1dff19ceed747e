"""A pytest plugin that runs ACE's own tests (from its installed package fme) on gridshard's ACE backend
under mpirun, without editing ACE's files. It stands in for the repository conftest.py that ACE's package
does not ship: registers ACE's markers, and enters ``Distributed.context()`` for the session, as ACE's does.
Load it with ``-p ace_plugin`` (with tests/ace and tests/python on PYTHONPATH), together with mpi_pytest."""
import pytest

import gridshard.ace


def pytest_configure(config):
    for marker in ("parallel", "serial", "slow", "medium_duration"):
        config.addinivalue_line("markers", f"{marker}: ACE's marker")
    gridshard.ace.use_in_ace()


@pytest.fixture(scope="session", autouse=True)
def distributed_context():
    from fme.core.distributed import Distributed

    with Distributed.context(handle_signals=False):
        yield
