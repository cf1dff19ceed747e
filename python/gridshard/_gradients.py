"""The gradient rules of gridshard.Distributed's reductions (see _autograd.py for how a rule is used): for each, the
global sums its value is a function of, that function, and this rank's parts of the sums as torch expressions.
Values always come from the library (the exact forward), or from the device path's mirror of it; these expressions
only give the derivatives. Beside the rules, the library calls only a gradient makes: the replicas' upstream gradients
summed over the lon group, and the gradient magnitude's means and adjoint."""

import numpy as np

from . import _arrays, _autograd, _device, _device_gradient
from . import _gridshard as _core
from ._arrays import Problems
from ._fields import Field, check_spatial_dims, declared_img_shape, metric_result, weights_buffer


def _torch():
    return _autograd._torch()


def _as_float64(value, like):
    """A library result (numpy or tensor) as a float64 tensor on ``like``'s device."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value.detach().to(device=like.device, dtype=torch.float64)
    return torch.as_tensor(np.asarray(value, dtype=np.float64), device=like.device)


def weights_like(weights, x):
    """The weights as a float64 tensor broadcast to ``x``'s ``(h, w)``, on its device (None: ones)."""
    torch = _torch()
    rows, cols = x.shape[-2], x.shape[-1]
    if weights is None:
        return torch.ones((rows, cols), dtype=torch.float64, device=x.device)
    w = weights.detach() if isinstance(weights, torch.Tensor) else torch.as_tensor(np.asarray(weights))
    w = w.to(device=x.device, dtype=torch.float64)
    while w.ndim > 2 and w.shape[0] == 1:
        w = w[0]
    return torch.broadcast_to(w, (rows, cols))


def _spatial_sum(values):
    return values.sum(dim=(-2, -1))


def _keep(value, field, keepdim):
    """A per-channel result with ``(1, 1)`` after its leading dims when ``keepdim``, as the plain call gives it."""
    return value.reshape(field.leading + (1, 1)) if keepdim else value


def _weights_arg(weights):
    torch = _torch()
    return weights.detach() if isinstance(weights, torch.Tensor) else weights


# ----- the library calls only a gradient makes -----


def sum_over_lon(dist, grad, data):
    """``grad`` (``data``'s leading dims and rows, a gradient of a result replicated over the lon group) summed
    over the lon group, in lon-rank order (the same bits on every rank of it), in ``grad``'s dtype and on its
    device. Collective over ``spatial`` (the call's agreement, on ``data``'s shards), then over ``lon``."""
    problems = Problems()
    field = Field(data, "data", problems)
    values = np.zeros(0)
    torch = _arrays._torch()
    with problems.catching("the upstream gradient"):  # a copy, before the call's agreement
        values = np.array(grad.detach().to("cpu", torch.float64).numpy(), dtype=np.float64, order="C")
    ok = not problems
    dist._mesh.sum_over_lon(problems.text(), field.signature("sum_over_lon"), field.rows, field.cols,
                            values.reshape(-1) if ok else None)
    return torch.from_numpy(values).to(device=grad.device, dtype=grad.dtype)


def gradient_magnitude_means(dist, truth, predicted, weights, dim, img_shape):
    """Per field (the truth, then the prediction unless None) its weighted mean gradient magnitude over its valid
    magnitudes and the weight of those points, float64 ``(fields, *leading)`` each; and a function that gives a
    per-channel float64 result the kind, dtype and shape of the metrics' results. Collective over ``spatial``
    (one halo exchange of the fields, one allreduce)."""
    problems = Problems()
    img, problem = declared_img_shape(img_shape)
    if problem:
        problems.add(problem)
    t = Field(truth, "truth", problems)
    p = Field(predicted, "predicted", problems) if predicted is not None else None
    if t.buffer is not None:
        check_spatial_dims(dim, t.array.ndim, problems)
        if p is not None and p.buffer is not None and (t.array.shape != p.array.shape or t.dtype != p.dtype):
            problems.add(f"predicted: {tuple(p.array.shape)} {p.dtype} differs from truth's "
                         f"{tuple(t.array.shape)} {t.dtype}")
    w, form = weights_buffer(weights, t, problems)
    fields = 1 if p is None else 2
    out = np.empty(2 * fields * t.channels if not problems else 0, dtype=np.float64)
    ok = not problems
    _core.gradient_magnitude_means(dist._mesh, problems.text(), t.signature(weights is None),
                                   t.buffer if ok else None, p.buffer if ok and p is not None else None, w, form,
                                   img, out)
    means, totals = out.reshape((2, fields) + t.leading)
    return means, totals, lambda values: metric_result(np.asarray(values, dtype=np.float64), t)


