"""The arguments of gridshard.Distributed's library calls, read on each rank before the call's agreement: a field
seen as ``(channels, h, w)`` (``Field``), its weights broadcast to the shard and their form, the dims a call reduces,
and the signature every rank of a call must share. Whatever a rank finds wrong goes into its ``Problems``, which the
call's first allreduce raises on every rank. No MPI calls."""

import math
import numbers
import zlib

import numpy as np

from . import _arrays, _autograd


def call_signature(*parts):
    """A code of what every rank of a call must give alike (a dtype, leading dims, whether weights are given),
    the same in every process (a CRC of the parts' repr; Python's own str hash differs between processes), with the
    call's phase (plain, differentiated, backward: _autograd.call_phase) in its two lowest bits, which the
    compiled module compares on its own to say when the ranks differ in gradients."""
    return (zlib.crc32(repr(parts).encode()) << 2) | _autograd.call_phase()


_SPATIAL_DIMS_HELP = "gridshard reduces over the two spatial dims, dim=(-2, -1)"


def normalise_dims(dim, ndim, name="dim"):
    """The dims of ``dim`` (an int or a tuple of ints) as sorted non-negative indices of an ``ndim``-dim
    array, and an empty message; or None and the message why not."""
    try:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    except Exception:  # noqa: BLE001 - whatever iterating it raises, the same answer on every rank
        return None, f"{name}={dim!r}: not an int or a tuple of ints"
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
        return None, f"{name}={dim!r}: not an int or a tuple of ints"
    if any(not -ndim <= d < ndim for d in dims):
        return None, f"{name}={dim!r}: out of range for a {ndim}-dim tensor"
    normal = [int(d) % ndim for d in dims]
    if len(set(normal)) != len(normal):
        return None, f"{name}={dim!r}: names a dim twice"
    return sorted(normal), ""


def check_spatial_dims(dim, ndim, problems, name="dim"):
    normal, message = normalise_dims(dim, ndim, name)
    if message:
        problems.add(message)
    elif normal != [ndim - 2, ndim - 1]:
        problems.add(f"{name}={dim!r}: {_SPATIAL_DIMS_HELP} of a {ndim}-dim tensor")


class Field:
    """A field argument seen as ``(channels, h, w)``: the C-contiguous numpy view, its leading shape and dtype."""

    __slots__ = ("original", "array", "leading", "rows", "cols", "dtype", "widened_from", "buffer")

    def __init__(self, value, name, problems):
        self.original = value
        self.array = self.buffer = None
        self.leading, self.rows, self.cols, self.dtype = (), 0, 0, np.dtype(np.float64)
        # A half-precision tensor is computed as float32, but its results differ from a float32 one's in dtype (the
        # halo exchange's) and so must every rank's: the signature holds what it was widened from.
        self.widened_from = str(value.dtype) if _arrays.is_half(value) else ""
        with problems.catching(name):  # the copy of a non-contiguous input may fail on this rank alone
            array = _arrays.as_numpy(value, name, problems)
            if array is None:
                return
            if array.ndim < 2:
                problems.add(f"{name}: shape {tuple(array.shape)} has no (lat, lon) dims")
                return
            self.array = array
            self.leading = tuple(array.shape[:-2])
            self.rows, self.cols = array.shape[-2], array.shape[-1]
            self.dtype = array.dtype
            channels = math.prod(self.leading)
            self.buffer = _arrays.contiguous(array).reshape(channels, self.rows, self.cols)

    @property
    def channels(self):
        return 0 if self.buffer is None else self.buffer.shape[0]

    def signature(self, *more):
        """What every rank must share for this field: its dtype and leading dims (and ``more``), and whether the call
        is differentiated (a gradient needs the same calls on every rank)."""
        return 0 if self.buffer is None else call_signature(self.dtype.str, self.widened_from, self.leading, *more)


