"""``gridshard.Distributed``: ACE's ``Distributed`` API over an mpi4py communicator, exact on shards.

Every rank holds the shards ``(..., h_local, w_local)`` of its own box of a ``data x lat x lon`` mesh
(world rank ``d*h*w + i*w + j``). The metrics come from the C++ library, bit-identical for every mesh
shape and rank count; the gradient metrics exchange one-cell halos instead of gathering fields. Each
method says which group it talks to and which ranks hold its result, as ACE's do.

The class is the mesh and who is who; its members come in two parts: ``_shards.ShardsMixin`` (slices, reductions
over the groups, gathers and scatters) and ``_metrics.MetricsMixin`` (the metrics), whose arguments ``_fields`` reads
and whose gradients ``_gradients`` gives.
"""

import numbers
import os

import numpy as np

from . import _abort, _arrays, _device
from . import _gridshard as _core
from ._arrays import Problems
from ._metrics import MetricsMixin
from ._mpi import mpi_errors
from ._quantiles import QuantilesMixin
from ._shards import ShardsMixin

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


def _groups(mesh):
    """The mpi4py communicators the Python side talks over itself (the gathers of arrays and objects): the C++ mesh's
    own world (a duplicate of the caller's), spatial group (the ranks of this rank's data index ``d``, in
    ``i * w + j`` order) and data group (the ranks of its ``(i, j)``, in ``d`` order), one source of truth. The mesh
    keeps and frees them; the ``Distributed`` holds the mesh. No MPI calls."""
    from mpi4py import MPI

    return tuple(MPI.Intracomm.f2py(handle) for handle in mesh.group_handles)


class Distributed(ShardsMixin, MetricsMixin, QuantilesMixin):
    """ACE's ``Distributed`` on a ``data x h x w`` mesh of MPI ranks.

    ``comm`` is an mpi4py communicator (default ``MPI.COMM_WORLD``), of size ``data * h * w``;
    ``spatial_parallelism=(h, w)`` splits latitude over ``h`` ranks and longitude over ``w`` (default
    ``(1, 1)``: data-parallel only); ``split`` is ``"div_up"`` (torch-harmonics 0.8's
    ``compute_split_shapes``, as ACE) or ``"balanced"``; ``summation`` is ``"reproducible"`` (exact sums,
    the same bits on every mesh) or ``"fast"``. Collective over ``comm``.

    ``device_path``: which torch tensors are reduced on their own device by torch operations over
    ``torch.distributed`` (``_device``; docs/python.md, "The device path"): ``"auto"`` (tensors not on the CPU),
    ``"always"`` (every tensor, CPU ones included) or ``"never"``; None (the default) follows
    ``GRIDSHARD_DEVICE_PATH``, else ``"auto"``. numpy arrays always take the library.

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
                 abort_on_exception=None, device_path=None):
        from mpi4py import MPI

        if comm is None:
            comm = MPI.COMM_WORLD
        # The arguments are compared between the ranks first (one allgather), so a rank that gives others
        # raises with the rest instead of leaving them in the mesh's collectives.
        mode, mode_problem = _device.chosen_mode(device_path)
        given = (spatial_parallelism, split, summation, mode, mode_problem)
        try:
            text = repr(given)
        except Exception as error:  # noqa: BLE001 - an argument whose repr raises differs from any that prints
            text = f"<arguments whose repr raises {type(error).__name__}: {error}>"
        with mpi_errors():
            everyone = comm.allgather(text)
        if len(set(everyone)) > 1:
            raise ArgumentError(f"Distributed(spatial_parallelism, split, summation, device_path): the ranks give "
                                f"different arguments, {everyone[0]} on rank 0 and {everyone[comm.Get_rank()]} here")
        if mode_problem:
            raise ArgumentError(mode_problem)
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
            self._comm, self._spatial_comm, self._data_comm = _groups(self._mesh)
        self._shape = shape
        self._exact_data_sums = summation == "reproducible"
        self._device = _device.DevicePath(mode if summation == "reproducible" else "never", comm, shape)
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
