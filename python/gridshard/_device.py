"""The device path: gridshard's weighted reductions as torch operations on the tensors' own device, merged over the
spatial group by ``torch.distributed`` (NCCL, gloo), the library's bits with no copy to the host.

A call reads its arguments' metadata on each rank (shapes, dtypes, strides: never a value) and agrees it with the
library's own agreement (``agree_shards``: one MPI allreduce of int64 on the host, which waits for nothing on the
device), forms the library's terms (metrics/terms.hpp) as exact sums (``_exact_torch``), merges them with one
``all_reduce(SUM)`` of int64 over the spatial group, and finalizes them with the library's formulas
(src/metrics/terms.cpp) in double-double. What cannot be known without reading values on the host, a weight that is
negative or not finite, or a total weight that is not positive, gives NaN results on every rank instead of the
library's ArgumentError (docs/python.md, "The device path").

``Distributed(..., device_path=...)`` chooses: ``"never"``, the library for everything; ``"always"``, this path for
every torch tensor it has a path for; ``"auto"`` (the default), this path for tensors not on the CPU.
``GRIDSHARD_DEVICE_PATH`` gives the default. A mesh split in space needs a torch process group whose ranks are the
communicator's: one started already (ACE's), or, under ``"always"``, one this module starts over gloo
(``gridshard.torch_distributed``).
"""

import os
import sys
import warnings

import numpy as np

from . import _arrays
from . import _exact_torch as exact
from ._arrays import Problems, agreed_error
from ._fields import EITHER, PER_POINT, PER_ROW, call_signature, check_spatial_dims

MODES = ("auto", "always", "never")
_FLOATING = ("torch.float32", "torch.float64", "torch.float16", "torch.bfloat16")
_WIDENED = ("torch.float16", "torch.bfloat16")

# The sums each statistic reads, after the total weight (the library's slot 0), one set per channel.
_TERMS = {
    "sum": ("truth",),
    "mean": ("truth",),
    "nanmean": ("weight", "truth"),
    "std": ("truth", "square"),
    "bias": ("truth", "prediction"),
    "rmse": ("difference_square",),
}


def _torch():
    return sys.modules.get("torch")


def chosen_mode(device_path):
    """``device_path``, or ``GRIDSHARD_DEVICE_PATH`` when it is None, or ``"auto"``; and the problem with it."""
    mode = device_path if device_path is not None else os.environ.get("GRIDSHARD_DEVICE_PATH") or "auto"
    if mode not in MODES:
        source = "device_path" if device_path is not None else "GRIDSHARD_DEVICE_PATH"
        return "never", f"{source}={mode!r}: expected one of {', '.join(MODES)}"
    return mode, ""


