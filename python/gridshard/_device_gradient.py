"""The device path's gradient metrics: the gradient magnitude (torch.gradient's stencil, in the field's own type, by
the library's one formula, src/metrics/row_kernels.cpp ``magnitude``), its weighted mean over its valid points and
the percent difference of two fields' means (ACE's ``gradient_magnitude_percent_diff``), with the one-cell halo strips
exchanged by ``torch.distributed`` point-to-point over the spatial group; the library's bits, on the tensors' own
device. Differentiated calls of the means take the library (its adjoint); the magnitude's backward is the library's
adjoint kernel, through the host."""

import sys

from . import _device
from . import _exact_torch as exact
from ._arrays import Problems
from ._fields import PER_POINT, call_signature, check_spatial_dims


def _torch():
    return sys.modules.get("torch")


def _exchange(dist, x):
    """``x`` (``(channels, rows, cols)``) padded by one cell on each side with its neighbours' rows and columns along
    the mesh (zeros at the grid's edges, where the stencil is one-sided; the corners unused). Collective over
    ``spatial``: one batch of point-to-point messages, one row or column each way per neighbour (torch.distributed,
    the world's ranks)."""
    torch = _torch()
    d, i, j = dist._mesh.coords
    _, h, w = dist.mesh_shape
    padded = x.new_zeros((x.shape[0], x.shape[1] + 2, x.shape[2] + 2))
    padded[:, 1:-1, 1:-1] = x
    if h * w == 1:
        return padded
    import torch.distributed as td

    def rank(row, column):
        return d * h * w + row * w + column

    # (neighbour, what goes to it, where what comes from it goes, the tag of each way): a message's tag is the
    # direction it travels, so that each receive names the send it matches.
    ways = []
    if j > 0:
        ways.append((rank(i, j - 1), x[:, :, 0], padded[:, 1:-1, 0], 0, 1))
    if j < w - 1:
        ways.append((rank(i, j + 1), x[:, :, -1], padded[:, 1:-1, -1], 1, 0))
    if i > 0:
        ways.append((rank(i - 1, j), x[:, 0, :], padded[:, 0, 1:-1], 2, 3))
    if i < h - 1:
        ways.append((rank(i + 1, j), x[:, -1, :], padded[:, -1, 1:-1], 3, 2))
    received = [torch.empty_like(out) for _, _, out, _, _ in ways]
    operations = [td.P2POp(td.isend, strip.contiguous(), peer, tag=sent) for peer, strip, _, sent, _ in ways]
    operations += [td.P2POp(td.irecv, buffer, peer, tag=coming)
                   for (peer, _, _, _, coming), buffer in zip(ways, received)]
    if operations:
        for request in td.batch_isend_irecv(operations):
            request.wait()
    for (_, _, out, _, _), buffer in zip(ways, received):
        out.copy_(buffer)
    return padded


def magnitudes(dist, x, grid):
    """The gradient magnitude of ``x`` (``(channels, rows, cols)``, float32 or float64) at this rank's points of the
    global ``grid``, in ``x``'s dtype: the library's stencil (one-sided differences on the grid's first and last row
    and column, central ones elsewhere) and its one formula, scaling large and tiny terms by a power of two so that no
    square overflows or underflows. Collective over ``spatial`` (one halo exchange)."""
    torch = _torch()
    dtype = x.dtype
    padded = _exchange(dist, x)
    rows, columns = dist.get_local_slices(grid)
    device = x.device
    global_rows = torch.arange(rows.start, rows.stop, device=device).unsqueeze(1)
    global_columns = torch.arange(columns.start, columns.stop, device=device)
    first, last = global_rows == 0, global_rows == grid[0] - 1
    west, east = global_columns == 0, global_columns == grid[1] - 1
    here, up, down = padded[:, 1:-1, 1:-1], padded[:, :-2, 1:-1], padded[:, 2:, 1:-1]
    left, right = padded[:, 1:-1, :-2], padded[:, 1:-1, 2:]
    lat_difference = torch.where(first, down - here, torch.where(last, here - up, down - up))
    lon_difference = torch.where(west, right - here, torch.where(east, here - left, right - left))

    def constant(value):
        return torch.tensor(value, dtype=dtype, device=device)

    half, one = constant(0.5), constant(1.0)
    lat_factor = torch.where(first | last, one, half)
    lon_factor = torch.where(west | east, one, half)
    # The library's `magnitude`: its range, shifts and order of operations, in the field's type.
    span = 62 if dtype == torch.float32 else 510
    large_shift, tiny_shift = span + 4, (100 if dtype == torch.float32 else 772)
    largest = torch.maximum((lat_difference * lat_factor).abs(), (lon_difference * lon_factor).abs())
    large, tiny = largest > constant(2.0 ** span), largest < constant(2.0 ** -span)
    scale = torch.where(large, constant(2.0 ** -large_shift), torch.where(tiny, constant(2.0 ** tiny_shift), one))
    unscale = torch.where(large, constant(2.0 ** large_shift), torch.where(tiny, constant(2.0 ** -tiny_shift), one))
    lat_term = lat_difference * (lat_factor * scale)
    lon_term = lon_difference * (lon_factor * scale)
    return torch.sqrt(lat_term * lat_term + lon_term * lon_term) * unscale


