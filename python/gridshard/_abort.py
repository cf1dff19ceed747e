"""An exception that no one catches on one rank ends every rank of the job, as ``python -m mpi4py`` does.

Without it, the rank whose exception went uncaught prints its traceback and waits in MPI's finalisation
while the others wait for it in their next collective: the job never ends. ``install()`` puts a
``sys.excepthook`` in place that prints the traceback as before (through the hook it replaces), then one
line naming the rank and the exception, and calls ``MPI_Abort`` on ``MPI.COMM_WORLD``, which ends every
rank. ``gridshard.Distributed`` installs it when it spans more than one rank, unless
``abort_on_exception=False`` or ``GRIDSHARD_ABORT_ON_EXCEPTION=0`` says not to (docs/python.md).
No MPI calls until an exception goes uncaught.
"""

import os
import sys

ENV = "GRIDSHARD_ABORT_ON_EXCEPTION"
_OFF = ("0", "false", "no", "off")

_replaced = None  # the hook install() replaced, which prints the traceback


def enabled_by_environment():
    """Whether ``GRIDSHARD_ABORT_ON_EXCEPTION`` leaves the abort on (unset, or anything but 0/false/no/off)."""
    return os.environ.get(ENV, "1").strip().lower() not in _OFF


def installed():
    return sys.excepthook is _abort_hook


def install(enabled=True):
    """Puts the aborting hook in place (``enabled``) or takes it away again, restoring the hook it replaced.
    No MPI calls."""
    global _replaced
    if enabled and not installed():
        _replaced = sys.excepthook
        sys.excepthook = _abort_hook
    elif not enabled and installed():
        sys.excepthook = _replaced if _replaced is not None else sys.__excepthook__
        _replaced = None


def _abort_hook(kind, value, traceback):
    try:
        (_replaced or sys.__excepthook__)(kind, value, traceback)
    finally:
        _abort(kind, value)


def _abort(kind, value):
    from mpi4py import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    world = MPI.COMM_WORLD
    try:
        sys.stderr.write(
            f"gridshard: rank {world.Get_rank()} of {world.Get_size()}: uncaught {kind.__name__}: {value}\n"
            f"gridshard: ending every rank of the job (MPI_Abort); {ENV}=0 or "
            f"Distributed(abort_on_exception=False) leaves the other ranks running instead\n"
        )
        sys.stderr.flush()
    finally:
        world.Abort(1)