class DevicePath:
    """Which calls of one ``Distributed`` take the device path, and the torch process groups they merge over: the
    spatial group, the lon group and the data group (None where the mesh is not split that way: the sums are then the
    rank's own). Collective over ``comm`` when the mesh has more than one rank and the mode is not ``"never"``: one
    allgather, and the creation of every spatial, lon and data group of the mesh (torch.distributed's ``new_group``,
    which every rank makes alike).

    ``available``: the spatial calls have a path (always on a mesh not split in space); ``data_reducible``: the data
    group's reductions have one (always with one data rank). Under ``"auto"`` without a started process group, a
    mesh split in space stages every call through the host and a data-parallel one its data reductions only."""

    def __init__(self, mode, comm, shape):
        self.mode = mode
        self.group = self.lon_group = self.data_group = None
        self.lon_size = 1
        data, h, w = shape
        self.available = self.data_reducible = mode != "never"
        if not self.available or data * h * w == 1:
            return
        problem = self._problem_with_torch_distributed(mode, comm)
        if problem is None:  # "auto" without a process group: the host where a merge is needed
            self.available = h * w == 1
            self.data_reducible = False
            return
        if problem:
            if mode == "always":
                from ._gridshard import ArgumentError

                raise ArgumentError(problem)
            self.available = self.data_reducible = False
            return
        import torch.distributed as td

        rank = comm.Get_rank()
        for d in range(data):  # every rank makes every group, in one order (torch.distributed's rule)
            if h * w > 1:
                group = td.new_group(ranks=list(range(d * h * w, (d + 1) * h * w)))
                if rank // (h * w) == d:
                    self.group = group
            for i in range(h if w > 1 else 0):
                first = d * h * w + i * w
                group = td.new_group(ranks=list(range(first, first + w)))
                if first <= rank < first + w:
                    self.lon_group, self.lon_size = group, w
        for s in range(h * w if data > 1 else 0):
            group = td.new_group(ranks=list(range(s, data * h * w, h * w)))
            if rank % (h * w) == s:
                self.data_group = group

    @staticmethod
    def _problem_with_torch_distributed(mode, comm):
        """The empty string when torch.distributed is started over ``comm``'s ranks in its order (started here over
        gloo under ``"always"`` where no rank has started it); None under ``"auto"`` where it is not started; else
        the problem. Collective over ``comm``: one allgather."""
        torch = _torch()
        started, aligned = False, False
        if torch is not None:
            import torch.distributed as td

            started = td.is_available() and td.is_initialized()
            aligned = started and td.get_world_size() == comm.Get_size() and td.get_rank() == comm.Get_rank()
        from ._mpi import mpi_errors

        with mpi_errors():
            everyone = comm.allgather((started, aligned))
        if all(s for s, _ in everyone):
            if all(a for _, a in everyone):
                return ""
            return ("device_path: torch.distributed's ranks are not this communicator's; the device path needs a "
                    "process group over the same ranks in the same order")
        if mode == "auto" or torch is None:
            return None  # tensors are staged through the host, as without a device path
        if any(s for s, _ in everyone):
            return "device_path: torch.distributed is started on some ranks and not on others"
        from .torch_distributed import init_process_group

        init_process_group("gloo", comm=comm)
        return ""

    def takes(self, *values):
        """Whether a call on ``values`` (its tensor arguments; None for absent ones) takes the device path."""
        return self.available and self._chosen(values)

    def takes_data_reduction(self, tensor):
        """Whether a reduction of ``tensor`` over the data group takes the device path."""
        return self.data_reducible and self._chosen((tensor,))

    def _chosen(self, values):
        torch = _torch()
        given = [v for v in values if v is not None]
        if torch is None or not given or not all(isinstance(v, torch.Tensor) for v in given):
            return False
        return self.mode == "always" or any(v.device.type != "cpu" for v in given)

    def all_reduce(self, sums, group="spatial"):
        """The int64 sums summed over the spatial (or ``"lon"``) group, in place. Collective over that group
        (torch.distributed)."""
        chosen = self.group if group == "spatial" else self.lon_group
        if chosen is not None:
            import torch.distributed as td

            td.all_reduce(sums, group=chosen)

    def gathered_lon_sum(self, values):
        """``values`` summed over the lon group in float64 in lon-rank order and rounded to their dtype: the same
        bits on every rank of it. Collective over ``lon``: one all_gather (torch.distributed)."""
        if self.lon_group is None:
            return values
        import torch.distributed as td

        torch = _torch()
        wide = values.to(torch.float64).contiguous()
        parts = [torch.empty_like(wide) for _ in range(self.lon_size)]
        td.all_gather(parts, wide, group=self.lon_group)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total.to(values.dtype)


# Elements per all_reduce of the data group's exact sum: bounds the int64 rows (18 or 76 per element) and the
# rounding's work tensors.
_DATA_SUM_CHUNK = 1 << 14


