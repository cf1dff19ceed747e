"""gridshard: exact metrics of global latitude-longitude fields on shards over MPI.

``gridshard.Distributed`` follows ACE's ``Distributed`` API (``fme.core.distributed``) on an mpi4py
communicator, for numpy arrays and CPU torch tensors; docs/python.md has the table of names. Importing
gridshard needs numpy and mpi4py, never torch.
"""

from mpi4py import MPI as _MPI  # noqa: F401  (initialises MPI before the compiled module's first call)

from ._gridshard import ArgumentError, MpiError, SystemFailure, sample_index_series
from .aggregator import Aggregator, register_score, registered_scores
from .distributed import Distributed, spherical_area_weights

__all__ = ["Aggregator", "ArgumentError", "Distributed", "MpiError", "SystemFailure", "register_score",
           "registered_scores", "sample_index_series", "spherical_area_weights"]
__version__ = "0.1.0"