def gradient_magnitude_backward(dist, tensor, upstream):
    """The gradient of ``sum(upstream * gradient_magnitude(tensor))`` with respect to this rank's ``tensor``, in its
    dtype and on its device (the library's adjoint kernel). Collective over ``spatial`` (two halo exchanges)."""
    problems = Problems()
    field = Field(tensor, "tensor", problems)
    given = Field(upstream, "upstream", problems)
    ok = not problems
    grads = np.empty(field.array.shape if ok else (0,), dtype=field.dtype)
    _core.gradient_magnitude_backward(dist._mesh, problems.text(), field.signature(), field.buffer if ok else None,
                                      given.buffer if ok else None, grads, False)
    out = _arrays.like(grads, tensor)
    return out.to(tensor.dtype) if _arrays.is_half(tensor) else out


class WeightedSum(_autograd.Rule):
    """``sum where(a != 0, x, 0) a``."""

    def __init__(self, dist, weights, keepdim):
        self.dist, self.weights, self.keepdim = dist, weights, keepdim

    def forward(self, x):
        value, _, _, field = self.dist._weighted_statistics("sum", x.detach(), _weights_arg(self.weights))
        return _keep(value, field, self.keepdim), [_as_float64(value, x)]

    def finalize(self, s):
        return s

    def local(self, x):
        a = weights_like(self.weights, x)
        return [_spatial_sum(_torch().where(a != 0, x, 0) * a)]


class WeightedMean(_autograd.Rule):
    """``sum where(a != 0, x, 0) a / sum a`` (``valid_only``: both sums over the points that are not NaN)."""

    def __init__(self, dist, weights, keepdim=False, valid_only=False):
        self.dist, self.weights, self.keepdim, self.valid_only = dist, weights, keepdim, valid_only

    def forward(self, x):
        statistic = "nanmean" if self.valid_only else "mean"
        value, total, _, field = self.dist._weighted_statistics(statistic, x.detach(), _weights_arg(self.weights))
        total = _as_float64(total, x)
        return _keep(value, field, self.keepdim), [_as_float64(value, x) * total, total]

    def finalize(self, s1, s0):
        return s1 / s0

    def local(self, x):
        torch = _torch()
        a = weights_like(self.weights, x)
        keep = (a != 0) & ~torch.isnan(x) if self.valid_only else a != 0
        return [_spatial_sum(torch.where(keep, x, 0) * a), None]


class WeightedStd(_autograd.Rule):
    """``sqrt(sum a (x - mu)^2 / sum a)``: the deviations from the mean taken as constant, which gives the exact
    gradient (the sum of the weighted deviations is zero) without the cancellation of ``W Sxx - Sx^2``."""

    def __init__(self, dist, weights):
        self.dist, self.weights = dist, weights

    def forward(self, x):
        value, total, mean, _ = self.dist._weighted_statistics("std", x.detach(), _weights_arg(self.weights))
        std, total = _as_float64(value, x), _as_float64(total, x)
        self.mean = _as_float64(mean, x)  # as weighted_mean gives it, in the field's dtype
        return value, [std * std * total, total]

    def finalize(self, squares, total):
        return (squares / total).sqrt()

    def local(self, x):
        torch = _torch()
        a = weights_like(self.weights, x)
        deviation = x.to(torch.float64) - self.mean[..., None, None]
        return [_spatial_sum(torch.where(a != 0, deviation * deviation, 0) * a), None]


class Paired(_autograd.Rule):
    """``bias``: ``sum a (p - t) / sum a``; ``rmse``: ``sqrt(sum a (p - t)^2 / sum a)``."""

    grad_of = (0, 1)

    def __init__(self, dist, weights, kind):
        self.dist, self.weights, self.kind = dist, weights, kind

    def forward(self, truth, predicted):
        value, total, _, _ = self.dist._weighted_statistics(self.kind, truth.detach(), _weights_arg(self.weights),
                                                            predicted=predicted.detach())
        v, total = _as_float64(value, truth), _as_float64(total, truth)
        return value, [(v if self.kind == "bias" else v * v) * total, total]

    def finalize(self, s, total):
        return s / total if self.kind == "bias" else (s / total).sqrt()

    def local(self, truth, predicted):
        torch = _torch()
        a = weights_like(self.weights, truth)
        difference = predicted - truth
        term = difference if self.kind == "bias" else difference * difference
        return [_spatial_sum(torch.where(a != 0, term, 0) * a), None]


