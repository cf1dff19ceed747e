"""Shard handling of gridshard.Distributed: the slices each rank holds, the reductions over the data and spatial
groups, the gathers and scatters of arrays and objects. Every check a rank makes alone is agreed over the call's
group before the collective, so the ranks raise together."""

import math
import pickle

import numpy as np

from . import _arrays, _autograd, _device
from . import _gridshard as _core
from ._arrays import Problems
from ._fields import call_signature
from ._mpi import mpi_errors

ArgumentError = _core.ArgumentError


class ShardsMixin:
    """The members of ``gridshard.Distributed`` that cut, reduce, gather and scatter its ranks' arrays (a mixin:
    ``Distributed`` holds the C++ mesh ``_mesh``, its ``_shape`` and the mpi4py communicators ``_comm``,
    ``_data_comm`` and ``_spatial_comm`` these use)."""

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

    def _agree_arrays(self, problems, group, array, path=()):
        """Raises every rank's problem, or a difference of dtype or shape between the ranks' arrays (or of ``path``:
        how a device path reduces them), on every rank of ``group`` (one allreduce)."""
        dtype = None if array is None else getattr(array.dtype, "str", str(array.dtype))
        signature = 0 if array is None else call_signature(*path, dtype, tuple(array.shape))  # and the call's phase
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
                f"tensor: the ranks' arrays differ in dtype or shape over the {group} group, or in how they are "
                f"reduced (the device path or the host, an exact sum or not) (here {array.dtype} "
                f"{tuple(array.shape)}{', on the device path' if path else ''})"
            ) from None

    def _reduce_in_place(self, op, tensor, name=None):
        if op in ("sum", "exact_sum") and self._device.takes_data_reduction(tensor):
            return _device.data_sum(self, tensor, op == "exact_sum")
        problems = Problems()
        array = None
        if not (isinstance(tensor, np.ndarray) or _arrays.is_tensor(tensor)):
            problems.add(f"tensor: a {type(tensor).__name__}; reduce_{name or op} writes into its argument, which "
                         "must be a numpy array or a torch tensor")
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

    def _data_sum(self, exact):
        return "exact_sum" if (self._exact_data_sums if exact is None else bool(exact)) else "sum"

    def reduce_sum(self, tensor, exact=None):
        """Elementwise sum over the data group, written into ``tensor``, which is returned. ``exact`` (default: the
        mesh's ``summation`` is ``"reproducible"``): each element is the exact sum of the ranks' values rounded once,
        the same bits whatever order MPI's reduction takes (floating dtypes; a half-precision tensor raises: its sum
        would round to 16 bits in place);
        ``exact=False`` is MPI's own sum. Collective over ``data``; every rank holds the result."""
        return self._reduce_in_place(self._data_sum(exact), tensor, "sum")

    def reduce_mean(self, tensor, exact=None):
        """The mean over the data group, as ACE: ``tensor`` is summed in place (it holds the sum afterwards; exact
        as ``reduce_sum``'s) and a new ``tensor / total_data_parallel_ranks`` is returned. Collective over
        ``data``."""
        return self._reduce_in_place(self._data_sum(exact), tensor, "mean") / self.total_data_parallel_ranks

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
            _arrays.like(receive[offsets[r]:offsets[r + 1]].view(dtype).reshape(shapes[r]), tensor)
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
                problems.add(f"tensor: shape {tuple(array.shape)}, but this rank's slice of {global_shape} is "
                             f"{expected}")
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
                signature = call_signature(array.dtype.str, global_shape, dp)
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
            problems.add(f"tensor: shape {tuple(array.shape)} is neither the field {img} nor this rank's shard "
                         f"{shard_shape}")
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
        signature = call_signature(array.dtype.str, leading)
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
