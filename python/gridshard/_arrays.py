"""numpy arrays and torch tensors in, the compiled module's C-contiguous buffers out, and back: the one seam
between the caller's devices and the library's per-shard kernels, which run on the host.

torch is never imported here: a tensor can only reach gridshard from a program that imported torch
already, so ``sys.modules`` tells whether one could be a tensor. A CPU tensor is seen through its
zero-copy ``.numpy()`` view; a tensor on another device (a GPU) is staged through pinned host memory (one copy
to the host, which waits for the work queued on the current stream, and the result one copy back onto the input's
device, on the current stream); results are wrapped back with ``torch.from_numpy``. bfloat16 and float16 tensors
are widened to float32 on the way in (exactly), so every sum of them is formed as the library forms float32 ones,
never in 16 bits; their results are float32 (halo_exchange, which only moves values, gives their own dtype back).
"""

import contextlib
import sys

import numpy as np

from . import _abort

FLOATING = (np.dtype(np.float32), np.dtype(np.float64))
REDUCIBLE = FLOATING + (np.dtype(np.int32), np.dtype(np.int64))
HALF = ("torch.bfloat16", "torch.float16")


def _torch():
    return sys.modules.get("torch")


def is_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


# The character that starts a problem's text when it is the system's (memory exhausted), not the arguments':
# python/src/python_mesh.hpp, system_problem_marker. The compiled module raises such a text as SystemFailure.
SYSTEM_MARKER = "\x01"


class Problems:
    """This rank's problems for one call, raised later on every rank (gridshard's error contract): its arguments'
    (ArgumentError) or, memory exhausted while reading them, the system's (SystemFailure)."""

    __slots__ = ("messages", "system")

    def __init__(self):
        self.messages = []
        self.system = False
        _abort.forget_exit()  # a call: the program went on after any SystemExit it caught

    def add(self, message, system=False):
        self.messages.append(message)
        self.system = self.system or system

    def __bool__(self):
        return bool(self.messages)

    def text(self):
        """The problems as the compiled module takes them (marked when one is the system's)."""
        return (SYSTEM_MARKER if self.system else "") + "; ".join(self.messages)

    @contextlib.contextmanager
    def catching(self, name):
        """Records any exception raised in the block (an object's ``__array__`` that raises, a MemoryError
        from one copy) as this rank's problem with ``name``, so it is raised on every rank by the call's
        agreement instead of on this rank alone before it: a MemoryError as the system's, anything else as an
        argument problem. The block stops at the exception; what it had not assigned keeps the value it had
        before."""
        try:
            yield
        except MemoryError as error:
            self.add(f"{name}: out of memory on reading it (MemoryError: {error})", system=True)
        except Exception as error:  # noqa: BLE001 - any failure reading an argument is this rank's problem
            self.add(f"{name}: {type(error).__name__} on reading it: {error}")


def agreed_error(text):
    """The exception every rank raises for a problem ``text`` agreed over a group (a Problems.text())."""
    from . import _gridshard as core

    if text.startswith(SYSTEM_MARKER):
        return core.SystemFailure(text[len(SYSTEM_MARKER):])
    return core.ArgumentError(text)


def is_half(value):
    """Whether ``value`` is a bfloat16 or float16 tensor."""
    return is_tensor(value) and str(value.dtype) in HALF


def on_host(tensor):
    """A detached tensor's values on the host: the tensor itself on the CPU, else a copy into pinned memory (page-
    locked, so the device copies it by DMA; plain memory where pinning is not available)."""
    tensor = tensor.detach()
    if tensor.device.type == "cpu":
        return tensor
    torch = _torch()
    try:
        host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    except RuntimeError:  # no pinning without a CUDA runtime
        host = torch.empty(tensor.shape, dtype=tensor.dtype)
    host.copy_(tensor)  # on the current stream, waiting for what is queued on it
    return host


def half_written_problem(name, dtype):
    """Why a half-precision tensor cannot be a call's in-place argument."""
    return (f"{name}: a {dtype} tensor; this call writes into its argument, which 16 bits would round: pass a "
            f"float32 one")


def dtype_problem(name, dtype, dtypes):
    """Why an array of ``dtype`` (numpy's, or torch's without its prefix) is not one of ``dtypes``."""
    return f"{name}: dtype {dtype} is not one of {', '.join(str(d) for d in dtypes)}"


def as_numpy(value, name, problems, dtypes=FLOATING):
    """The numpy view of an array or CPU tensor (no copy; a tensor on another device staged to the host, a half-
    precision one widened to float32), or None after recording why it cannot be used (whatever reading it raised
    included: never an exception on this rank alone)."""
    if is_tensor(value):
        try:
            value = on_host(value)
            if str(value.dtype) in HALF:
                if dtypes is not FLOATING:
                    problems.add(half_written_problem(name, value.dtype))
                    return None
                value = value.float()
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
        problems.add(dtype_problem(name, array.dtype, dtypes))
        return None
    return array


def contiguous(array):
    """``array`` itself when it is C-contiguous, else one C-contiguous copy."""
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def like(result, template):
    """``result`` (a numpy array) as the kind of ``template``: a torch tensor on the template's device for a tensor
    (one copy there, on the current stream, where it is not the CPU), else numpy."""
    if is_tensor(template):
        tensor = _torch().from_numpy(result)
        return tensor if template.device.type == "cpu" else tensor.to(template.device)
    return result


def write_back(template, array):
    """Writes ``array``'s values into the tensor ``template`` when ``array`` is a staged copy of it (a device tensor,
    a half-precision one), on the current stream; nothing for a numpy array or a CPU tensor's own view."""
    if is_tensor(template) and (template.device.type != "cpu" or str(template.dtype) in HALF):
        template.copy_(_torch().from_numpy(array).reshape(template.shape))