class Regional(WeightedMean):
    """The weighted mean with weights ``weights * regional_weights``."""

    def __init__(self, dist, weights, regional_weights, keepdim):
        super().__init__(dist, None, keepdim)
        self.base, self.region = weights, regional_weights

    def forward(self, x):
        value, total, _, field = self.dist._weighted_statistics("mean", x.detach(), _weights_arg(self.base),
                                                                regional_weights=_weights_arg(self.region))
        total = _as_float64(total, x)
        self.weights = weights_like(self.base, x) * weights_like(self.region, x)  # local()'s weights
        return _keep(value, field, self.keepdim), [_as_float64(value, x) * total, total]


class ZonalMean(_autograd.Rule):
    """``sum_lon where(valid, x, 0) / count_lon(valid)`` per row, the count of valid points from the same library
    call as the means. The means are replicated over the lon group, each replica feeding its own rank's part of the
    loss, so the backward first adds the replicas' upstream gradients over the lon group (the adjoint of the forward's
    allreduce over lon)."""

    def __init__(self, dist):
        self.dist = dist

    def forward(self, x):
        self.x = x.detach()
        value, count = self.dist._zonal_means(self.x)
        count = _as_float64(count, x)
        return value, [_as_float64(value, x) * count, count]

    def combine_upstream(self, grad):
        if self.dist._device.takes(self.x):
            return _device.sum_over_lon(self.dist, grad, self.x)
        return sum_over_lon(self.dist, grad, self.x)

    def finalize(self, s, count):
        return s / count

    def local(self, x):
        torch = _torch()
        return [torch.where(torch.isnan(x), 0, x).sum(dim=-1), None]


class Ensemble(_autograd.Rule):
    """The ensemble scores over the points where the truth and every member are finite (the library's rule):
    ``crps`` (``fair``), ``spread`` = ``sqrt(sum a var / sum a)``, ``ensemble_mean_rmse`` =
    ``sqrt(sum a (xbar - y)^2 / sum a)``, ``spread_skill_ratio`` = their ratio."""

    grad_of = (0, 1)

    def __init__(self, dist, weights, member_dim, score):
        self.dist, self.weights, self.member_dim, self.score = dist, weights, member_dim, score

    def _members(self, ensemble):
        return _torch().movedim(ensemble, self.member_dim, 0)

    def _valid(self, truth, members):
        torch = _torch()
        return torch.isfinite(truth) & torch.isfinite(members).all(dim=0)

    def forward(self, truth, ensemble):
        out, field = self.dist._ensemble_call(truth.detach(), ensemble.detach(), _weights_arg(self.weights),
                                              self.member_dim, self.score, with_sums=True)
        parts = out.reshape((-1,) + field.leading)
        value = metric_result(parts[0], field)
        total = _as_float64(parts[1], truth)
        if self.score == "spread_skill_ratio":  # both as their own calls give them, in the field's dtype
            spread, skill = (_as_float64(metric_result(parts[k], field), truth) for k in (2, 3))
            return value, [spread * spread * total, skill * skill * total]
        v = _as_float64(value, truth)
        squared = self.score in ("spread", "ensemble_mean_rmse")
        return value, [(v * v if squared else v) * total, total]

    def finalize(self, s, other):
        if self.score in ("crps", "fair_crps"):
            return s / other
        return (s / other).sqrt()

    def local(self, truth, ensemble):
        torch = _torch()
        members = self._members(ensemble)
        count = members.shape[0]
        valid = self._valid(truth.detach(), members.detach())
        a = weights_like(self.weights, truth)
        keep = valid & (a != 0)
        y = torch.where(keep, truth, 0).to(torch.float64)
        x = torch.where(keep, members, 0).to(torch.float64)
        mean = x.mean(dim=0)
        if self.score in ("crps", "fair_crps"):
            skill = (x - y).abs().mean(dim=0)
            pairs = (x[:, None] - x[None, :]).abs().sum(dim=(0, 1))
            term = skill - pairs / (2 * count * (count - 1 if self.score == "fair_crps" else count))
            return [_spatial_sum(term * a), None]
        variance = ((x - mean) ** 2).sum(dim=0) / (count - 1)
        error = (mean - y) ** 2
        if self.score == "spread":
            return [_spatial_sum(variance * a), None]
        if self.score == "ensemble_mean_rmse":
            return [_spatial_sum(error * a), None]
        return [_spatial_sum(variance * a), _spatial_sum(error * a)]


