"""``gridshard.Distributed``: ACE's ``Distributed`` API over an mpi4py communicator, exact on shards.

Every rank holds the shards ``(..., h_local, w_local)`` of its own box of a ``data x lat x lon`` mesh
(world rank ``d*h*w + i*w + j``). The metrics come from the C++ library, bit-identical for every mesh
shape and rank count; the gradient metrics exchange one-cell halos instead of gathering fields. Each
method says which group it talks to and which ranks hold its result, as ACE's do.
"""

import math
import numbers
import os
import pickle
import zlib

import numpy as np

from . import _abort, _arrays, _autograd, _gradients
from . import _gridshard as _core
from ._arrays import Problems
from ._mpi import mpi_errors

ArgumentError = _core.ArgumentError


def _mesh_sizes_from_env(default=None):
    """``(FME_DISTRIBUTED_H, FME_DISTRIBUTED_W)`` as ints (``default`` for an unset one, when given), and ""; or,
    when one is not an integer, the texts as they are and what is wrong, for ``Distributed`` to compare between
    the ranks before anyone raises. No MPI calls."""
    sizes, bad = [], ""
    for name in ("FME_DISTRIBUTED_H", "FME_DISTRIBUTED_W"):
        text = os.environ.get(name, default)
        try:
            sizes.append(int(text))
        except (TypeError, ValueError):
            sizes.append(text)
            bad = bad or f"an integer {name}, got {text!r}"
    return tuple(sizes), bad


def _signature(*parts):
    """A code of what every rank of a call must give alike (a dtype, leading dims, whether weights are given),
    the same in every process (a CRC of the parts' repr; Python's own str hash differs between processes), with the
    call's phase (plain, differentiated, backward: _autograd.call_phase) in its two lowest bits, which the
    compiled module compares on its own to say when the ranks differ in gradients."""
    return (zlib.crc32(repr(parts).encode()) << 2) | _autograd.call_phase()


_SPATIAL_DIMS_HELP = "gridshard reduces over the two spatial dims, dim=(-2, -1)"


def _normalise_dims(dim, ndim, name="dim"):
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


def _check_spatial_dims(dim, ndim, problems, name="dim"):
    normal, message = _normalise_dims(dim, ndim, name)
    if message:
        problems.add(message)
    elif normal != [ndim - 2, ndim - 1]:
        problems.add(f"{name}={dim!r}: {_SPATIAL_DIMS_HELP} of a {ndim}-dim tensor")


class _Field:
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
        return 0 if self.buffer is None else _signature(self.dtype.str, self.widened_from, self.leading, *more)


def _differentiable(dim, *values):
    """Whether a call on ``values`` is differentiated: a tensor among them requires grad, and the call reduces the
    spatial dims (any other ``dim`` takes the plain path, which refuses it)."""
    if not _autograd.wanted(*values):
        return False
    ndim = getattr(values[0], "ndim", 0)
    normal, message = _normalise_dims(dim, ndim) if ndim >= 2 else (None, "no spatial dims")
    return not message and normal == [ndim - 2, ndim - 1]


PER_POINT, PER_ROW, EITHER = 0, 1, 2  # the weights' forms (python/src/python_mesh.hpp, WeightsForm)


def _weights_buffer(weights, field, problems, name="weights"):
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


def _declared_img_shape(img_shape):
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


def _result_dtype(dtype, field, problems):
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


def _result(values, field, keepdim=False):
    """Per-channel float64 results as the field's kind and dtype, shaped like its leading dims."""
    shape = field.leading + ((1, 1) if keepdim else ())
    return _arrays.like(values.astype(field.dtype, copy=False).reshape(shape), field.original)


