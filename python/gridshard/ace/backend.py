"""gridshard as a backend of ACE's ``fme.core.distributed.Distributed``.

``GridshardBackend`` has the members of ACE's ``DistributedBackend`` (the interface its ``NonDistributed``,
``TorchDistributed`` and ``ModelTorchDistributed`` implement) and delegates each to ``gridshard.Distributed``
over MPI; ``gridshard.ace.use_in_ace()`` makes ACE's ``Distributed`` build it. Importing this module imports neither
torch nor fme.
"""

from ..distributed import ArgumentError, Distributed, _mesh_sizes_from_env


class _ModuleWrapper:
    """What ACE's ``DummyWrapper`` is: ``.module`` and a forward that calls it."""

    def __init__(self, module):
        self.module = module

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class GridshardBackend:
    """ACE's backend interface on a ``gridshard.Distributed`` (``data x h x w`` over ``comm``)."""

    def __init__(self, comm=None, spatial_parallelism=(1, 1), split="div_up", abort_on_exception=None):
        self.distributed = Distributed(
            comm, spatial_parallelism=spatial_parallelism, split=split, abort_on_exception=abort_on_exception
        )

    @classmethod
    def from_env(cls):
        """The mesh of ``FME_DISTRIBUTED_H`` x ``FME_DISTRIBUTED_W`` (default 1 x 1) over MPI.COMM_WORLD. Sizes
        that are not integers raise ValueError on every rank (compared between the ranks first)."""
        sizes, bad = _mesh_sizes_from_env(default="1")
        try:
            return cls(spatial_parallelism=sizes)
        except ArgumentError:
            if bad:
                raise ValueError(f"the gridshard backend needs {bad}") from None
            raise

    @classmethod
    def is_available(cls):
        return True

    # Who is who.
    @property
    def rank(self):
        return self.distributed.rank

    @property
    def data_parallel_rank(self):
        return self.distributed.data_parallel_rank

    @property
    def total_ranks(self):
        return self.distributed.world_size

    @property
    def total_data_parallel_ranks(self):
        return self.distributed.total_data_parallel_ranks

    def local_batch_size(self, batch_size):
        return self.distributed.local_batch_size(batch_size)

    def get_local_slices(self, tensor_shape, data_parallel_dim=None):
        return self.distributed.get_local_slices(tensor_shape, data_parallel_dim=data_parallel_dim)

    # Collectives: the same names, arguments and result placement.
    def reduce_mean(self, tensor):
        return self.distributed.reduce_mean(tensor)

    def reduce_sum(self, tensor):
        return self.distributed.reduce_sum(tensor)

    def reduce_min(self, tensor):
        return self.distributed.reduce_min(tensor)

    def reduce_max(self, tensor):
        return self.distributed.reduce_max(tensor)

    def gather(self, tensor, gather_list=None):
        return self.distributed.gather(tensor, gather_list)

    def gather_irregular(self, tensor):
        return self.distributed.gather_irregular(tensor)

    def gather_object(self, obj):
        return self.distributed.gather_object(obj)

    def scatter_object(self, obj):
        return self.distributed.scatter_object(obj)

    def data_parallel_gather(self, tensor, gather_list=None):
        return self.distributed.data_parallel_gather(tensor, gather_list)

    def data_parallel_scatter(self, tensor, scatter_list=None):
        return self.distributed.data_parallel_scatter(tensor, scatter_list)

    def data_parallel_gather_object(self, obj):
        return self.distributed.data_parallel_gather_object(obj)

    def data_parallel_broadcast_object(self, obj):
        return self.distributed.data_parallel_broadcast_object(obj)

    def spatial_reduce_sum(self, tensor):
        return self.distributed.spatial_reduce_sum(tensor)

    def broadcast_spatial(self, tensor):
        return self.distributed.broadcast_spatial(tensor)

    def barrier(self):
        self.distributed.barrier()

    # Metrics ACE's backends implement.
    def weighted_mean(self, data, weights, dim, keepdim=False):
        return self.distributed.weighted_mean(data, weights, dim=dim, keepdim=keepdim)

    def zonal_mean(self, data):
        return self.distributed.zonal_mean(data)

    # ACE's Distributed members that use_in_ace() routes here.
    def gradient_magnitude_percent_diff(self, truth, predicted, weights, dim, img_shape):
        return self.distributed.gradient_magnitude_percent_diff(truth, predicted, weights, dim=dim, img_shape=img_shape)

    def gather_spatial_tensor(self, tensor, img_shape):
        return self.distributed.gather_spatial_tensor(tensor, img_shape)

    def gather_global(self, tensor, global_shape, data_parallel_dim=0):
        return self.distributed.gather_global(tensor, global_shape, data_parallel_dim)

    # Models: data parallelism through torch.distributed (gloo), started over MPI's ranks when needed.
    def wrap_module(self, module):
        """``module`` as ACE's model backend wraps it: as is (with ``.module``) when nothing trains or there is
        one rank; else DistributedDataParallel over this rank's data group (torch.distributed, started from the
        MPI world by gridshard.torch_distributed when it is not yet), with each gradient summed over the
        spatial group (by gridshard, over MPI) when the model is split spatially. Collective over the world."""
        import torch

        from .. import torch_distributed

        if not any(p.requires_grad for p in module.parameters()) or self.total_ranks == 1:
            return _ModuleWrapper(module)
        torch_distributed.init_process_group()
        if self.distributed.has_spatial_parallelism:
            for parameter in module.parameters():
                if parameter.requires_grad:
                    parameter.register_hook(self.distributed.spatial_reduce_sum)
        return torch.nn.parallel.DistributedDataParallel(
            module, process_group=self._torch_data_group(), broadcast_buffers=False
        )

    def _torch_data_group(self):
        """This rank's data group as a torch.distributed group (every group is made on every rank, in order,
        as torch requires). Collective over the world, once."""
        if getattr(self, "_data_group", None) is None:
            import torch.distributed

            d, h, w = self.distributed.mesh_shape
            mine = self.distributed.rank % (h * w)
            for s in range(h * w):
                group = torch.distributed.new_group([k * h * w + s for k in range(d)])
                if s == mine:
                    self._data_group = group
        return self._data_group

    def get_sht(self, nlat, nlon, lmax=None, mmax=None, grid="legendre-gauss"):
        self._require_no_spatial_parallelism("get_sht")
        import torch_harmonics

        return torch_harmonics.RealSHT(nlat, nlon, lmax=lmax, mmax=mmax, grid=grid).float()

    def get_isht(self, nlat, nlon, lmax=None, mmax=None, grid="legendre-gauss"):
        self._require_no_spatial_parallelism("get_isht")
        import torch_harmonics

        return torch_harmonics.InverseRealSHT(nlat, nlon, lmax=lmax, mmax=mmax, grid=grid).float()

    def get_disco_conv_s2(self, *args, **kwargs):
        self._require_no_spatial_parallelism("get_disco_conv_s2")
        from fme.core.disco import DiscreteContinuousConvS2

        return DiscreteContinuousConvS2(*args, **kwargs).float()

    def _require_no_spatial_parallelism(self, name):
        if self.distributed.has_spatial_parallelism:
            raise NotImplementedError(f"{name}: gridshard's ACE backend has no spatially split transforms")

    # Life cycle: MPI stays up until the interpreter exits (mpi4py finalises it).
    def shutdown(self):
        pass

    def abort(self):
        """ACE's ``abort`` (fme 2026.10): local, not collective, and safe to call from a thread other than the main
        one while that thread is blocked in a collective (ACE's termination listener calls it so). MPI cannot release
        a rank's communicators without its peers, so this ends the job: ``MPI_Abort`` on the world, which the MPI
        library allows from any thread when it was started with ``MPI_THREAD_MULTIPLE`` (mpi4py's default) and from
        the main thread always; from another thread under a lower thread level, where calling MPI is not allowed,
        the process ends with exit status 1 and no MPI call, and the launcher ends the other ranks (mpirun and
        mpiexec do; srun with ``--kill-on-bad-exit``). Either way no rank is left waiting in a collective."""
        self.distributed.abort()