def _fields_agreed(dist, name, fields, weights, dim, img_shape, problem=""):
    """The fields read (metadata only) and agreed, as ``(channels, rows, cols)`` tensors in their computing dtype, with
    the field's leading shape, its results' dtype, the weights and their form, and the global grid; ``problem`` is
    this rank's own (a bad ``img_shape``). Collective over ``spatial``: the agreement."""
    torch = _torch()
    problems = Problems()
    if problem:
        problems.add(problem)
    for k, field in enumerate(fields):
        _device._check_field(field, problems, ("truth", "predicted")[k] if len(fields) == 2 else "tensor")
    data = fields[0]
    if not problems:
        check_spatial_dims(dim, data.ndim, problems)
    if len(fields) == 2 and not problems and (fields[1].shape != data.shape or fields[1].dtype != data.dtype
                                              or fields[1].device != data.device):
        problems.add(f"predicted: {tuple(fields[1].shape)} {fields[1].dtype} on {fields[1].device} differs from "
                     f"truth's {tuple(data.shape)} {data.dtype} on {data.device}")
    if not problems and (data.shape[-2] == 0 or data.shape[-1] == 0):
        problems.add(f"{name}: an empty shard {tuple(data.shape[-2:])}: the gradient's halo exchange needs points")
    a, form = None, PER_POINT
    if not problems and weights is not False:  # False: a call without weights (the magnitudes alone)
        a, form = _device._weights_on_device(weights, data, problems)
    ok = not problems
    leading = tuple(data.shape[:-2]) if ok else ()
    widened = str(data.dtype) if str(data.dtype) in _device._WIDENED else ""
    signature = call_signature(f"device {name}", str(data.dtype), widened, leading, weights is None,
                               len(fields)) if ok else 0
    form, grid = _device._agree(dist, problems, signature, data, form, img_shape)
    if grid[0] < 2 or grid[1] < 2:
        from ._gridshard import ArgumentError

        raise ArgumentError(f"gradient needs at least 2 points along each spatial dim, got nlat={grid[0]} "
                            f"nlon={grid[1]}")
    computing = torch.float64 if data.dtype == torch.float64 else torch.float32
    shards = [f.detach().reshape((-1,) + tuple(f.shape[-2:])).to(computing) for f in fields]
    return shards, leading, computing, a, form, grid


def gradient_magnitude(dist, tensor, dim=(-2, -1)):
    """The gradient magnitude at this rank's points, the input's shape, in its dtype (float32 for half precision).
    Collective over ``spatial``: the agreement and one halo exchange."""
    (x,), leading, _, _, _, grid = _fields_agreed(dist, "gradient_magnitude", [tensor], False, dim, None)
    return magnitudes(dist, x, grid).reshape(leading + tuple(x.shape[-2:]))


def gradient_means(dist, fields, weights, dim=(-2, -1), img_shape=None, problem=""):
    """Each field's weighted mean gradient magnitude over its own valid (non-NaN) magnitudes, float64 ``(fields,
    channels)`` (the library's ``gradient_magnitude_means``), the leading shape and the results' dtype. Collective
    over ``spatial``: the agreement, one halo exchange, one all_reduce of int64."""
    torch = _torch()
    name = "gradient_magnitude_percent_diff" if len(fields) == 2 else "weighted_mean_gradient_magnitude"
    shards, leading, computing, a, form, grid = _fields_agreed(dist, name, fields, weights, dim, img_shape, problem)
    channels = shards[0].shape[0]
    rows_per_field = 2 + channels * len(_device._TERMS["nanmean"])
    blocks = [exact.zeros(rows_per_field, shards[0].device) for _ in shards]
    # Both fields' magnitudes from one halo exchange (their channels side by side, one message per neighbour).
    gradients = magnitudes(dist, torch.cat(shards), grid).to(torch.float64).split(channels)
    failures = []
    for gradient, sums in zip(gradients, blocks):
        failures.append(_device._forming(sums, lambda: _device._local_sums(
            sums, "nanmean", gradient, None, a, form == PER_POINT, False)))
    merged = torch.cat(blocks)
    dist._device.all_reduce(merged)
    for failure in failures:
        _device._raise_failure(dist, failure)
    means = []
    for k in range(len(shards)):
        block = merged[k * rows_per_field:(k + 1) * rows_per_field]
        means.append(_device._finalize("nanmean", block[:-1], block[-1, 0] + block[-1, 1], channels)[0])
    result_dtype = torch.float64 if computing == torch.float64 else torch.float32
    return torch.stack(means), leading, result_dtype


def weighted_mean_gradient_magnitude(dist, tensor, weights, dim=(-2, -1)):
    """``weighted_nanmean(gradient_magnitude(tensor), weights)`` on the device. Collective over ``spatial``."""
    means, leading, result_dtype = gradient_means(dist, [tensor], weights, dim)
    return means[0].to(result_dtype).reshape(leading)


def gradient_magnitude_percent_diff(dist, truth, predicted, weights, dim=(-2, -1), img_shape=None, problem=""):
    """``100 (G(predicted) - G(truth)) / G(truth)`` (``percent_difference`` of the library, in float64, rounded
    once to the result's dtype; a NaN the one quiet NaN) on the device. Collective over ``spatial``."""
    torch = _torch()
    means, leading, result_dtype = gradient_means(dist, [truth, predicted], weights, dim, img_shape, problem)
    percent = 100.0 * (means[1] - means[0]) / means[0]
    percent = torch.where(torch.isnan(percent), torch.full_like(percent, float("nan")), percent)
    return percent.to(result_dtype).reshape(leading)
