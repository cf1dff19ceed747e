"""numpy arrays and torch tensors in, the compiled module's C-contiguous buffers out, and back.

torch is never imported here: a tensor can only reach gridshard from a program that imported torch
already, so ``sys.modules`` tells whether one could be a tensor. A CPU tensor is seen through its
zero-copy ``.numpy()`` view; results are wrapped back with ``torch.from_numpy``.
"""

import contextlib
import sys

import numpy as np

FLOATING = (np.dtype(np.float32), np.dtype(np.float64))
REDUCIBLE = FLOATING + (np.dtype(np.int32), np.dtype(np.int64))


def _torch():
    return sys.modules.get("torch")


def is_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


class Problems:
    """This rank's argument problems for one call, raised later on every rank (gridshard's error contract)."""

    __slots__ = ("messages",)

    def __init__(self):
        self.messages = []

    def add(self, message):
        self.messages.append(message)

    def __bool__(self):
        return bool(self.messages)

    def text(self):
        return "; ".join(self.messages)

    @contextlib.contextmanager
    def catching(self, name):
        """Records any exception raised in the block (an object's ``__array__`` that raises, a MemoryError
        from one copy) as this rank's problem with ``name``, so it is raised on every rank by the call's
        agreement instead of on this rank alone before it. The block stops at the exception; what it had
        not assigned keeps the value it had before."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 - any failure reading an argument is this rank's problem
            self.add(f"{name}: {type(error).__name__} on reading it: {error}")


def as_numpy(value, name, problems, dtypes=FLOATING):
    """The numpy view of an array or CPU tensor (no copy), or None after recording why it cannot be used
    (whatever reading it raised included: never an exception on this rank alone)."""
    if is_tensor(value):
        try:
            if value.device.type != "cpu":
                problems.add(f"{name}: a tensor on {value.device}; gridshard takes CPU tensors, call .cpu() first")
                return None
            value = value.detach()
            if value.is_conj() or value.is_neg():
                value = value.resolve_conj().resolve_neg()
            array = value.numpy()
        except Exception as error:  # noqa: BLE001 - raised on every rank by the call's agreement
            problems.add(f"{name}: {error}")
            return None
    elif isinstance(value, np.ndarray):
        array = value
    else:
        try:
            array = np.asarray(value)
        except Exception as error:  # noqa: BLE001 - an __array__ that raises, say; agreed like any problem
            problems.add(f"{name}: cannot be read as an array ({type(error).__name__}: {error})")
            return None
    if array.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        problems.add(f"{name}: dtype {array.dtype} is not one of {names}")
        return None
    return array


def contiguous(array):
    """``array`` itself when it is C-contiguous, else one C-contiguous copy."""
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def like(result, template):
    """``result`` (a numpy array) as the kind of ``template``: a torch tensor for a tensor, else numpy."""
    if is_tensor(template):
        return _torch().from_numpy(result)
    return result


def same_kind_copy(template, array):
    """A new array or tensor of ``template``'s kind holding ``array``'s values."""
    return like(np.array(array, copy=True), template)