def data_sum(dist, tensor, exact_sum):
    """``reduce_sum``'s device path: ``tensor`` summed elementwise over the data group, written into it and returned.
    ``exact_sum``: each element the exact sum of the ranks' values rounded once (``element_rows``), the library's
    ``reduce_sum_exact`` bits; else torch.distributed's own sum. Integers sum as they are; half precision raises, as
    on the library path (the result would round to 16 bits in place). Collective over ``data``: the agreement (MPI,
    metadata) and one all_reduce per ``_DATA_SUM_CHUNK`` elements (torch.distributed)."""
    torch = _torch()
    problems = Problems()
    kind = str(tensor.dtype)[len("torch."):]
    if tensor.device.type == "meta":
        problems.add(f"tensor: a tensor on the {tensor.device} device has no values to reduce")
    elif str(tensor.dtype) in _arrays.HALF:
        problems.add(_arrays.half_written_problem("tensor", tensor.dtype))
    elif kind not in (d.name for d in _arrays.REDUCIBLE):
        problems.add(_arrays.dtype_problem("tensor", kind, _arrays.REDUCIBLE))
    dist._agree_arrays(problems, "data", None if problems else tensor, ("device", bool(exact_sum)))
    group = dist._device.data_group
    if group is None:  # one data rank: the sum is the rank's own values
        return tensor
    import torch.distributed as td

    work = tensor.detach()
    if not exact_sum or not work.is_floating_point():
        merged = work.contiguous()
        td.all_reduce(merged, group=group)
    else:
        lowest, limbs, precision, smallest = exact.ELEMENT_LAYOUTS[kind]
        flat = work.reshape(-1).to(torch.float64)
        merged = torch.empty_like(flat)
        for start in range(0, flat.shape[0], _DATA_SUM_CHUNK):
            rows = exact.element_rows(flat[start:start + _DATA_SUM_CHUNK], lowest, limbs)
            td.all_reduce(rows, group=group)
            merged[start:start + _DATA_SUM_CHUNK] = exact.round_elements(rows, lowest, precision, smallest)
        merged = merged.reshape(work.shape)
    if merged is not work:
        work.copy_(merged)  # a float32 result held in float64 converts exactly
    return tensor


class _Shape:
    """What the gradient rules and result shaping read of a field: its leading dims."""

    __slots__ = ("leading",)

    def __init__(self, leading):
        self.leading = leading


def _weights_on_device(weights, data, problems):
    """The weights as a float64 tensor ``(h, w)`` on ``data``'s device, and their form (per row when constant along
    longitude by construction: None, ``(h, 1)``, a broadcast view), as ``_fields.weights_buffer`` decides it."""
    torch = _torch()
    rows, cols = data.shape[-2], data.shape[-1]
    device = data.device
    if weights is None:
        return torch.ones((rows, cols), dtype=torch.float64, device=device), PER_ROW
    given = None
    with problems.catching("weights"):  # whatever reading them raises: agreed in the call's first allreduce
        given = weights.detach() if isinstance(weights, torch.Tensor) else _host_weights(weights, problems)
    if given is None:
        return None, PER_ROW
    while given.ndim > 2 and given.shape[0] == 1:
        given = given[0]
    try:
        view = torch.broadcast_to(given, (rows, cols))
    except RuntimeError:
        problems.add(f"weights: shape {tuple(given.shape)} does not broadcast to the shard ({rows}, {cols})")
        return None, PER_ROW
    if cols == 0:
        form = EITHER
    elif cols == 1:
        form = PER_ROW if given.ndim >= 1 and given.shape[-1] == 1 and given.stride(-1) == 0 else EITHER
    else:
        form = PER_ROW if view.stride(1) == 0 else PER_POINT
    return view.to(device=device, dtype=torch.float64), form


def _host_weights(weights, problems):
    """Weights that are not a tensor, read as the library path reads them (``_arrays.as_numpy``), as a CPU tensor
    with their strides (a broadcast view keeps its zero stride, which says the weights are per row); None after
    recording why they cannot be read."""
    torch = _torch()
    array = _arrays.as_numpy(weights, "weights", problems)
    if array is None:
        return None
    with warnings.catch_warnings():  # a broadcast view is read-only; the weights are only read
        warnings.simplefilter("ignore", UserWarning)
        try:
            return torch.from_numpy(array)
        except ValueError:  # negative strides: one copy
            return torch.from_numpy(np.ascontiguousarray(array))