class Distributed:
    """ACE's ``Distributed`` on a ``data x h x w`` mesh of MPI ranks.

    ``comm`` is an mpi4py communicator (default ``MPI.COMM_WORLD``), of size ``data * h * w``;
    ``spatial_parallelism=(h, w)`` splits latitude over ``h`` ranks and longitude over ``w`` (default
    ``(1, 1)``: data-parallel only); ``split`` is ``"div_up"`` (torch-harmonics 0.8's
    ``compute_split_shapes``, as ACE) or ``"balanced"``; ``summation`` is ``"reproducible"`` (exact sums,
    the same bits on every mesh) or ``"fast"``. Collective over ``comm``.

    ``abort_on_exception``: when a ``Distributed`` spans more than one rank, an exception that no one catches
    on any rank ends every rank of the job (``MPI_Abort``, after the traceback and a line naming the rank),
    as ``python -m mpi4py`` does, instead of leaving the other ranks waiting for it. ``None`` (the default)
    follows ``GRIDSHARD_ABORT_ON_EXCEPTION`` (``0`` turns it off); ``False`` turns it off for the process,
    ``True`` on. No MPI calls of its own.

    >>> dist = gridshard.Distributed(spatial_parallelism=(2, 2))      # under mpirun -n 4
    >>> local = global_field[dist.get_local_slices(global_field.shape)]
    >>> dist.weighted_mean(local, weights[dist.get_local_slices(weights.shape)])
    """

    def __init__(self, comm=None, spatial_parallelism=None, split="div_up", summation="reproducible",
                 abort_on_exception=None):
        from mpi4py import MPI

        if comm is None:
            comm = MPI.COMM_WORLD
        # The arguments are compared between the ranks first (one allgather), so a rank that gives others
        # raises with the rest instead of leaving them in the mesh's collectives.
        given = (spatial_parallelism, split, summation)
        try:
            text = repr(given)
        except Exception as error:  # noqa: BLE001 - an argument whose repr raises differs from any that prints
            text = f"<arguments whose repr raises {type(error).__name__}: {error}>"
        with mpi_errors():
            everyone = comm.allgather(text)
        if len(set(everyone)) > 1:
            raise ArgumentError(f"Distributed(spatial_parallelism, split, summation): the ranks give different "
                                f"arguments, {everyone[0]} on rank 0 and {everyone[comm.Get_rank()]} here")
        try:
            h, w = (1, 1) if spatial_parallelism is None else (int(spatial_parallelism[0]), int(spatial_parallelism[1]))
        except (TypeError, ValueError, IndexError):
            raise ArgumentError(f"spatial_parallelism={spatial_parallelism!r}: expected (h, w)") from None
        size = comm.Get_size()
        if h < 1 or w < 1:
            raise ArgumentError(f"spatial_parallelism=({h}, {w}): both sizes must be positive")
        if size % (h * w) != 0:
            raise ArgumentError(
                f"world_size must be divisible by h_size * w_size, got world_size={size} and h*w={h * w}"
            )
        shape = (size // (h * w), h, w)
        with mpi_errors():
            self._mesh = _core.Mesh(comm.py2f(), shape, split, summation)  # split, summation: alike everywhere
            self._comm = comm.Dup()
            d, i, j = self._mesh.coords
            self._spatial_comm = self._comm.Split(d, i * w + j)
            self._data_comm = self._comm.Split(i * w + j, d)
        self._shape = shape
        if abort_on_exception is not None:
            _abort.install(bool(abort_on_exception))
        elif comm.Get_size() > 1 and _abort.enabled_by_environment():
            _abort.install(True)

    @classmethod
    def from_env(cls, comm=None, split="div_up"):
        """The mesh ACE's environment names: ``FME_DISTRIBUTED_BACKEND`` ``model`` (with
        ``FME_DISTRIBUTED_H`` and ``FME_DISTRIBUTED_W``), ``torch`` or unset (data-parallel over the
        world), or ``none`` (every process on its own). Raises ValueError on another value, as ACE does.
        Collective over ``comm`` (``MPI.COMM_SELF`` for ``none``)."""
        from mpi4py import MPI

        backend = os.environ.get("FME_DISTRIBUTED_BACKEND")
        if backend == "model":
            sizes, bad = _mesh_sizes_from_env()
            try:  # the sizes are compared between the ranks first, so a rank whose are bad raises with the rest
                return cls(comm, spatial_parallelism=sizes, split=split)
            except ArgumentError:
                if bad:
                    raise ValueError(f"FME_DISTRIBUTED_BACKEND=model needs {bad}") from None
                raise
        if backend == "none":
            return cls(MPI.COMM_SELF, split=split)
        if backend in (None, "torch"):
            return cls(comm, split=split)
        raise ValueError(
            f"Unknown FME_DISTRIBUTED_BACKEND value '{backend}'. Valid values: 'torch', 'model', 'none'."
        )

    # ----- who is who (no MPI calls) -----

    @property
    def rank(self):
        """This rank in the world."""
        return self._mesh.world_rank

    @property
    def world_size(self):
        return self._shape[0] * self._shape[1] * self._shape[2]

    @property
    def data_parallel_rank(self):
        """This rank's index in its data group (the data coordinate d)."""
        return self._mesh.coords[0]

    @property
    def total_data_parallel_ranks(self):
        return self._shape[0]

    @property
    def spatial_parallelism(self):
        """``(h, w)``."""
        return self._shape[1], self._shape[2]

    @property
    def mesh_shape(self):
        """``(data, h, w)``."""
        return self._shape

    @property
    def has_spatial_parallelism(self):
        return self._shape[1] * self._shape[2] > 1

    def is_root(self):
        """Whether this is world rank 0."""
        return self.rank == 0

    def is_data_parallel_root(self):
        return self.data_parallel_rank == 0

    def is_distributed(self):
        return self.world_size > 1

    def local_batch_size(self, batch_size):
        """``batch_size // total_data_parallel_ranks``, as ACE."""
        return batch_size // self.total_data_parallel_ranks

    def abort(self, code=1):
        """Ends the job now, from any thread, without a collective (ACE's ``abort``; gridshard.ace.GridshardBackend.
        abort says how). Never returns."""
        import sys
        import threading

        from mpi4py import MPI

        sys.stderr.write(f"gridshard: rank {self.rank} of {self.world_size}: abort({code})\n")
        sys.stderr.flush()
        if threading.current_thread() is threading.main_thread() or MPI.Query_thread() == MPI.THREAD_MULTIPLE:
            MPI.COMM_WORLD.Abort(code)
        os._exit(code)

    def barrier(self):
        """Collective over the world."""
        self._mesh.barrier("world")

    # ----- slices (no MPI calls) -----

    def get_local_slices(self, tensor_shape, data_parallel_dim=None):
        """The slices of a global array of ``tensor_shape`` that this rank holds: the last two dims split over
        the spatial mesh, ``data_parallel_dim`` (if given) in equal blocks over the data group, other dims
        whole. A 2-tuple shape gives the ``(lat, lon)`` slices alone. ValueError cases as ACE's."""
        tensor_shape = tuple(int(n) for n in tensor_shape)
        n_dp = self.total_data_parallel_ranks
        if data_parallel_dim is not None and tensor_shape[data_parallel_dim] % n_dp != 0:
            raise ValueError(
                "expected global data parallel dim to be divisible by data parallel "
                f"ranks, got global shape {tensor_shape} with {n_dp} data parallel ranks"
            )
        if len(tensor_shape) < 2:
            raise ValueError(
                f"expected tensor_shape with at least 2 dimensions for spatial slicing, got shape {tensor_shape}"
            )
        if len(tensor_shape) == 2 and data_parallel_dim is not None:
            raise ValueError(
                "data_parallel_dim cannot be specified for 2D tensors, since the spatial slicing would consume "
                f"both dimensions; got shape {tensor_shape}"
            )
        if data_parallel_dim is not None and (
            data_parallel_dim in (-1, -2) or data_parallel_dim >= len(tensor_shape) - 2
        ):
            raise ValueError(
                "data_parallel_dim must be a non-negative integer less than the last two dimensions (reserved "
                f"for spatial slicing), got data_parallel_dim={data_parallel_dim} and shape {tensor_shape}"
            )
        dp = None if data_parallel_dim is None else data_parallel_dim % len(tensor_shape)
        ranges = _core.local_slices(list(tensor_shape), self._shape, self._mesh.coords, self._mesh.split, dp)
        slices = []
        for k, (begin, end) in enumerate(ranges):
            whole = k < len(tensor_shape) - 2 and k != dp
            slices.append(slice(None, None) if whole else slice(begin, end))
        return tuple(slices)

    # ----- reductions over the data group -----

    def _agree_arrays(self, problems, group, array):
        """Raises every rank's problem, or a difference of dtype or shape between the ranks' arrays, on every rank
        of ``group`` (one allreduce)."""
        signature = 0 if array is None else _signature(array.dtype.str, array.shape)  # and the call's phase
        try:
            self._mesh.agree(problems.text(), group, signature)
        except ArgumentError as error:
            if problems or "must be the same on every rank" not in str(error):
                raise
            try:  # every rank is here: one more agreement says whether the ranks differ in gradients
                self._mesh.agree("", group, 1 + _autograd.call_phase())
            except ArgumentError:
                raise ArgumentError(
                    f"tensor: the ranks differ in whether they differentiate this call over the {group} group: a "
                    f"tensor that requires grad on some ranks only, torch.no_grad() on some ranks only, or backward() "
                    f"run on some ranks only"
                ) from None
            raise ArgumentError(
                f"tensor: the ranks' arrays differ in dtype or shape over the {group} group "
                f"(here {array.dtype} {tuple(array.shape)})"
            ) from None

    def _reduce_in_place(self, op, tensor):
        problems = Problems()
        array = None
        if not (isinstance(tensor, np.ndarray) or _arrays.is_tensor(tensor)):
            problems.add(f"tensor: a {type(tensor).__name__}; reduce_{op} writes into its argument, which must be a "
                         "numpy array or a torch tensor")
        else:
            array = _arrays.as_numpy(tensor, "tensor", problems, _arrays.REDUCIBLE)
        if array is not None and not array.flags.writeable:
            problems.add("tensor: read-only; a reduction writes its result into it")
        work = None
        with problems.catching("tensor"):  # the copy of a non-contiguous tensor, before the agreement
            if not problems:
                work = _arrays.contiguous(array)
        self._agree_arrays(problems, "data", None if problems else array)
        self._mesh.reduce(op, work.reshape(-1))
        if work is not array:
            array[...] = work
        _arrays.write_back(tensor, array)  # a device tensor: its staged copy back onto the device
        return tensor

    def reduce_sum(self, tensor):
        """Elementwise sum over the data group, written into ``tensor``, which is returned. Collective over
        ``data``; every rank holds the result."""
        return self._reduce_in_place("sum", tensor)

    def reduce_mean(self, tensor):
        """The mean over the data group, as ACE: ``tensor`` is summed in place (it holds the sum afterwards)
        and a new ``tensor / total_data_parallel_ranks`` is returned. Collective over ``data``."""
        return self._reduce_in_place("sum", tensor) / self.total_data_parallel_ranks

    def reduce_min(self, tensor):
        """Elementwise minimum over the data group, in place. Collective over ``data``."""
        return self._reduce_in_place("min", tensor)

    def reduce_max(self, tensor):
        """Elementwise maximum over the data group, in place. Collective over ``data``."""
        return self._reduce_in_place("max", tensor)

    def spatial_reduce_sum(self, tensor):
        """Elementwise sum over the spatial group, as a new array (``tensor`` is left alone); ``tensor`` itself
        without spatial parallelism. A tensor that requires grad gets ACE's backward, the identity (each rank's loss
        is the same global value, so each rank's gradient of it is its input's). Collective over ``spatial``."""
        if not self.has_spatial_parallelism:
            return tensor
        if _autograd.wanted(tensor):
            return _autograd.identity_reduce(
                lambda t: self._spatial_collective(self._mesh.spatial_reduce_sum, t), tensor)
        return self._spatial_collective(self._mesh.spatial_reduce_sum, tensor)

    def broadcast_spatial(self, tensor):
        """Spatial rank 0's ``tensor`` on every rank of its spatial group, as a new array; ``tensor`` itself
        without spatial parallelism. Collective over ``spatial``."""
        if not self.has_spatial_parallelism:
            return tensor
        return self._spatial_collective(self._mesh.broadcast_spatial, tensor)

    def _spatial_collective(self, collective, tensor):
        problems = Problems()
        array = _arrays.as_numpy(tensor, "tensor", problems, _arrays.REDUCIBLE)
        work = None
        with problems.catching("tensor"):  # the copy, before the agreement
            if array is not None:
                work = np.array(array, order="C", copy=True)
        self._agree_arrays(problems, "spatial", None if problems else array)
        collective(work.reshape(-1))
        return _arrays.like(work, tensor)

    # ----- gathers and scatters -----

    def _gather_arrays(self, comm, tensor, equal_shapes):
        """Every rank's array, in rank order, on rank 0 of ``comm`` (None elsewhere). Collective over ``comm``:
        one allgather of (shape, dtype), so every rank raises alike on a mismatch, then one Gatherv of the
        bytes."""
        problems = Problems()
        array = _as_any_numpy(tensor, problems)
        send = None
        with problems.catching("tensor"):  # the contiguous copy, before the allgather
            if array is not None:
                send = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        meta = (problems.text(), None if problems else (tuple(array.shape), array.dtype.str))
        with mpi_errors():
            metas = comm.allgather(meta)
        failed = [(r, m[0]) for r, m in enumerate(metas) if m[0]]
        if failed:
            rank, text = failed[0]
            marker = _arrays.SYSTEM_MARKER if text.startswith(_arrays.SYSTEM_MARKER) else ""
            raise _arrays.agreed_error(f"{marker}rank {rank}: {text[len(marker):]}")
        dtypes = {m[1][1] for m in metas}
        if len(dtypes) > 1:
            raise ArgumentError(f"tensor: dtypes differ between ranks: {sorted(dtypes)}")
        shapes = [m[1][0] for m in metas]
        if equal_shapes and len(set(shapes)) > 1:
            raise ArgumentError(f"tensor: shapes differ between ranks ({shapes[0]} on rank 0); use gather_irregular")
        if len({len(s) for s in shapes}) > 1:
            raise ArgumentError("tensor: the number of dims differs between ranks")
        dtype = np.dtype(dtypes.pop())
        counts = [math.prod(s) * dtype.itemsize for s in shapes]
        receive = None
        if comm.Get_rank() == 0:
            receive = np.empty(sum(counts), dtype=np.uint8)
        from mpi4py import MPI

        with mpi_errors():
            comm.Gatherv(send, [receive, counts, None, MPI.BYTE] if receive is not None else None, root=0)
        if receive is None:
            return None
        offsets = np.cumsum([0] + counts)
        return [
            _arrays.like(receive[offsets[r] : offsets[r + 1]].view(dtype).reshape(shapes[r]), tensor)
            for r in range(len(shapes))
        ]

    def gather(self, tensor, gather_list=None):
        """Every world rank's ``tensor`` (all of one shape) on world rank 0, as a list indexed by world rank;
        None on the other ranks. With ``gather_list`` on the root, its entries are filled in place and it is
        returned. Collective over the world."""
        return _fill(self._gather_arrays(self._comm, tensor, equal_shapes=True), gather_list)

    def gather_irregular(self, tensor):
        """``gather`` for shards whose shapes differ between ranks (the same number of dims): each entry keeps
        its rank's own shape. Collective over the world."""
        return self._gather_arrays(self._comm, tensor, equal_shapes=False)

    def _gather_object(self, comm, group, obj):
        """Every rank's ``obj`` on rank 0 of ``comm``; an object that cannot be pickled raises on every rank."""
        problems = Problems()
        data = _pickled(obj, problems)
        self._mesh.agree(problems.text(), group)
        with mpi_errors():
            gathered = comm.gather(data, root=0)
        return None if gathered is None else [pickle.loads(d) for d in gathered]

    def _broadcast_object(self, comm, group, obj, none_message):
        """Rank 0's ``obj`` on every rank of ``comm``; ValueError on every rank when it is None (or cannot be
        pickled)."""
        problems = Problems()
        data = _pickled(obj, problems) if comm.Get_rank() == 0 else None
        if comm.Get_rank() == 0 and obj is None:
            problems.add(none_message)
        self._mesh.agree(problems.text(), group)
        with mpi_errors():
            return pickle.loads(comm.bcast(data, root=0))

    def gather_object(self, obj):
        """Every world rank's picklable ``obj`` on world rank 0, in world-rank order; None elsewhere. Collective
        over the world."""
        return self._gather_object(self._comm, "world", obj)

    def scatter_object(self, obj):
        """World rank 0's ``obj`` on every rank (the others' are ignored); ValueError on every rank when the
        root gives None. Collective over the world."""
        return self._broadcast_object(self._comm, "world", obj, "Root process must provide an object to scatter")

    # ----- over the data group (ACE's data_parallel_* members) -----

    def data_parallel_gather(self, tensor, gather_list=None):
        """Every data rank's ``tensor`` (one shape) on data rank 0 of this rank's data group, as a list in
        data-rank order (``gather_list``, filled, when the root gives one); None elsewhere. Collective over
        ``data``."""
        return _fill(self._gather_arrays(self._data_comm, tensor, equal_shapes=True), gather_list)

    def data_parallel_scatter(self, tensor, scatter_list=None):
        """Fills ``tensor`` with entry ``data_parallel_rank`` of data rank 0's ``scatter_list`` (one entry per data
        rank, each of the root's ``tensor`` shape), and returns it. Collective over ``data`` (one Scatter)."""
        problems = Problems()
        array = _arrays.as_numpy(tensor, "tensor", problems, _arrays.REDUCIBLE)
        send = None
        if self.is_data_parallel_root() and array is not None:
            n = self.total_data_parallel_ranks
            if scatter_list is None or len(scatter_list) != n:
                problems.add(f"scatter_list: the data root must give {n} tensors, got "
                             f"{'None' if scatter_list is None else len(scatter_list)}")
            else:
                with problems.catching("scatter_list"):  # the stacked copy, before the agreement
                    pieces = [_as_any_numpy(t, problems) for t in scatter_list]
                    shapes = {tuple(np.shape(piece)) for piece in pieces if piece is not None}
                    if not problems and shapes != {tuple(array.shape)}:
                        problems.add(f"scatter_list: entries of shapes {sorted(shapes)}, the tensor's is {array.shape}")
                    if not problems:
                        send = np.stack([np.asarray(piece, dtype=array.dtype) for piece in pieces])
        receive = None
        with problems.catching("tensor"):
            if array is not None:
                receive = np.empty(array.shape, array.dtype)
        self._agree_arrays(problems, "data", None if problems else array)
        with mpi_errors():
            self._data_comm.Scatter(
                None if send is None else send.reshape(-1).view(np.uint8), receive.reshape(-1).view(np.uint8), root=0
            )
        array[...] = receive
        _arrays.write_back(tensor, array)
        return tensor

    def data_parallel_gather_object(self, obj):
        """Every data rank's ``obj`` on data rank 0, in data-rank order; None elsewhere. Collective over
        ``data``."""
        return self._gather_object(self._data_comm, "data", obj)

    def data_parallel_broadcast_object(self, obj):
        """Data rank 0's ``obj`` on every rank of the data group; ValueError on every rank when it is None.
        Collective over ``data``."""
        return self._broadcast_object(
            self._data_comm, "data", obj, "Data-parallel root must provide an object to broadcast"
        )

    def gather_global(self, tensor, global_shape, data_parallel_dim=0):
        """The global array of ``global_shape`` on world rank 0 from every rank's slice of it
        (``get_local_slices(global_shape, data_parallel_dim)``); None on the other ranks. With
        ``data_parallel_dim=None`` a spatial-only gather: the field of data replica 0. Uneven spatial
        shards are fine. Collective over the world (one Gatherv)."""
        problems = Problems()
        array = _arrays.as_numpy(tensor, "tensor", problems, _arrays.REDUCIBLE)
        img, dp = (0, 0), None
        try:  # every check a rank makes alone becomes a problem raised on every rank
            global_shape = tuple(int(n) for n in global_shape)
            img = global_shape[-2:]
            dp = None if data_parallel_dim is None else int(data_parallel_dim) % len(global_shape)
            slices = self.get_local_slices(global_shape, dp)
            if data_parallel_dim is not None and global_shape[dp] % self.total_data_parallel_ranks:
                raise ValueError(
                    "expected global data parallel dim to be divisible by data parallel "
                    f"ranks, got global_shape {global_shape} with {self.total_data_parallel_ranks} data parallel ranks"
                )
        except Exception as error:  # noqa: BLE001 - every check a rank makes alone is agreed
            problems.add(f"global_shape={global_shape!r}, data_parallel_dim={data_parallel_dim!r}: {error}")
        if array is not None and not problems:
            expected = tuple(s.stop - s.start if s.start is not None else n for s, n in zip(slices, global_shape))
            if tuple(array.shape) != expected:
                problems.add(f"tensor: shape {tuple(array.shape)}, but this rank's slice of {global_shape} is {expected}")
        signature, send, samples, channels, out = 0, None, 0, 0, None
        with problems.catching("tensor"):  # the copies and the root's result, before the call's agreement
            if not problems:
                if dp is None:
                    samples = 1 if self.data_parallel_rank == 0 else 0
                    moved = array
                    rest = global_shape[:-2]
                else:
                    moved = np.moveaxis(array, dp, 0)
                    samples = moved.shape[0]
                    rest = tuple(n for k, n in enumerate(global_shape[:-2]) if k != dp)
                channels = math.prod(rest)
                send = (np.ascontiguousarray(moved) if samples else np.empty(0, dtype=array.dtype)).reshape(-1)
                total = global_shape[dp] if dp is not None else 1
                out = np.empty((total,) + rest + img, dtype=array.dtype) if self.is_root() else None
                signature = _signature(array.dtype.str, global_shape, dp)
        if problems:
            self._mesh.gather_global(problems.text(), 0, None, (1, 1), 0, 0, None)  # raises on every rank
        self._mesh.gather_global("", signature, send, img, samples, channels, None if out is None else out.reshape(-1))
        if out is None:
            return None
        out = out[0] if dp is None else np.moveaxis(out, 0, dp)
        return _arrays.like(np.ascontiguousarray(out), tensor)

    def gather_spatial_tensor(self, tensor, img_shape):
        """The whole ``img_shape`` field on every rank of the spatial group, by an all-gather of the uneven
        shards (never a zero-padded all-reduce); ``tensor`` itself when every rank already holds the whole
        field. Collective over ``spatial``."""
        problems = Problems()
        array = _arrays.as_numpy(tensor, "tensor", problems, _arrays.REDUCIBLE)
        img, whole_box, shard_shape = (1, 1), True, None
        try:
            img = (int(img_shape[0]), int(img_shape[1]))
            if len(img_shape) != 2:
                raise ValueError("expected (nlat, nlon)")
            # Decided by the whole group: a rank whose own box is the whole grid cannot tell a shard from a
            # global field, and a rank that returned early would leave the others waiting.
            box = self.get_local_slices(img)
            whole_box = all(s.stop - s.start == n for s, n in zip(box, img))
            shard_shape = tuple(s.stop - s.start for s in box)
        except Exception as error:  # noqa: BLE001 - agreed below, like any problem
            problems.add(f"img_shape={img_shape!r}: {error}")
        state = 0
        if problems:
            state = 4
        elif array is None or array.ndim < 2:
            state = 4
            if array is not None:
                problems.add(f"tensor: shape {tuple(array.shape)} has no (lat, lon) dims")
        elif tuple(array.shape[-2:]) == img and not whole_box:
            state = 2  # a global field
        elif tuple(array.shape[-2:]) == shard_shape:
            state = 0 if whole_box else 1  # a shard (or, with the whole box, either)
        else:
            state = 4
            problems.add(f"tensor: shape {tuple(array.shape)} is neither the field {img} nor this rank's shard {shard_shape}")
        from mpi4py import MPI

        with mpi_errors():
            states = self._spatial_comm.allreduce(state, op=MPI.BOR)
        if states & 4:
            self._mesh.agree(problems.text(), "spatial")
        if states == 2 or states == 0:
            return tensor
        if states & 2:
            raise ArgumentError("tensor: some ranks passed the whole field and others their shards")
        leading = tuple(array.shape[:-2])
        send, out = None, np.empty(0, dtype=array.dtype)
        with problems.catching("tensor"):  # the copy and the result, agreed in gather_spatial's own check
            send = _arrays.contiguous(array).reshape(-1)
            out = np.empty(leading + img, dtype=array.dtype)
        signature = _signature(array.dtype.str, leading)
        self._mesh.gather_spatial(problems.text(), signature, send, img, math.prod(leading), out.reshape(-1))
        return _arrays.like(out, tensor)

    def gather_spatial(self, data, img_shape):
        """``gather_spatial_tensor`` of every value of the dict ``data``. Collective over ``spatial``."""
        return {k: self.gather_spatial_tensor(v, img_shape) for k, v in data.items()}

    def scatter_spatial(self, data, img_shape):
        """This rank's C-contiguous slice of every global value of the dict ``data``. No MPI calls."""
        lat, lon = self.get_local_slices(img_shape)
        result = {}
        for key, value in data.items():
            part = value[..., lat, lon]
            result[key] = part.contiguous() if _arrays.is_tensor(part) else np.ascontiguousarray(part)
        return result

    # ----- metrics on shards: results spatially global, per leading index, on every spatial rank -----

    def _field_metric(self, kernel, data, weights, dim, keepdim=False):
        problems = Problems()
        field = _Field(data, "data", problems)
        if field.buffer is not None:
            _check_spatial_dims(dim, field.array.ndim, problems)
        w, form = _weights_buffer(weights, field, problems)
        out = np.empty(field.channels if not problems else 0, dtype=np.float64)
        signature = field.signature(weights is None)
        kernel(self._mesh, problems.text(), signature, field.buffer if not problems else None, w, form, out)
        return _result(out, field, keepdim)

    def _paired_metric(self, kernel, truth, predicted, weights, dim, *extra, problem=""):
        problems = Problems()
        if problem:
            problems.add(problem)
        t = _Field(truth, "truth", problems)
        p = _Field(predicted, "predicted", problems)
        if t.buffer is not None:
            _check_spatial_dims(dim, t.array.ndim, problems)
            if p.buffer is not None and t.array.shape != p.array.shape:
                problems.add(f"predicted: shape {tuple(p.array.shape)} differs from truth's {tuple(t.array.shape)}")
            elif p.buffer is not None and t.dtype != p.dtype:
                problems.add(f"predicted: dtype {p.dtype} differs from truth's {t.dtype}")
        w, form = _weights_buffer(weights, t, problems)
        out = np.empty(t.channels if not problems else 0, dtype=np.float64)
        ok = not problems
        signature = t.signature(weights is None)
        kernel(self._mesh, problems.text(), signature, t.buffer if ok else None, p.buffer if ok else None, w, form,
               *extra, out)
        return _result(out, t)

    # A tensor that requires grad gets a result attached to the graph (docs/python.md, "Gradients"): the value is the
    # library's, the gradient each rank gets is that of the global value with respect to its own shard.

    def weighted_sum(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """``sum(where(weights != 0, data, 0) * weights)`` over the spatial dims (ACE's NaN rule: a NaN under
        zero weight vanishes, others propagate). Collective over ``spatial``."""
        if _differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedSum(self, weights, keepdim), data)
        return self._field_metric(_core.weighted_sum, data, weights, dim, keepdim)

    def weighted_mean(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """``weighted_sum(data, weights) / sum(weights)`` over the spatial dims (``weights=None``: the plain
        mean). Collective over ``spatial``."""
        if _differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedMean(self, weights, keepdim), data)
        return self._field_metric(_core.weighted_mean, data, weights, dim, keepdim)

    def global_mean(self, data, dim=(-2, -1), keepdim=False):
        """The plain mean over the whole global grid (a NaN propagates): the loss of an elementwise error (MSE, L1,
        CRPS per point) whose tiles add up to the global loss, where ACE's rank-local means add up to the sum of the
        tiles' means. Collective over ``spatial``."""
        return self.weighted_mean(data, None, dim, keepdim)

    def weighted_nanmean(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """The weighted mean over the points that are not NaN; NaN for a channel with none. Collective over
        ``spatial``."""
        if _differentiable(dim, data):
            return _autograd.reduce(
                _gradients.WeightedMean(self, weights, keepdim, valid_only=True, method="weighted_nanmean"), data)
        return self._field_metric(_core.weighted_nanmean, data, weights, dim, keepdim)

    def weighted_std(self, data, weights=None, dim=(-2, -1)):
        """The weighted population standard deviation over the spatial dims. Collective over ``spatial``."""
        if _differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedStd(self, weights), data)
        return self._field_metric(_core.weighted_std, data, weights, dim)

    def weighted_mean_bias(self, truth, predicted, weights=None, dim=(-2, -1)):
        """``weighted_mean(predicted - truth, weights)``. Collective over ``spatial``."""
        if _differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.Paired(self, weights, "bias"), truth, predicted)
        return self._paired_metric(_core.bias, truth, predicted, weights, dim)

    def root_mean_squared_error(self, truth, predicted, weights=None, dim=(-2, -1)):
        """``sqrt(weighted_mean((predicted - truth)**2, weights))``. Collective over ``spatial``."""
        if _differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.Paired(self, weights, "rmse"), truth, predicted)
        return self._paired_metric(_core.rmse, truth, predicted, weights, dim)

    def weighted_mean_gradient_magnitude(self, tensor, weights=None, dim=(-2, -1)):
        """``weighted_nanmean(gradient_magnitude(tensor), weights)``, the magnitudes by halo exchange.
        Collective over ``spatial``."""
        if _differentiable(dim, tensor):
            return _autograd.reduce(_gradients.GradientMagnitudeMean(self, weights, False), tensor)
        return self._field_metric(_core.weighted_mean_gradient_magnitude, tensor, weights, dim)

    def gradient_magnitude_percent_diff(self, truth, predicted, weights=None, dim=(-2, -1), img_shape=None):
        """``100 * (G(predicted) - G(truth)) / G(truth)``, ``G = weighted_mean_gradient_magnitude``, by one
        halo exchange of one-cell strips (never a gather). Each field's magnitudes count where they are valid (ACE's
        rule). ``img_shape``, if given, is checked against the grid the shards form. Collective over ``spatial``."""
        if _differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.GradientMagnitudeMean(self, weights, True, img_shape), truth, predicted)
        img, problem = _declared_img_shape(img_shape)
        return self._paired_metric(
            _core.gradient_magnitude_percent_diff, truth, predicted, weights, dim, img, problem=problem
        )

    # ----- ensemble and anomaly scores (docs/forecast.md has the formulas) -----

    _ENSEMBLE_SCORES = ("ensemble_mean_rmse", "spread", "spread_skill_ratio", "crps", "fair_crps")

    def _stacked(self, truth, stack, name, axis, problems, count=None):
        """``stack`` (fields of the truth's shape along ``axis``) as the library's ``(fields * channels, h, w)``
        buffer, member slowest (a copy only when ``axis`` is not the first dim); and the number of fields. What
        reading or copying it raises is this rank's problem (then ``None, 0``)."""
        with problems.catching(name):
            return self._stacked_unguarded(truth, stack, name, axis, problems)
        return None, 0

    def _stacked_unguarded(self, truth, stack, name, axis, problems):
        array = _arrays.as_numpy(stack, name, problems)
        if truth.buffer is None or array is None:
            return None, 0
        if array.ndim != truth.array.ndim + 1:
            problems.add(f"{name}: shape {tuple(array.shape)} is not the truth's {tuple(truth.array.shape)} "
                         f"with a member dim")
            return None, 0
        normal, message = _normalise_dims(axis, array.ndim, "member_dim")
        if message or len(normal) != 1 or normal[0] >= array.ndim - 2:
            problems.add(message or f"member_dim={axis!r}: must name one leading dim of the ensemble")
            return None, 0
        moved = np.moveaxis(array, normal[0], 0)
        if tuple(moved.shape[1:]) != tuple(truth.array.shape) or array.dtype != truth.dtype:
            problems.add(f"{name}: {tuple(array.shape)} {array.dtype} does not hold fields of the truth's "
                         f"{tuple(truth.array.shape)} {truth.dtype} along member_dim={axis!r}")
            return None, 0
        fields = moved.shape[0]
        return _arrays.contiguous(moved).reshape(fields * truth.channels, truth.rows, truth.cols), fields

    def _ensemble(self, truth, ensemble, weights, member_dim, score):
        if _autograd.wanted(truth, ensemble) and isinstance(member_dim, int):
            return _autograd.reduce(_gradients.Ensemble(self, weights, member_dim, score), truth, ensemble)
        problems = Problems()
        t = _Field(truth, "truth", problems)
        members, count = self._stacked(t, ensemble, "ensemble", member_dim, problems)
        w, form = _weights_buffer(weights, t, problems)
        ok = not problems
        out = np.empty(5 * t.channels if ok else 0, dtype=np.float64)
        _core.ensemble_scores(self._mesh, problems.text(), t.signature(weights is None, count),
                              t.buffer if ok else None, members if ok else None, count, w, form, out)
        k = self._ENSEMBLE_SCORES.index(score)
        return _result(out.reshape(5, -1)[k] if ok else out, t)

    def crps(self, truth, ensemble, weights=None, member_dim=0, fair=False):
        """The continuous ranked probability score of an ensemble, the area-weighted mean of
        ``mean_m |x_m - y| - sum_{m,k} |x_m - x_k| / (2 M^2)`` (``fair=True``: ``2 M (M - 1)``), as WeatherBench 2
        defines it. ``ensemble`` holds ``M >= 2`` fields of the truth's shape along ``member_dim``; a point
        counts where the truth and every member are finite. Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "fair_crps" if fair else "crps")

    def ensemble_spread(self, truth, ensemble, weights=None, member_dim=0):
        """``sqrt(weighted_mean(var_m(x)))``, the unbiased variance over members, over the points where the
        truth and every member are finite (as ``gridshard eval``'s ``spread``). Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "spread")

    def ensemble_mean_rmse(self, truth, ensemble, weights=None, member_dim=0):
        """``sqrt(weighted_mean((xbar - y)^2))``, the RMSE of the ensemble mean. Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "ensemble_mean_rmse")

    def spread_skill_ratio(self, truth, ensemble, weights=None, member_dim=0):
        """``ensemble_spread / ensemble_mean_rmse`` of one forecast (without the sqrt((M+1)/M) correction).
        Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "spread_skill_ratio")

    def anomaly_correlation(self, truth, predicted, climatology, weights=None):
        """The uncentred anomaly correlation, as WeatherBench 2: ``sum a x' y' / sqrt(sum a x'^2 sum a y'^2)``
        with ``x' = predicted - climatology`` and ``y' = truth - climatology``, over the points where all three
        are finite. Collective over ``spatial``."""
        problems = Problems()
        t = _Field(truth, "truth", problems)
        stacked = None
        if t.buffer is not None:
            p = _arrays.as_numpy(predicted, "predicted", problems)
            c = _arrays.as_numpy(climatology, "climatology", problems)
            if p is not None and c is not None:
                if p.shape != t.array.shape or c.shape != t.array.shape or p.dtype != t.dtype or c.dtype != t.dtype:
                    problems.add(f"predicted {tuple(p.shape)} {p.dtype} and climatology {tuple(c.shape)} {c.dtype} "
                                 f"must have the truth's shape {tuple(t.array.shape)} and dtype {t.dtype}")
                else:
                    with problems.catching("predicted and climatology"):  # one copy of both, on this rank
                        stacked = np.concatenate([_arrays.contiguous(p).reshape(t.buffer.shape),
                                                  _arrays.contiguous(c).reshape(t.buffer.shape)])
        w, form = _weights_buffer(weights, t, problems)
        ok = not problems
        out = np.empty(t.channels if ok else 0, dtype=np.float64)
        _core.anomaly_correlation(self._mesh, problems.text(), t.signature(weights is None), t.buffer if ok else None,
                                  stacked if ok else None, w, form, out)
        return _result(out, t)

    def regional_weighted_mean(self, data, weights, regional_weights, dim=(-2, -1), keepdim=False):
        """The weighted mean with weights ``weights * regional_weights`` (ACE's regional_area_weighted_mean).
        Collective over ``spatial``."""
        if _differentiable(dim, data):
            return _autograd.reduce(_gradients.Regional(self, weights, regional_weights, keepdim), data)
        problems = Problems()
        field = _Field(data, "data", problems)
        if field.buffer is not None:
            _check_spatial_dims(dim, field.array.ndim, problems)
        w, form = _weights_buffer(weights, field, problems)
        region = None
        if field.buffer is not None:
            given = _arrays.as_numpy(regional_weights, "regional_weights", problems)
            try:
                region = np.ascontiguousarray(np.broadcast_to(given, (field.rows, field.cols)), dtype=np.float64)
            except ValueError:
                problems.add(f"regional_weights: shape {np.shape(given)} does not broadcast to the shard")
            except Exception as error:  # noqa: BLE001 - a MemoryError from the copy, say: agreed below
                problems.add(f"regional_weights: {type(error).__name__} on reading it: {error}")
        out = np.empty(field.channels if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.regional_weighted_mean(
            self._mesh, problems.text(), field.signature(weights is None), field.buffer if ok else None, w, form,
            region, out
        )
        return _result(out, field, keepdim)

    def zonal_mean(self, data):
        """The NaN-aware mean over longitude of each local row, ``(..., h_local)``; NaN for an all-NaN row.
        Collective over ``lon`` (differentiated: over ``spatial``, for the rows' valid counts)."""
        if _autograd.wanted(data) and getattr(data, "ndim", 0) >= 2:
            return _autograd.reduce(_gradients.ZonalMean(self), data)
        problems = Problems()
        field = _Field(data, "data", problems)
        out = np.empty(0, dtype=np.float64)
        with problems.catching("data"):  # the result, allocated before the call's agreement
            out = np.empty((field.channels, field.rows) if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.zonal_mean(self._mesh, problems.text(), field.signature(), field.buffer if ok else None, out.reshape(-1))
        return _arrays.like(out.astype(field.dtype, copy=False).reshape(field.leading + (field.rows,)), data)

    def _sum_over_lon(self, grad, data):
        """``grad`` (``data``'s leading dims and rows, a gradient of a result replicated over the lon group) summed
        over the lon group, in lon-rank order (the same bits on every rank of it), in ``grad``'s dtype and on its
        device. Collective over ``spatial`` (the call's agreement, on ``data``'s shards), then over ``lon``."""
        problems = Problems()
        field = _Field(data, "data", problems)
        values = np.zeros(0)
        torch = _arrays._torch()
        with problems.catching("the upstream gradient"):  # a copy, before the call's agreement
            values = np.array(grad.detach().to("cpu", torch.float64).numpy(), dtype=np.float64, order="C")
        ok = not problems
        self._mesh.sum_over_lon(problems.text(), field.signature("sum_over_lon"), field.rows, field.cols,
                                values.reshape(-1) if ok else None)
        return torch.from_numpy(values).to(device=grad.device, dtype=grad.dtype)

    def spherical_power_spectrum(self, data, grid="legendre-gauss", lmax=None, mmax=None, convention="ace",
                                 truncation="torch-harmonics-0.8", mode="automatic", dtype=None):
        """The spherical-harmonic power per degree of each field, ``(..., L)`` on every spatial rank, computed in
        float64 and rounded once to the input's dtype (``dtype``: float32 or float64 to ask for another), the serial
        answer bit for bit on every mesh (docs/spectrum.md). ``grid``: "legendre-gauss" (ACE's), "equiangular" or
        "lobatto"; ``convention``: "ace" (m >= 0 once each) or "full" (m > 0 doubled); ``lmax``, ``mmax``: None for
        the truncation's. Values that are not finite propagate. Collective over ``spatial``."""
        problems = Problems()
        field = _Field(data, "data", problems)
        out_dtype = _result_dtype(dtype, field, problems)
        for name, value in (("lmax", lmax), ("mmax", mmax)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                problems.add(f"{name}={value!r}: expected a positive int or None")
        names = {"grid": (grid, ("legendre-gauss", "equiangular", "lobatto")),
                 "convention": (convention, ("ace", "full")),
                 "truncation": (truncation, ("torch-harmonics-0.8", "triangular")),
                 "mode": (mode, ("automatic", "field-owners", "transposes"))}
        for name, (value, known) in names.items():
            if value not in known:
                problems.add(f"{name}={value!r}: expected one of {', '.join(known)}")
        ok = not problems
        values = _core.spherical_power_spectrum(
            self._mesh, problems.text(), field.signature(), field.buffer if ok else None, grid if ok else "",
            truncation if ok else "", (lmax or 0) if ok else 0, (mmax or 0) if ok else 0, convention if ok else "",
            mode if ok else "")
        values = np.frombuffer(values, dtype=np.float64).astype(out_dtype)
        return _arrays.like(values.reshape(field.leading + (-1,)), data)

    def zonal_power_spectrum(self, data, lat=None, weighting="none", dtype=None):
        """The zonal power per wavenumber of each local row, ``(..., h_local, w // 2 + 1)``, computed in float64 and
        rounded once to the input's dtype (``dtype``: float32 or float64 to ask for another):
        ``w_k f_m |rfft(x)_m / w|^2``, f_m = 1 at m = 0 and 2 elsewhere. ``weighting``: "none", "cos-lat"
        (Makani) or "circumference" (WeatherBench 2's zonal energy spectrum), which need ``lat``, the latitudes of
        this rank's rows in degrees. Collective over ``lon``."""
        problems = Problems()
        field = _Field(data, "data", problems)
        out_dtype = _result_dtype(dtype, field, problems)
        if weighting not in ("none", "cos-lat", "circumference"):
            problems.add(f"weighting={weighting!r}: expected one of none, cos-lat, circumference")
        lat_values = None
        if lat is not None:
            lat_values = [float(v) for v in np.asarray(_arrays.as_numpy(lat, "lat", problems), dtype=np.float64).ravel()]
        elif weighting != "none":
            problems.add(f"lat: needed for weighting={weighting!r}")
        ok = not problems
        values = _core.zonal_power_spectrum(self._mesh, problems.text(), field.signature(),
                                            field.buffer if ok else None, weighting if ok else "none",
                                            lat_values if ok else None)
        values = np.frombuffer(values, dtype=np.float64).astype(out_dtype)
        return _arrays.like(values.reshape(field.leading + (field.rows, -1)), data)

    def smooth_flood_fill(self, data, num_steps=4, blur_kernel_size=5, blur_sigma=1.0):
        """ACE's NaN fill before a spectral transform (``fme.core.fill.SmoothFloodFill``) on shards: each field's NaN
        points far from valid ones to the field's mean, the others grown in from their neighbours for ``num_steps``
        steps, then blended with a Gaussian blur across the boundary; a field without NaN is returned as it is. The
        input's shape and dtype (computed in float64, rounded once), the serial answer bit for bit on every mesh
        (docs/spectrum.md). Each field uses its own NaN points (ACE caches the first field's per variable and requires
        them not to change). Collective over ``spatial``."""
        problems = Problems()
        field = _Field(data, "data", problems)
        for name, value in (("num_steps", num_steps), ("blur_kernel_size", blur_kernel_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                problems.add(f"{name}={value!r}: expected an int")
        if not isinstance(blur_sigma, (int, float)) or isinstance(blur_sigma, bool):
            problems.add(f"blur_sigma={blur_sigma!r}: expected a number")
        ok = not problems
        values = _core.smooth_flood_fill(self._mesh, problems.text(), field.signature(), field.buffer if ok else None,
                                         num_steps if ok else 0, blur_kernel_size if ok else 1,
                                         float(blur_sigma) if ok else 1.0)
        values = np.frombuffer(values, dtype=np.float64).astype(field.dtype)
        return _arrays.like(values.reshape(field.leading + (field.rows, field.cols)), data)

    def halo_exchange(self, data, width=1, periodic_lon=True, pole="zero"):
        """The shard ``(..., h_local, w_local)`` padded by ``width`` cells on every side with its neighbours' values,
        corners included, ``(..., h_local + 2 width, w_local + 2 width)``, in the input's dtype: longitude wraps
        across ranks (``periodic_lon``; else zeros beyond the first and last columns), and beyond the poles
        ``pole`` gives zeros (``"zero"``), the edge row repeated (``"replicate"``) or, for fields on a regular
        global grid, the rows across the pole shifted by half the longitudes (``"across_pole"``). Any width up to
        the grid's size: where a neighbour's shard is thinner than ``width`` (uneven div_up splits), the halo comes
        from several ranks. A tensor that requires grad gets the adjoint as its backward: each halo cell's gradient
        is added into the rank that owns the cell. Collective over ``spatial`` (messages with the ranks that hold
        the halo only)."""
        if _autograd.wanted(data):
            return _autograd.halo(lambda t: self._halo(t, width, periodic_lon, pole, False),
                                  lambda g: self._halo(g, width, periodic_lon, pole, True), data)
        return self._halo(data, width, periodic_lon, pole, False)

    def _halo(self, data, width, periodic_lon, pole, adjoint):
        problems = Problems()
        field = _Field(data, "grad" if adjoint else "data", problems)
        if not isinstance(width, numbers.Integral) or isinstance(width, bool):
            problems.add(f"width={width!r}: expected an int")
        if pole not in ("zero", "replicate", "across_pole"):
            problems.add(f"pole={pole!r}: expected one of zero, replicate, across_pole")
        ok = not problems
        kernel = _core.padded_halo_adjoint if adjoint else _core.padded_halo
        values = kernel(self._mesh, problems.text(), field.signature(bool(periodic_lon), pole if ok else "", adjoint),
                        field.buffer if ok else None, int(width) if ok else 0, bool(periodic_lon),
                        pole if ok else "zero")
        grow = -2 * int(width) if adjoint else 2 * int(width)
        shape = field.leading + (field.rows + grow, field.cols + grow)
        out = _arrays.like(np.frombuffer(values, dtype=field.dtype).reshape(shape).copy(), data)
        return out.to(data.dtype) if _arrays.is_half(data) else out  # values moved, not formed: their own dtype

    def gradient_magnitude(self, tensor, dim=(-2, -1)):
        """``sqrt(g_lat**2 + g_lon**2)`` at this rank's points, torch.gradient's rule (unit spacing,
        one-sided at the grid's edges), the input's shape and dtype. Collective over ``spatial`` (one halo
        exchange; differentiated, its backward one more, the adjoint)."""
        if _differentiable(dim, tensor):
            return _autograd.elementwise(lambda t: self.gradient_magnitude(t, dim), self._gradient_magnitude_backward,
                                         tensor)
        problems = Problems()
        field = _Field(tensor, "tensor", problems)
        if field.buffer is not None:
            _check_spatial_dims(dim, field.array.ndim, problems)
        out = np.empty(0, dtype=np.float64)
        with problems.catching("tensor"):  # the result, field-sized, allocated before the call's agreement
            out = np.empty(field.buffer.shape if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.gradient_magnitude(
            self._mesh, problems.text(), field.signature(), field.buffer if ok else None, out.reshape(-1)
        )
        return _arrays.like(out.astype(field.dtype, copy=False).reshape(field.array.shape), tensor)

    def _gradient_magnitude_means(self, truth, predicted, weights, dim, img_shape):
        """Per field (the truth, then the prediction unless None) its weighted mean gradient magnitude over its valid
        magnitudes and the weight of those points, float64 ``(fields, *leading)`` each; and a function that gives a
        per-channel float64 result the kind, dtype and shape of the metrics' results. Collective over ``spatial``
        (one halo exchange of the fields, one allreduce)."""
        problems = Problems()
        img, problem = _declared_img_shape(img_shape)
        if problem:
            problems.add(problem)
        t = _Field(truth, "truth", problems)
        p = _Field(predicted, "predicted", problems) if predicted is not None else None
        if t.buffer is not None:
            _check_spatial_dims(dim, t.array.ndim, problems)
            if p is not None and p.buffer is not None and (t.array.shape != p.array.shape or t.dtype != p.dtype):
                problems.add(f"predicted: {tuple(p.array.shape)} {p.dtype} differs from truth's "
                             f"{tuple(t.array.shape)} {t.dtype}")
        w, form = _weights_buffer(weights, t, problems)
        fields = 1 if p is None else 2
        out = np.empty(2 * fields * t.channels if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.gradient_magnitude_means(self._mesh, problems.text(), t.signature(weights is None),
                                       t.buffer if ok else None, p.buffer if ok and p is not None else None, w, form,
                                       img, out)
        means, totals = out.reshape((2, fields) + t.leading)
        return means, totals, lambda values: _result(np.asarray(values, dtype=np.float64), t)

    def _gradient_magnitude_backward(self, tensor, upstream):
        """The gradient of ``sum(upstream * gradient_magnitude(tensor))`` with respect to this rank's ``tensor``, in its
        dtype and on its device (the library's adjoint kernel). Collective over ``spatial`` (two halo exchanges)."""
        problems = Problems()
        field = _Field(tensor, "tensor", problems)
        given = _Field(upstream, "upstream", problems)
        ok = not problems
        grads = np.empty(field.array.shape if ok else (0,), dtype=field.dtype)
        _core.gradient_magnitude_backward(self._mesh, problems.text(), field.signature(), field.buffer if ok else None,
                                          given.buffer if ok else None, grads, False)
        out = _arrays.like(grads, tensor)
        return out.to(tensor.dtype) if _arrays.is_half(tensor) else out

    def _time_mean_metric(self, kernel, truth, predicted, weights, time_dim, spatial_dims):
        problems = Problems()
        t = _Field(truth, "truth", problems)
        p = _Field(predicted, "predicted", problems)
        ntime = 0
        if t.buffer is not None and p.buffer is not None:
            ndim = t.array.ndim
            normal, message = _normalise_dims(time_dim, ndim, "time_dim")
            if t.array.shape != p.array.shape or t.dtype != p.dtype:
                problems.add(
                    f"predicted: {tuple(p.array.shape)} {p.dtype} differs from truth's {tuple(t.array.shape)} {t.dtype}"
                )
            elif message or len(normal) != 1 or normal[0] >= ndim - 2:
                problems.add(message or f"time_dim={time_dim!r}: must name one leading dim of a {ndim}-dim tensor")
            else:
                _check_spatial_dims(spatial_dims, ndim, problems, "spatial_dims")
                # Time slowest, as the library reads it: a copy only when time_dim is not the first dim.
                axis = normal[0]
                ntime = t.array.shape[axis]
                if ntime < 1:
                    problems.add(f"time_dim={time_dim!r}: the time dim is empty")
                channels = t.channels  # ntime x the other leading dims, time slowest after the move
                with problems.catching("truth and predicted"):  # the copies, before the call's agreement
                    t.buffer = _arrays.contiguous(np.moveaxis(t.array, axis, 0)).reshape(channels, t.rows, t.cols)
                    p.buffer = _arrays.contiguous(np.moveaxis(p.array, axis, 0)).reshape(channels, t.rows, t.cols)
                t.leading = t.leading[:axis] + t.leading[axis + 1 :]
        w, form = _weights_buffer(weights, t, problems)
        ok = not problems
        out = np.empty(t.channels // ntime if ok and ntime else 0, dtype=np.float64)
        signature = t.signature(weights is None, ntime)
        kernel(self._mesh, problems.text(), signature, t.buffer if ok else None, p.buffer if ok else None, w, form,
               ntime, out)
        return _result(out, t)

    def rmse_of_time_mean(self, truth, predicted, weights=None, time_dim=0, spatial_dims=(-2, -1)):
        """The RMSE over space of the time means (over ``time_dim``) of truth and prediction. Collective over
        ``spatial``."""
        return self._time_mean_metric(_core.rmse_of_time_mean, truth, predicted, weights, time_dim, spatial_dims)

    def time_and_global_mean_bias(self, truth, predicted, weights=None, time_dim=0, spatial_dims=(-2, -1)):
        """The weighted spatial mean of (time-mean prediction - time-mean truth). Collective over ``spatial``."""
        return self._time_mean_metric(
            _core.time_and_global_mean_bias, truth, predicted, weights, time_dim, spatial_dims
        )


def _pickled(obj, problems):
    try:
        return pickle.dumps(obj)
    except Exception as error:  # noqa: BLE001 - any pickling failure is the caller's argument problem
        problems.add(f"obj: cannot be pickled ({type(error).__name__}: {error})")
        return None


def _fill(gathered, gather_list):
    """``gathered`` itself, or, when the caller gave ``gather_list``, that list with the gathered values copied
    into its tensors (torch.distributed's convention)."""
    if gathered is None or gather_list is None:
        return gathered
    if len(gather_list) != len(gathered):
        raise ArgumentError(f"gather_list: {len(gather_list)} tensors for {len(gathered)} ranks")
    for target, value in zip(gather_list, gathered):
        if _arrays.is_tensor(target):
            target.copy_(_arrays.like(np.ascontiguousarray(value), target).reshape(target.shape))
        else:
            target[...] = value
    return gather_list


def _as_any_numpy(value, problems):
    """The numpy view of any array or CPU tensor (a device tensor staged to the host), for the gathers (any dtype
    numpy has: a half-precision tensor widened to float32)."""
    if _arrays.is_tensor(value):
        try:
            host = _arrays.on_host(value)
            return (host.float() if _arrays.is_half(host) else host).numpy()
        except Exception as error:  # noqa: BLE001 - agreed like any problem
            problems.add(f"tensor: {error}")
            return None
    try:
        return np.asarray(value)
    except Exception as error:  # noqa: BLE001 - an __array__ that raises, say: agreed like any problem
        problems.add(f"tensor: cannot be read as an array ({type(error).__name__}: {error})")
        return None


def spherical_area_weights(lats, num_lon):
    """ACE's ``spherical_area_weights``: ``cos(lat)`` broadcast to ``(nlat, num_lon)`` and normalised to sum
    1, as the kind and dtype of ``lats`` (a 1-D array of degrees; integer latitudes give float64). Returned as a
    broadcast view, constant along longitude, which the metrics take as per-row weights. No MPI calls."""
    problems = Problems()
    array = _arrays.as_numpy(lats, "lats", problems, _arrays.REDUCIBLE)
    if problems:
        raise _arrays.agreed_error(problems.text())
    if array.ndim != 1:
        raise ArgumentError(f"lats: shape {tuple(array.shape)}; gridshard takes a 1-D array of latitudes")
    if not isinstance(num_lon, numbers.Integral) or num_lon < 1:
        raise ArgumentError(f"num_lon={num_lon!r}: must be a positive int")
    weights = np.empty(array.shape[0], dtype=np.float64)
    _core.cos_lat_weights(np.ascontiguousarray(array, dtype=np.float64), int(num_lon), weights)
    rows = weights.astype(array.dtype if array.dtype.kind == "f" else np.float64)
    if _arrays.is_tensor(lats):
        return _arrays._torch().from_numpy(rows).unsqueeze(-1).expand(rows.shape[0], int(num_lon))
    return np.broadcast_to(rows[:, None], (rows.shape[0], int(num_lon)))
