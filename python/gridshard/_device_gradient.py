"""The device path's gradient metrics: the gradient magnitude (torch.gradient's stencil, in the field's own type, by
the library's one formula, src/metrics/row_kernels.cpp ``magnitude``), its weighted mean over its valid points and
the percent difference of two fields' means (ACE's ``gradient_magnitude_percent_diff``), with the one-cell halo strips
exchanged by ``torch.distributed`` point-to-point over the spatial group; and the magnitude's adjoint (the library's
src/metrics/gradient_backward.cpp: two halo exchanges, each point's sum in one fixed order, so its bits do not depend
on the mesh), which the backward passes of all three use. The library's bits, on the tensors' own device."""

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


def _axis_stencils(begin, end, n, device):
    """torch.gradient's stencils at the points ``begin .. end`` of a non-periodic axis of ``n`` points, float64
    tensors: each point's derivative is ``before x[p-1] + here x[p] + after x[p+1]`` (central inside, one-sided at the
    ends), and for the transpose ``from_before``/``from_here``/``from_after``, the coefficient of x[p] in the derivative
    at p - 1, p and p + 1 (zero beyond an end). The library's ``axis_stencils``."""
    torch = _torch()
    p = torch.arange(begin, end, device=device)
    # (before, here, after) at the first point, inside and at the last point
    table = torch.tensor([[0.0, -1.0, 1.0], [-0.5, 0.0, 0.5], [-1.0, 1.0, 0.0]], dtype=torch.float64, device=device)

    def stencil(q):
        kind = torch.where(q == 0, 0, torch.where(q == n - 1, 2, 1))
        return table[kind].unbind(-1)

    before, here, after = stencil(p)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    from_before = torch.where(p > 0, stencil(p - 1)[2], zero)
    from_after = torch.where(p < n - 1, stencil(p + 1)[0], zero)
    return before, here, after, from_before, here, from_after


def magnitude_adjoint(dist, x, upstream, grid):
    """The gradient of ``sum(upstream * |grad x|)`` with respect to this rank's ``x`` (both ``(channels, rows, cols)``
    in the computing dtype), in that dtype: the library's adjoint step for step. Per point, in float64 and in the
    library's order, the coefficients ``u dy / |grad|`` and ``u dx / |grad|`` (zero where ``u`` is zero or the
    magnitude is zero or not finite), rounded to the field's type; then each point's sum of its lat neighbours'
    coefficients and its own, then its lon ones', in that order whatever the mesh. Collective over ``spatial``: two
    halo exchanges (the field, then both coefficient planes)."""
    torch = _torch()
    f64 = torch.float64
    device = x.device
    rows, columns = dist.get_local_slices(grid)
    lat = [c.unsqueeze(1) for c in _axis_stencils(rows.start, rows.stop, grid[0], device)]
    lon = _axis_stencils(columns.start, columns.stop, grid[1], device)
    padded = _exchange(dist, x).to(f64)
    here, north, south = padded[:, 1:-1, 1:-1], padded[:, :-2, 1:-1], padded[:, 2:, 1:-1]
    west, east = padded[:, 1:-1, :-2], padded[:, 1:-1, 2:]
    zero = torch.zeros((), dtype=f64, device=device)

    def derivative(before, at, after, previous, following):
        # A central difference does not read the point itself: a NaN there must not reach it (as 0 x NaN).
        return (before * previous + torch.where(at != 0, at * here, zero)) + after * following

    dy = derivative(lat[0], lat[1], lat[2], north, south)
    dx = derivative(lon[0], lon[1], lon[2], west, east)
    magnitude = torch.sqrt(dy * dy + dx * dx)
    u = upstream.to(f64)
    counts = (u != 0) & (magnitude > 0) & (magnitude < float("inf"))
    ratio = u / magnitude
    coefficients = torch.cat([torch.where(counts, dy * ratio, zero), torch.where(counts, dx * ratio, zero)])
    around = _exchange(dist, coefficients.to(x.dtype)).to(f64)
    channels = x.shape[0]
    cy, cx = around[:channels], around[channels:]
    total = lat[3] * cy[:, :-2, 1:-1] + lat[4] * cy[:, 1:-1, 1:-1] + lat[5] * cy[:, 2:, 1:-1]
    total = total + lon[3] * cx[:, 1:-1, :-2] + lon[4] * cx[:, 1:-1, 1:-1] + lon[5] * cx[:, 1:-1, 2:]
    return total.to(x.dtype)


def gradient_magnitude_backward(dist, tensor, upstream):
    """The gradient of ``sum(upstream * gradient_magnitude(tensor))`` with respect to this rank's ``tensor``, in its
    dtype and on its device (``magnitude_adjoint``). Collective over ``spatial``: the agreement, two halo exchanges."""
    torch = _torch()
    # The upstream gradient is the magnitude's: in the computing dtype (float32 for half precision).
    computing = torch.float64 if tensor.dtype == torch.float64 else torch.float32
    fields = [tensor.to(computing), upstream.to(computing)]
    (x, u), _, _, _, _, grid = _fields_agreed(dist, "gradient_magnitude backward", fields, False, (-2, -1), None,
                                              names=("tensor", "upstream"))
    return magnitude_adjoint(dist, x, u, grid).reshape(tensor.shape).to(tensor.dtype)