def weighted_statistics(dist, statistic, data, weights, predicted=None, dim=(-2, -1)):
    """``statistic`` (a key of ``_TERMS``) of ``data`` over the spatial dims on the device, as
    ``MetricsMixin._weighted_statistics`` returns it: the value (the field's dtype, leading shape), the float64
    weight of the points counted, the means (std; the field's dtype) and the field's leading shape. Collective over
    ``spatial``: the agreement (MPI, int64 metadata) and one all_reduce of int64 (torch.distributed)."""
    torch = _torch()
    problems = Problems()
    paired = predicted is not None
    _check_field(data, problems)
    if not problems:
        check_spatial_dims(dim, data.ndim, problems)
    if paired and not problems and (predicted.shape != data.shape or predicted.dtype != data.dtype):
        problems.add(f"predicted: {tuple(predicted.shape)} {predicted.dtype} differs from truth's "
                     f"{tuple(data.shape)} {data.dtype}")
    if paired and not problems and predicted.device != data.device:
        problems.add(f"predicted: on {predicted.device}, the truth on {data.device}")
    a, form = (None, PER_ROW) if problems else _weights_on_device(weights, data, problems)
    ok = not problems
    leading = tuple(data.shape[:-2]) if ok else ()
    widened = str(data.dtype) if str(data.dtype) in _WIDENED else ""
    signature = call_signature("device", str(data.dtype), widened, leading, weights is None, statistic) if ok else 0
    form, _ = _agree(dist, problems, signature, data, form)
    x, result_dtype = _as_channels(data)
    p = predicted.detach().reshape(x.shape).to(torch.float64) if paired else None
    sums = exact.zeros(2 + x.shape[0] * len(_TERMS[statistic]), x.device)
    failure = _forming(sums, lambda: _local_sums(sums, statistic, x, p, a, form == PER_POINT,
                                                 str(data.dtype) == "torch.float64"))
    dist._device.all_reduce(sums)
    _raise_failure(dist, failure)
    value, weight, mean = _finalize(statistic, sums[:-1], sums[-1, 0] + sums[-1, 1], x.shape[0])
    shape = leading
    return (value.to(result_dtype).reshape(shape), weight.reshape(shape),
            None if mean is None else mean.to(result_dtype).reshape(shape), _Shape(leading))


def _check_field(data, problems, name="data"):
    """This rank's problems with a field argument, from its metadata."""
    if data.ndim < 2:
        problems.add(f"{name}: shape {tuple(data.shape)} has no (lat, lon) dims")
    elif data.device.type == "meta":
        problems.add(f"{name}: a tensor on the {data.device} device has no values to reduce")
    elif str(data.dtype) not in _FLOATING:
        problems.add(f"{name}: dtype {data.dtype} is not one of float32, float64")


def _agree(dist, problems, signature, data, form=PER_ROW, img_shape=None):
    """The library's agreement of a call (``agree_shards``): ``problems`` raised on every rank, shards that form no
    grid (or not the declared ``img_shape``) and signatures that differ likewise; the weights' form every rank takes
    and the grid's ``(nlat, nlon)``. Collective over ``spatial``: one MPI allreduce of int64 metadata on the host (it
    waits for nothing queued on the device)."""
    ok = not problems
    form, nlat, nlon = dist._mesh.agree_shards(problems.text(), signature, data.shape[-2] if ok else 0,
                                               data.shape[-1] if ok else 0, form, img_shape if ok else None)
    if problems:  # not reached: the agreement raised on every rank
        raise agreed_error(problems.text())
    return form, (nlat, nlon)


def _as_channels(data):
    """The field as float64 ``(channels, h, w)`` on its device (exact; half precision widened) and the dtype its
    results take (float64 for float64, else float32, as the library's)."""
    torch = _torch()
    x = data.detach()
    result_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return x.reshape((-1,) + tuple(x.shape[-2:])).to(torch.float64), result_dtype


def zonal_means(dist, data):
    """The NaN-aware mean over longitude of each row, ``(..., h_local)`` in the field's result dtype, and the count of
    the valid points of each (float64), as the library's zonal mean: per (channel, row) the exact sum of the values
    that are not NaN over the count, in double-double. Collective over ``spatial`` (the agreement), then ``lon`` (one
    all_reduce of int64)."""
    torch = _torch()
    problems = Problems()
    _check_field(data, problems)
    ok = not problems
    leading = tuple(data.shape[:-2]) if ok else ()
    widened = str(data.dtype) if str(data.dtype) in _WIDENED else ""
    signature = call_signature("device zonal", str(data.dtype), widened, leading) if ok else 0
    _agree(dist, problems, signature, data)
    x, result_dtype = _as_channels(data)
    channels, rows = x.shape[0], x.shape[1]
    sums = exact.zeros(channels * rows + 1, x.device)  # a last row of flags
    counts = torch.zeros((channels * rows + 1, 1), dtype=torch.int64, device=x.device)

    def form():
        valid = ~torch.isnan(x)
        exact.add_values(sums[:-1], torch.arange(channels * rows, device=x.device).reshape(channels, rows), x,
                         valid, (-1,))
        counts[:-1, 0] = valid.sum(dim=-1, dtype=torch.int64).reshape(-1)

    failure = _forming(sums, form)
    merged = torch.cat((sums, counts), dim=1)  # the counts beside the sums: one all_reduce
    dist._device.all_reduce(merged, "lon")
    _raise_failure(dist, failure)
    failed = merged[-1, 1] > 0
    counts = torch.where(failed, torch.zeros_like(merged[:-1, -1]), merged[:-1, -1]).to(torch.float64)
    total = exact.to_double_double(merged[:-1, :-1].contiguous())
    nan = torch.full_like(counts, float("nan"))
    means = exact.dd_divide(total, (counts, torch.zeros_like(counts)))[0]
    means = torch.where((counts > 0) & ~torch.isnan(means), means, nan)
    shape = leading + (rows,)
    return means.to(result_dtype).reshape(shape), counts.reshape(shape)


