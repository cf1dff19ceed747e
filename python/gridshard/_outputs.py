"""The files the Python layer writes (the ACE drop-in's diagnostics, the plots), through the library's atomic writer
(io/output_file.hpp, as ``_gridshard.AtomicOutput``): each to an unnamed temporary beside its target that a Python
library writes by path, every one flushed to disk and only then renamed over its target, so a failure leaves every
earlier file as it was and no temporary behind; modes follow the umask. ``write_on_root`` makes the outcome of one
rank's writes every rank's, so no rank returns while another raises."""

import errno

from . import _gridshard as _core

# The system's failures: the disk is full or over its quota, the device fails, a file grows too large.
_SYSTEM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.ENOMEM)


def _failure(path, error):
    """``error`` (raised while writing ``path``) as gridshard's: ArgumentError where another path would do (no
    folder, no permission, a read-only file system), SystemFailure for the system's (a full disk, an I/O error)."""
    if isinstance(error, (_core.ArgumentError, _core.SystemFailure)):
        return error
    if isinstance(error, OSError) and error.errno is not None:
        named = error.filename if error.filename and not str(error.filename).startswith("/proc/") else path
        message = f"cannot write '{named}': {error.strerror or error}"
        if error.errno in _SYSTEM_ERRNOS:
            return _core.SystemFailure(message)
        return _core.ArgumentError(message)
    if isinstance(error, MemoryError):
        return _core.SystemFailure(f"cannot write '{path}': out of memory")
    return _core.SystemFailure(f"cannot write '{path}': {type(error).__name__}: {error}")


def write_all(jobs):
    """Writes ``jobs``, pairs ``(path, fill)`` where ``fill(temporary_path)`` writes the file by that path: every
    temporary filled, then every one flushed to disk, then all renamed. Raises ArgumentError or SystemFailure naming
    the path; the targets are then as they were. No MPI calls."""
    outputs = []
    for path, fill in jobs:
        try:
            output = _core.AtomicOutput(str(path))
            outputs.append((path, output))
            fill(output.temporary_path)
        except Exception as error:  # noqa: BLE001 - whatever the writer raised, as gridshard's error
            raise _failure(path, error) from error
    for stage in ("flush", "publish"):
        for path, output in outputs:
            try:
                getattr(output, stage)()
            except Exception as error:  # noqa: BLE001
                raise _failure(path, error) from error


def write_on_root(comm, make_jobs, root=0):
    """``write_all(make_jobs())`` on rank ``root`` of the mpi4py communicator ``comm``, its outcome raised alike on
    every rank (the same kind and message). Collective over ``comm`` (one broadcast)."""
    outcome = None
    if comm.Get_rank() == root:
        try:
            write_all(make_jobs())
        except Exception as error:  # noqa: BLE001 - every rank raises it below
            failure = _failure("the diagnostics", error)
            outcome = ("system" if isinstance(failure, _core.SystemFailure) else "argument", str(failure))
    outcome = comm.bcast(outcome, root=root)
    if outcome is not None:
        kind, message = outcome
        raise (_core.SystemFailure if kind == "system" else _core.ArgumentError)(message)
