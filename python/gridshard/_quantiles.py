"""Exact quantiles of shards (``Distributed.quantile``): numpy's ``nanquantile`` of the gathered field, from the
library's distributed selection (metrics/quantile.hpp: count histograms merged across the ranks; the values never
move)."""

import numpy as np
from mpi4py import MPI

from . import _arrays
from . import _gridshard as _core
from ._arrays import Problems
from ._fields import PER_ROW, call_signature, normalise_dims
from ._mpi import mpi_errors

METHODS = ("linear", "inverted_cdf")
# The group whose ranks hold one sample, by whether the lat and the lon dims are reduced.
_GROUPS = {(True, True): "spatial", (True, False): "lat", (False, True): "lon", (False, False): "self"}


def _probabilities(q, problems):
    """``q`` as a 1-D float64 array, and whether it was a scalar."""
    try:
        array = np.asarray(q, dtype=np.float64)
    except (TypeError, ValueError) as error:
        problems.add(f"q={q!r}: not a float or a 1-D sequence of floats ({error})")
        return np.zeros(0), True
    if array.ndim > 1:
        problems.add(f"q: a {array.ndim}-dim array; expected a float or a 1-D sequence of floats")
    elif problem := _core.quantile_probabilities_problem(np.ascontiguousarray(array).reshape(-1)):  # the library's
        problems.add(problem)
    return array.reshape(-1), array.ndim == 0


def _shard_weights(weights, shape, problems):
    """``weights`` (a numpy array or tensor of the shard's ``(h, w)`` or one that broadcasts to it: ``(h, 1)`` per row)
    as float64 broadcast to it, or None with the problem added (finite and >= 0: the library's rule)."""
    view = None
    with problems.catching("weights"):
        array = _arrays.as_numpy(weights, "weights", problems)
        if array is None:
            return None
        try:
            view = np.broadcast_to(np.asarray(array, dtype=np.float64), shape)
        except ValueError:
            problems.add(f"weights: shape {tuple(array.shape)} does not broadcast to the shard {tuple(shape)}")
            return None
        problem = _core.quantile_weights_problem(np.ascontiguousarray(view).reshape(-1))
        if problem:
            problems.add(problem)
            return None
    return view