def sum_over_lon(dist, grad, data):
    """``grad`` (a gradient of a result replicated over the lon group, ``data``'s leading dims and rows) summed over
    the lon group in float64 in lon-rank order, in its dtype, as the library's ``_gradients.sum_over_lon``.
    Collective over ``spatial`` (the agreement, which a rank in another phase of a call meets: ArgumentError on every
    rank), then over ``lon`` (one all_gather)."""
    problems = Problems()
    _check_field(data, problems)
    ok = not problems
    signature = call_signature("device sum_over_lon", str(data.dtype), tuple(data.shape[:-2])) if ok else 0
    _agree(dist, problems, signature, data)
    return dist._device.gathered_lon_sum(grad)


def _forming(sums, form):
    """Runs ``form()``, which fills ``sums``; if it fails (memory exhausted on the device, say), ``sums`` are zeroed
    and the second limb of their last row flags the failure, so that this rank still takes part in the all_reduce
    and every rank of the group gets NaN instead of waiting for it; returns the failure (None if none)."""
    try:
        form()
        return None
    except (MemoryError, RuntimeError) as error:
        sums.zero_()
        sums[-1, 1] = 1
        return error


def _raise_failure(dist, failure):
    """The failure of this rank's sums, raised after the all_reduce (its peers got NaN results from it)."""
    if failure is not None:
        from ._gridshard import SystemFailure

        raise SystemFailure(f"rank {dist.rank}: the device path could not form its sums "
                            f"({type(failure).__name__}: {failure}); the other ranks of its group got NaN")


def _slots(terms, term, channels, device):
    """The rows of ``term``'s sums, one per channel, in a call's sums (after the total weight's row, each channel's
    ``terms`` in order)."""
    torch = _torch()
    return 1 + torch.arange(channels, device=device, dtype=torch.int64) * len(terms) + terms.index(term)


def _local_sums(sums, statistic, x, p, a, per_point, double):
    """This rank's exact sums into ``sums`` (``exact`` rows): the total weight, then per channel the terms of
    ``statistic``; and a last row whose first limb counts the weights that are negative or not finite."""
    torch = _torch()
    channels = x.shape[0]
    terms = _TERMS[statistic]
    dims = (-2, -1)
    exact.add_values(sums, torch.zeros(1, dtype=torch.int64, device=x.device), a.unsqueeze(0),
                     torch.ones_like(a, dtype=torch.bool).unsqueeze(0), dims)
    sums[-1, 0] += (~torch.isfinite(a) | (a < 0)).sum(dtype=torch.int64)
    active = (a != 0).expand(x.shape)
    if statistic == "nanmean":
        active = active & ~torch.isnan(x)
    zero = torch.zeros((), dtype=torch.float64, device=x.device)
    t = torch.where(active, x, zero)

    def slot(term):
        return _slots(terms, term, channels, x.device)

    rows = x.shape[1]
    row_weights = a[:, 0]

    def per_row(term, values):
        """``a values`` summed as the library sums per-row weights: each row's exact sum times its weight, exactly."""
        if x.shape[2] == 0:
            return  # no points
        row_sums = exact.zeros(channels * rows, x.device)
        index = torch.arange(channels * rows, device=x.device).reshape(channels, rows)
        exact.add_values(row_sums, index, values, active, (-1,))
        exact.add_scaled_rows(sums, slot(term).unsqueeze(1).expand(channels, rows).reshape(-1), row_sums,
                              row_weights.repeat(channels))

    def weighted(term, values):
        """``a values`` as the library sums it: per row, the exact products (the row's weight times its exact sum);
        per point, each product rounded and its rounding error as fma gives it (0 where the product is not
        finite), two terms whose sum is exact but where that error underflows."""
        if not per_point:
            per_row(term, values)
            return
        product = a * values
        exact.add_values(sums, slot(term), product, active, dims)
        error = exact.product_error(a, values, product)
        exact.add_values(sums, slot(term), torch.where(torch.isfinite(product), error, zero), active, dims)

    if "weight" in terms:
        exact.add_values(sums, slot("weight"), a.expand(x.shape), active, dims)
    if "truth" in terms:
        weighted("truth", t)
    if "prediction" in terms:
        weighted("prediction", torch.where(active, p, zero))
    if "square" in terms:
        square = t * t
        weighted("square", square)
        if double:  # a double's square is inexact: its rounding error, as fma gives it, is a second part
            low = exact.product_error(t, t, square)
            weighted("square", torch.where(torch.isfinite(square), low, zero))
    if "difference_square" in terms:
        difference = torch.where(active, p, zero) - t
        term = difference * difference
        if per_point:  # the library rounds the weighted term once and sums it
            exact.add_values(sums, slot("difference_square"), a * term, active, dims)
        else:
            per_row("difference_square", term)