def differentiable(dim, *values):
    """Whether a call on ``values`` is differentiated: a tensor among them requires grad, and the call reduces the
    spatial dims (any other ``dim`` takes the plain path, which refuses it)."""
    if not _autograd.wanted(*values):
        return False
    ndim = getattr(values[0], "ndim", 0)
    normal, message = normalise_dims(dim, ndim) if ndim >= 2 else (None, "no spatial dims")
    return not message and normal == [ndim - 2, ndim - 1]


PER_POINT, PER_ROW, EITHER = 0, 1, 2  # the weights' forms (python/src/python_mesh.hpp, WeightsForm)


def weights_buffer(weights, field, problems, name="weights"):
    """Weights broadcast to the ``(h, w)`` shard, as float64, and their form: ``(h,)`` per row when they are
    constant along longitude by construction (``None``, a ``(h, 1)`` array, or a broadcast view such as
    ``spherical_area_weights`` returns), ``(h, w)`` per point otherwise. A shard one column wide cannot tell,
    and takes the form the other ranks' weights have (decided with the grid, in the same allreduce). Whatever
    reading or copying them raises is this rank's problem (then ``None``)."""
    with problems.catching(name):
        return _weights_of(weights, field, problems, name)
    return None, PER_ROW


def _weights_of(weights, field, problems, name):
    if field.buffer is None:
        return None, PER_ROW
    if weights is None:
        return np.ones(field.rows, dtype=np.float64), PER_ROW
    array = _arrays.as_numpy(weights, name, problems)
    if array is None:
        return None, PER_ROW
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    try:
        view = np.broadcast_to(array, (field.rows, field.cols))
    except ValueError:
        problems.add(
            f"{name}: shape {tuple(np.shape(weights))} does not broadcast to the shard ({field.rows}, {field.cols})"
        )
        return None, PER_ROW
    if field.cols == 0:
        return np.zeros(field.rows, dtype=np.float64), EITHER  # no points: the values never count
    if field.cols == 1:  # a broadcast view keeps its zero stride when cut to one column
        given_stride = array.strides[-1] if array.ndim >= 1 and array.shape[-1] == 1 else None
        form = PER_ROW if given_stride == 0 else EITHER
        return np.ascontiguousarray(view[:, 0], dtype=np.float64), form
    if view.strides[1] == 0:
        return np.ascontiguousarray(view[:, 0], dtype=np.float64), PER_ROW
    return np.ascontiguousarray(view, dtype=np.float64), PER_POINT


def declared_img_shape(img_shape):
    """``img_shape`` (None, or the (nlat, nlon) a caller declares) as a pair of ints, and the problem with it ("" if
    none): agreed in the call's first allreduce, never raised on one rank alone."""
    if img_shape is None:
        return None, ""
    try:
        img = (int(img_shape[0]), int(img_shape[1]))
        if len(img_shape) != 2:
            raise ValueError("expected (nlat, nlon)")
    except Exception as error:  # noqa: BLE001 - agreed in the call's first allreduce
        return None, f"img_shape={img_shape!r}: {error}"
    return img, ""


def result_dtype(dtype, field, problems):
    """The dtype a result is rounded to once: the field's own (None; a half-precision tensor's float32), or the
    float32 or float64 asked for (a numpy dtype, its name, or a torch dtype)."""
    if dtype is None:
        return field.dtype
    name = str(dtype).replace("torch.", "")
    try:
        chosen = np.dtype(name)
    except TypeError:
        chosen = None
    if chosen not in _arrays.FLOATING:
        problems.add(f"dtype={dtype!r}: expected None (the input's), float32 or float64")
        return field.dtype
    return chosen


def metric_result(values, field, keepdim=False):
    """Per-channel float64 results as the field's kind and dtype, shaped like its leading dims."""
    shape = field.leading + ((1, 1) if keepdim else ())
    return _arrays.like(values.astype(field.dtype, copy=False).reshape(shape), field.original)
