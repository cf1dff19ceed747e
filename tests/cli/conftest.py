"""Shared fixtures for the command-line tests: the gridshard binary under test."""
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def gridshard_bin():
    path = os.environ.get("GRIDSHARD_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("GRIDSHARD_BIN must name the built gridshard executable")
    return path


@pytest.fixture
def run(gridshard_bin):
    """Runs `gridshard ARGS...` and returns the CompletedProcess (text mode)."""

    def _run(*args, timeout=60):
        return subprocess.run([gridshard_bin, *map(str, args)], capture_output=True, text=True, timeout=timeout)

    return _run