def _finalize(statistic, sums, bad, channels):
    """The values, the weight of the points counted and (std) the means per channel, from the merged sums
    (src/metrics/terms.cpp's formulas in double-double); NaN where a weight was bad or the total not positive."""
    torch = _torch()
    terms = _TERMS[statistic]
    hi, lo = exact.to_double_double(sums)
    total = hi[0]
    usable = (total > 0) & (bad == 0)
    nan = torch.full((channels,), float("nan"), dtype=torch.float64, device=hi.device)

    def value(term):
        k = _slots(terms, term, channels, hi.device)
        return hi[k], lo[k]

    w = value("weight") if "weight" in terms else (hi[:1].expand(channels), lo[:1].expand(channels))

    def ratio(s):
        return torch.where(w[0] > 0, exact.dd_divide(s, w)[0], nan)

    mean = None
    if statistic == "sum":
        result = value("truth")[0]
    elif statistic in ("mean", "nanmean"):
        result = ratio(value("truth"))
    elif statistic == "bias":
        result = ratio(exact.dd_add(value("prediction"), exact.dd_negate(value("truth"))))
    elif statistic == "rmse":
        result = torch.sqrt(ratio(value("difference_square")))
    else:
        result = _std(sums, w, value("truth"), value("square"), channels, terms)
        mean = ratio(value("truth"))
    result = torch.where(usable & ~torch.isnan(result), result, nan)  # one NaN, the library's quiet NaN
    weight = torch.where(usable, w[0], nan)
    return result, weight, None if mean is None else torch.where(usable, mean, nan)


def _std(sums, w, s, q, channels, terms):
    """``TermSums::std_dev``: ``sqrt(W Q - S^2) / W`` with the numerator exact; IEEE's answer from the rounded sums
    where S or Q is not finite."""
    torch = _torch()
    rows_s = sums[_slots(terms, "truth", channels, sums.device)]
    rows_q = sums[_slots(terms, "square", channels, sums.device)]
    rows_w = sums[:1].expand(channels, -1)
    numerator = exact.multiply(rows_w, rows_q)
    numerator[:, :exact.PRODUCT_LIMBS] -= exact.multiply(rows_s, rows_s)[:, :exact.PRODUCT_LIMBS]
    n = exact.to_double_double(numerator, exact.PRODUCT_LOWEST)
    exact_std = exact.dd_divide(exact.dd_sqrt(n), w)[0]
    exact_std = torch.where(n[0] > 0, exact_std, torch.zeros_like(exact_std))
    mean = exact.dd_divide(s, w)
    variance = exact.dd_add(exact.dd_divide(q, w), exact.dd_negate(exact.dd_multiply(mean, mean)))
    plain = torch.where(torch.isnan(variance[0]), variance[0], torch.sqrt(variance[0].clamp(min=0.0)))
    finite = torch.isfinite(s[0]) & torch.isfinite(q[0])
    nan = torch.full_like(plain, float("nan"))
    return torch.where(w[0] > 0, torch.where(finite, exact_std, plain), nan)