def mean_jacobians(dist, fields, upstreams):
    """Per field of ``fields`` (tensors of one shape; None for one that needs no gradient) the gradient of ``sum a
    |grad x|`` with respect to this rank's ``x``, ``a`` its entry of ``upstreams`` (the weights, broadcast, in ``x``'s
    dtype): the gradient metrics' means' Jacobians (the points whose magnitude is not valid left out), all from one
    adjoint. Collective over ``spatial``: the agreement, two halo exchanges."""
    torch = _torch()
    given = [(f.detach(), a) for f, a in zip(fields, upstreams) if f is not None]
    if not given:
        return [None] * len(fields)

    def stacked(tensors):
        return torch.cat([t.reshape((-1,) + tuple(t.shape[-2:])) for t in tensors])

    x_all, a_all = stacked([f for f, _ in given]), stacked([a for _, a in given])
    # Which fields: ranks that differentiate different fields raise on every rank instead of pairing their halos.
    which = "".join("0" if f is None else "1" for f in fields)
    (x, u), _, _, _, _, grid = _fields_agreed(dist, f"gradient means' Jacobians of fields {which}", [x_all, a_all],
                                              False, (-2, -1), None, names=("tensor", "weights"))
    parts = iter(magnitude_adjoint(dist, x, u, grid).to(x_all.dtype).split(x.shape[0] // len(given)))
    return [None if f is None else next(parts).reshape(f.shape) for f in fields]


def _fields_agreed(dist, name, fields, weights, dim, img_shape, problem="", names=("truth", "predicted")):
    """The fields read (metadata only) and agreed, as ``(channels, rows, cols)`` tensors in their computing dtype, with
    the field's leading shape, its results' dtype, the weights and their form, and the global grid; ``problem`` is
    this rank's own (a bad ``img_shape``); ``names`` a pair of fields' names. Collective over ``spatial``: the
    agreement."""
    torch = _torch()
    problems = Problems()
    if problem:
        problems.add(problem)
    for k, field in enumerate(fields):
        _device._check_field(field, problems, names[k] if len(fields) == 2 else "tensor")
    data = fields[0]
    if not problems:
        check_spatial_dims(dim, data.ndim, problems)
    if len(fields) == 2 and not problems and (fields[1].shape != data.shape or fields[1].dtype != data.dtype
                                              or fields[1].device != data.device):
        problems.add(f"{names[1]}: {tuple(fields[1].shape)} {fields[1].dtype} on {fields[1].device} differs from "
                     f"{names[0]}'s {tuple(data.shape)} {data.dtype} on {data.device}")
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
    """Each field's weighted mean gradient magnitude over its own valid (non-NaN) magnitudes and the weight of those
    points, float64 ``(fields, channels)`` each (the library's ``gradient_magnitude_means``), the leading shape and
    the results' dtype. Collective over ``spatial``: the agreement, one halo exchange, one all_reduce of int64."""
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
    means, totals = [], []
    for k in range(len(shards)):
        block = merged[k * rows_per_field:(k + 1) * rows_per_field]
        mean, total, _ = _device._finalize("nanmean", block[:-1], block[-1, 0] + block[-1, 1], channels)
        means.append(mean)
        totals.append(total)
    result_dtype = torch.float64 if computing == torch.float64 else torch.float32
    return torch.stack(means), torch.stack(totals), leading, result_dtype


def percent_difference(means):
    """``100 (G(predicted) - G(truth)) / G(truth)`` of the float64 means ``(2, channels)`` (``percent_difference`` of
    the library, in float64; a NaN the one quiet NaN)."""
    torch = _torch()
    percent = 100.0 * (means[1] - means[0]) / means[0]
    return torch.where(torch.isnan(percent), torch.full_like(percent, float("nan")), percent)


def weighted_mean_gradient_magnitude(dist, tensor, weights, dim=(-2, -1)):
    """``weighted_nanmean(gradient_magnitude(tensor), weights)`` on the device. Collective over ``spatial``."""
    means, _, leading, result_dtype = gradient_means(dist, [tensor], weights, dim)
    return means[0].to(result_dtype).reshape(leading)


def gradient_magnitude_percent_diff(dist, truth, predicted, weights, dim=(-2, -1), img_shape=None, problem=""):
    """``100 (G(predicted) - G(truth)) / G(truth)``, rounded once to the result's dtype, on the device. Collective
    over ``spatial``."""
    means, _, leading, result_dtype = gradient_means(dist, [truth, predicted], weights, dim, img_shape, problem)
    return percent_difference(means).to(result_dtype).reshape(leading)