class QuantilesMixin:
    """``Distributed.quantile`` (a mixin: ``Distributed`` holds the C++ mesh ``_mesh``)."""

    def quantile(self, data, q, dim=(-2, -1), method="linear", weights=None):
        """What ``np.nanquantile(global_data, q, axis=dim, method=method)`` returns on the gathered field, exactly
        (numpy 1.24's bits, its interpolation included), from this rank's shard ``(..., h_local, w_local)`` of a
        numpy array or torch tensor (float32 or float64; NaN skipped, NaN for a sample with no value). ``q``: a float
        or a 1-D sequence in [0, 1] (a leading result dim); ``dim``: any set of dims, None for all. Dims of the shard
        that are kept stay as they are here: a result over the spatial dims is the same on every rank of the spatial
        group, one over ``(-1,)`` on every rank of the lon group, one over leading dims only is this rank's own.
        ``method``: "linear" (float64 results, as numpy's) or "inverted_cdf" (the data's dtype). Of two values that
        compare equal but differ in bits (-0 and +0) the lower order statistic is -0; numpy's is whichever its
        partition leaves there. ``weights`` (finite, >= 0; the shard's ``(h, w)`` or ``(h, 1)``, such as
        ``spherical_area_weights``; method "inverted_cdf" only, as numpy's): each value weighs its grid cell's weight,
        and the result is numpy 2's weighted "inverted_cdf" in exact arithmetic: the smallest value whose cumulative
        weight is at least ``q`` times the sample's weight and above zero (NaN where the sample has no weight; numpy
        rounds its float64 cumulative weights, gridshard compares exactly; docs/python.md, "Exact quantiles"). No
        gradient (the value is an order statistic of the data). Collective over
        ``spatial``: the agreement, then one allreduce of count histograms per pass over the ranks that hold a
        sample (the shard is read twice; docs/python.md, "Exact quantiles")."""
        problems = Problems()
        if _arrays.is_tensor(data) and str(data.dtype) in _arrays.HALF:
            problems.add(f"data: a {data.dtype} tensor; quantiles are of float32 or float64 data")
            array = None
        else:
            array = _arrays.as_numpy(data, "data", problems)
        probabilities, scalar = _probabilities(q, problems)
        if method not in METHODS:
            problems.add(f"method={method!r}: expected one of {', '.join(METHODS)}")
        elif weights is not None and method != "inverted_cdf":
            problems.add(f"weights: only method 'inverted_cdf' takes weights (numpy's rule), got method={method!r}")
        dims, cell_weights = [], None
        if array is not None and array.ndim < 2:
            problems.add(f"data: shape {tuple(array.shape)} has no (lat, lon) dims")
        elif array is not None:
            dims, message = (list(range(array.ndim)), "") if dim is None else normalise_dims(dim, array.ndim)
            if message:
                problems.add(message)
            if weights is not None:
                cell_weights = _shard_weights(weights, array.shape[-2:], problems)
        ok = not problems
        signature = 0
        if ok:  # what every rank of the spatial group must give alike; the local (h, w) are agreed as a split
            signature = call_signature("quantile", array.dtype.str, array.shape[:-2], [d - array.ndim for d in dims],
                                       method, probabilities.tobytes(), weights is not None)
        _, nlat, nlon = self._mesh.agree_shards(problems.text(), signature, array.shape[-2] if ok else 0,
                                                array.shape[-1] if ok else 0, PER_ROW, None)
        ndim = array.ndim  # past the agreement, every rank's arguments are good
        kept = [d for d in range(ndim) if d not in dims]
        group = _GROUPS[(ndim - 2 in dims, ndim - 1 in dims)]
        kept_shape = tuple(array.shape[d] for d in kept)
        moved = np.moveaxis(array, dims, list(range(len(kept), ndim)))
        values = np.ascontiguousarray(moved).reshape(-1)
        samples = int(np.prod(kept_shape, dtype=np.int64))
        value_weights = None
        if cell_weights is not None:  # each value's cell's weight, in the values' order
            value_weights = np.moveaxis(np.broadcast_to(cell_weights, array.shape), dims, list(range(len(kept), ndim)))
            value_weights = np.ascontiguousarray(value_weights).reshape(-1)
        out, counts = self._mesh.sample_quantiles(group, values, samples, probabilities.tolist(), method,
                                                  value_weights)
        result = np.asarray(out, dtype=np.float64).reshape((probabilities.size,) + kept_shape)
        if method == "inverted_cdf" or self._numpy_keeps_float32(array, dim, dims, counts, (nlat, nlon)):
            result = result.astype(array.dtype)  # an order statistic: exact in the data's dtype
        if scalar:
            result = result.reshape(result.shape[1:])
        if not _arrays.is_tensor(data) and result.ndim == 0:
            return result[()]  # a numpy scalar, as numpy's
        return _arrays.like(result.copy(order="C"), data)  # (ascontiguousarray would make a 0-d result 1-d)

    def _numpy_keeps_float32(self, array, dim, dims, counts, grid):
        """Whether numpy 1.24 gives this "linear" call's result in float32: for float32 data whose first sample (the
        one at index 0 of every kept dim) has no value. ``nanquantile`` returns that sample's NaN in the data's
        dtype, and over several samples ``apply_along_axis`` makes the whole result the first sample's dtype.
        Collective over ``spatial`` for float32 data reduced over some dims (one allreduce of a flag)."""
        if array.dtype != np.float32:
            return False
        if dim is None:  # one sample, counted alike on every rank
            return counts[0] == 0
        ndim = array.ndim
        starts = [s.start or 0 for s in self.get_local_slices(grid)]
        holds_first = all(starts[d - (ndim - 2)] == 0 for d in (ndim - 2, ndim - 1) if d not in dims)
        with mpi_errors():
            return self._spatial_comm.allreduce(bool(holds_first and len(counts) > 0 and counts[0] == 0),
                                                op=MPI.LOR)
