"""An exception that no one catches on one rank, or a non-zero exit, ends every rank of the job, as ``python -m
mpi4py`` does.

Without it, the rank whose exception went uncaught prints its traceback and waits in MPI's finalisation
while the others wait for it in their next collective: the job never ends. ``install()`` puts a
``sys.excepthook`` in place that prints the traceback as before (through the hook it replaces), then one
line naming the rank and the exception, and calls ``MPI_Abort`` on ``MPI.COMM_WORLD``, which ends every
rank. A ``SystemExit`` is no exception the hook sees: ``install()`` also puts a ``sys.exit`` in place (and the
``exit()`` and ``quit()`` of the interactive builtins) that notes a non-zero code, and an exit handler that, when the
process ends with that code noted, says so in one line and calls ``MPI_Abort`` with it (before mpi4py's
``MPI_Finalize``, which would wait for the other ranks). A ``SystemExit`` the program catches and survives is
forgotten at its next gridshard call. ``gridshard.Distributed`` installs it all when it spans more than one rank,
unless ``abort_on_exception=False`` or ``GRIDSHARD_ABORT_ON_EXCEPTION=0`` says not to (docs/python.md). No MPI
calls until an exception goes uncaught or the process ends with a noted code.
"""

import atexit
import builtins
import os
import sys

ENV = "GRIDSHARD_ABORT_ON_EXCEPTION"
_OFF = ("0", "false", "no", "off")

_replaced = None  # the hook install() replaced, which prints the traceback
_exits = None  # (sys.exit, builtins.exit, builtins.quit) as install() found them
_exit_code = None  # the non-zero code of the last sys.exit, until the program's next gridshard call
_exit_handler_registered = False


def enabled_by_environment():
    """Whether ``GRIDSHARD_ABORT_ON_EXCEPTION`` leaves the abort on (unset, or anything but 0/false/no/off)."""
    return os.environ.get(ENV, "1").strip().lower() not in _OFF


def installed():
    return sys.excepthook is _abort_hook


def install(enabled=True):
    """Puts the aborting hooks in place (``enabled``) or takes them away again, restoring what they replaced.
    No MPI calls."""
    global _replaced, _exits, _exit_handler_registered
    if enabled and not installed():
        _replaced = sys.excepthook
        sys.excepthook = _abort_hook
        _exits = (sys.exit, getattr(builtins, "exit", None), getattr(builtins, "quit", None))
        sys.exit = _noting_exit(_exits[0])
        for name, original in (("exit", _exits[1]), ("quit", _exits[2])):
            if original is not None:
                setattr(builtins, name, _noting_exit(original))
        if not _exit_handler_registered:  # Python's exit handlers run before mpi4py's MPI_Finalize
            atexit.register(_at_exit)
            _exit_handler_registered = True
    elif not enabled and installed():
        sys.excepthook = _replaced if _replaced is not None else sys.__excepthook__
        _replaced = None
        sys.exit = _exits[0]
        for name, original in (("exit", _exits[1]), ("quit", _exits[2])):
            if original is not None:
                setattr(builtins, name, original)
        _exits = None
        forget_exit()


def _noting_exit(original):
    def noting(*args):
        global _exit_code
        code = args[0] if args else None
        _exit_code = code if code not in (None, 0) else None
        original(*args)

    noting.__doc__ = original.__doc__
    noting.__wrapped__ = original
    return noting


def forget_exit():
    """The program went on after a SystemExit it caught: its code is not the process's end."""
    global _exit_code
    _exit_code = None


def _at_exit():
    if _exit_code is None or not installed():
        return
    code = _exit_code
    _abort_process(f"sys.exit({code!r})", code if isinstance(code, int) and 0 < code < 256 else 1)


def _abort_hook(kind, value, traceback):
    try:
        (_replaced or sys.__excepthook__)(kind, value, traceback)
    finally:
        _abort(kind, value)


def _abort(kind, value):
    _abort_process(f"uncaught {kind.__name__}: {value}", 1)


def _abort_process(what, code):
    from mpi4py import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    world = MPI.COMM_WORLD
    try:
        sys.stderr.write(
            f"gridshard: rank {world.Get_rank()} of {world.Get_size()}: {what}\n"
            f"gridshard: ending every rank of the job (MPI_Abort); {ENV}=0 or "
            f"Distributed(abort_on_exception=False) leaves the other ranks running instead\n"
        )
        sys.stderr.flush()
    finally:
        world.Abort(code)