class GradientMagnitudeMean(_autograd.Rule):
    """``G(x) = weighted_nanmean(|grad x|, a)``, and with two fields ``100 (G(p) - G(t)) / G(t)`` (ACE's rule: each
    field over its own valid magnitudes). Per field the sums are ``S = sum where(valid, |grad x|, 0) a`` and
    ``W = sum valid a``, both from one library call (one halo exchange of both fields). The gradient of each ``S``
    with respect to the rank's shard, the library's adjoint of the magnitude applied to the weights (two halo
    exchanges; the points whose magnitude is not valid left out; on the device path its mirror, one adjoint for both
    fields), is formed in the forward pass, so the backward is
    ``c_S`` times it, with no collective: a backward run on some ranks only cannot leave the others waiting."""

    def __init__(self, dist, weights, percent_diff, img_shape=None):
        self.dist, self.weights, self.percent_diff, self.img_shape = dist, weights, percent_diff, img_shape
        self.grad_of = (0, 1) if percent_diff else (0,)

    def forward(self, *fields):
        """The value, and per field ``S = G W`` and ``W``: ``G`` the library's mean magnitude (exact) and ``W`` the
        weight of the points whose magnitude is valid, both from one library call (on the device path, from its
        own; and there the Jacobians from one adjoint)."""
        if self.dist._device.takes(*fields):
            return self._forward_on_device(fields)
        detached = [f.detach() for f in fields] + [None] * (2 - len(fields))
        means, weights_of_points, as_result = gradient_magnitude_means(
            self.dist, detached[0], detached[1], _weights_arg(self.weights), (-2, -1), self.img_shape)
        self.jacobians = [self._jacobian(f) if f.requires_grad else None for f in fields]
        if self.percent_diff:  # the library's formula on the library's means: the bits of the plain call
            value = as_result(_core.percent_difference(means[0].reshape(-1), means[1].reshape(-1)))
        else:
            value = as_result(means[0])
        sums = []
        for k, f in enumerate(fields):
            mean = _as_float64(means[k], f)
            weight = _as_float64(weights_of_points[k], f)
            sums += [mean * weight, weight]
        return value, sums

    def _forward_on_device(self, fields):
        img, problem = declared_img_shape(self.img_shape)
        means, totals, leading, result_dtype = _device_gradient.gradient_means(
            self.dist, [f.detach() for f in fields], _weights_arg(self.weights), (-2, -1), img, problem)
        needed = [f if f.requires_grad else None for f in fields]
        self.jacobians = _device_gradient.mean_jacobians(
            self.dist, needed, [None if f is None else self._upstream(f) for f in needed])
        value = _device_gradient.percent_difference(means) if self.percent_diff else means[0]
        sums = []
        for mean, total in zip(means, totals):
            sums += [(mean * total).reshape(leading), total.reshape(leading)]
        return value.to(result_dtype).reshape(leading), sums

    def finalize(self, *sums):
        if self.percent_diff:
            s_truth, w_truth, s_pred, w_pred = sums
            g_truth, g_pred = s_truth / w_truth, s_pred / w_pred
            return 100 * (g_pred - g_truth) / g_truth
        s, w = sums
        return s / w

    def _upstream(self, x):
        """``a``, the weights broadcast to ``x``'s shape in its dtype: the upstream gradient of the magnitudes."""
        torch = _torch()
        return torch.broadcast_to(weights_like(self.weights, x), x.shape).to(x.dtype).contiguous()

    def _jacobian(self, x):
        """The gradient of ``sum a |grad x|`` over the valid magnitudes with respect to this rank's ``x``, in its
        dtype (collective over ``spatial``: two halo exchanges)."""
        return gradient_magnitude_backward(self.dist, x.detach(), self._upstream(x))

    def local_grads(self, coefficients, inputs, needs):
        out = []
        for k in needs:
            c = coefficients[2 * k]
            jacobian = self.jacobians[k]
            out.append((c[..., None, None] * jacobian.to(c.dtype)).to(inputs[k].dtype))
        return out
