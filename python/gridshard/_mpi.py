"""mpi4py's failures as gridshard's MpiError, so a caller catches one error type for every MPI failure."""

import contextlib

from . import _gridshard as _core


@contextlib.contextmanager
def mpi_errors():
    from mpi4py import MPI

    try:
        yield
    except MPI.Exception as error:
        raise _core.MpiError(f"MPI: {error.Get_error_string()}") from error
