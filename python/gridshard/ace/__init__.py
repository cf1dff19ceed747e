"""gridshard in ACE (``fme``): ``use_in_ace()`` makes ACE's ``fme.core.distributed.Distributed`` build
``GridshardBackend`` (``backend``), without editing ACE's files: afterwards every ``Distributed()`` ACE makes (unless
forced non-distributed) has this backend, on the mesh that ``FME_DISTRIBUTED_H`` and ``FME_DISTRIBUTED_W`` name, and
ACE's own ``gradient_magnitude_percent_diff``, ``gather_spatial_tensor`` and ``gather_global`` run gridshard's (halo
exchange, uneven all-gather) instead of gathering by zero-padded all-reduces; and ACE's inference aggregator is
gridshard's drop-in (``aggregator``). Importing this package imports neither torch nor fme.
"""

import os

from .backend import GridshardBackend

__all__ = ["GridshardBackend", "use_in_ace"]


def use_in_ace(aggregator=True):
    """Makes ACE's ``Distributed`` (fme.core.distributed) build ``GridshardBackend.from_env()`` whenever it is
    not forced non-distributed, and run gridshard's gradient metric and gathers. ``FME_DISTRIBUTED_BACKEND``
    may then be ``gridshard`` (ACE itself would reject the name). With ``aggregator``, ACE's
    ``InferenceEvaluatorAggregatorConfig.build`` returns gridshard's inference aggregator
    (gridshard.ace.aggregator; ACE's own stays reachable as ``build_ace``). Call it before the first
    ``Distributed.get_instance()``. Returns ACE's Distributed class."""
    from fme.core.distributed import distributed as ace

    if aggregator:
        _use_gridshard_aggregator()

    cls = ace.Distributed
    if getattr(cls, "_gridshard_backend", False):
        return cls
    original_init = cls.__init__
    original_get_instance = cls.get_instance.__func__

    def __init__(self, force_non_distributed=False, spatial_parallelism=None, verbose=False):
        original_init(self, force_non_distributed=True)
        self._force_non_distributed = force_non_distributed
        if not force_non_distributed:
            if spatial_parallelism is None:
                self._distributed = GridshardBackend.from_env()
            else:
                self._distributed = GridshardBackend(spatial_parallelism=spatial_parallelism)

    def get_instance(klass):
        if ace.singleton is None and os.environ.get("FME_DISTRIBUTED_BACKEND") == "gridshard":
            ace.singleton = klass()
        return original_get_instance(klass)

    def routed(name):
        original = getattr(cls, name)

        def method(self, *args, **kwargs):
            if isinstance(self._distributed, GridshardBackend):
                return getattr(self._distributed, name)(*args, **kwargs)
            return original(self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = original.__doc__
        return method

    cls.__init__ = __init__
    cls.get_instance = classmethod(get_instance)
    for name in ("gradient_magnitude_percent_diff", "gather_spatial_tensor", "gather_global"):
        setattr(cls, name, routed(name))
    try:
        from fme.core.distributed.base import DistributedBackend

        DistributedBackend.register(GridshardBackend)
    except (ImportError, AttributeError):
        pass
    cls._gridshard_backend = True
    return cls


def _use_gridshard_aggregator():
    """ACE's InferenceEvaluatorAggregatorConfig.build returns gridshard.ace.aggregator's aggregator; ACE's own
    build stays as ``build_ace``."""
    from fme.ace.aggregator.inference.main import InferenceEvaluatorAggregatorConfig as config

    if getattr(config, "build_ace", None) is not None:
        return
    from . import aggregator

    config.build_ace = config.build
    config.build = aggregator.build
