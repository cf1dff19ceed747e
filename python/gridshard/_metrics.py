"""The metrics of gridshard.Distributed on shards: the weighted reductions, the paired, ensemble, anomaly and
time-mean scores, the zonal means and spectra, the NaN fill, the halo exchange and the gradient magnitude. Each reads
its arguments on every rank (``_fields``), agrees them in the library call's first allreduce and takes its values
from the library; a tensor that requires grad goes through the gradient rule of ``_gradients`` instead."""

import functools
import numbers

import numpy as np

from . import _arrays, _autograd, _device, _device_gradient, _gradients
from . import _gridshard as _core
from ._arrays import Problems
from ._fields import (Field, check_spatial_dims, declared_img_shape, differentiable, metric_result, normalise_dims,
                      result_dtype, weights_buffer)


class MetricsMixin:
    """The metrics of ``gridshard.Distributed`` (a mixin: ``Distributed`` holds the C++ mesh ``_mesh`` they call
    the library with). Results are spatially global, per leading index, on every rank of the spatial group."""

    # ----- weighted reductions and paired scores -----

    def _field_call(self, kernel, data, weights, dim, per_channel=1):
        """``kernel``'s float64 values (``per_channel`` per channel, each set channel-fastest) and the field read."""
        problems = Problems()
        field = Field(data, "data", problems)
        if field.buffer is not None:
            check_spatial_dims(dim, field.array.ndim, problems)
        w, form = weights_buffer(weights, field, problems)
        out = np.empty(per_channel * field.channels if not problems else 0, dtype=np.float64)
        signature = field.signature(weights is None)
        kernel(self._mesh, problems.text(), signature, field.buffer if not problems else None, w, form, out)
        return out, field

    def _field_metric(self, kernel, data, weights, dim, keepdim=False):
        out, field = self._field_call(kernel, data, weights, dim)
        return metric_result(out, field, keepdim)

    def _weighted_statistics(self, statistic, data, weights, predicted=None, regional_weights=None):
        """A differentiated reduction's one library call (weighted_statistics): ``statistic`` of ``data`` (bias,
        rmse: ``predicted`` against it; ``regional_weights``: with ``weights`` times them) over the spatial dims, as
        ``(value, weights, means, field)``: the value as the plain call's result, then the float64 weight of the
        points counted and (std) the means as the value is, per leading index; on the device path (_device) for
        tensors it takes. Collective over ``spatial``: one allreduce."""
        def paired(mesh, problem, signature, t, p, w, form, out):
            _core.weighted_statistics(mesh, problem, signature, statistic, t, p, w, form, None, out)

        def regional(mesh, problem, signature, x, w, form, region, out):
            _core.weighted_statistics(mesh, problem, signature, statistic, x, None, w, form, region, out)

        def plain(mesh, problem, signature, x, w, form, out):
            regional(mesh, problem, signature, x, w, form, None, out)

        if regional_weights is None and self._device.takes(data, predicted):
            return _device.weighted_statistics(self, statistic, data, weights, predicted)
        per_channel = 3 if statistic == "std" else 2
        if predicted is not None:
            out, field = self._paired_call(paired, data, predicted, weights, (-2, -1), per_channel=per_channel)
        elif regional_weights is not None:
            out, field = self._regional_call(regional, data, weights, regional_weights, (-2, -1), per_channel)
        else:
            out, field = self._field_call(plain, data, weights, (-2, -1), per_channel)
        parts = out.reshape((per_channel, -1))
        means = metric_result(parts[2], field) if per_channel == 3 else None
        return metric_result(parts[0], field), parts[1].reshape(field.leading), means, field

    def _on_device(self, statistic, data, weights, dim, keepdim=False, predicted=None):
        """``statistic`` by the device path (_device), shaped as the library's result is."""
        value, _, _, field = _device.weighted_statistics(self, statistic, data, weights, predicted, dim)
        return value.reshape(field.leading + (1, 1)) if keepdim else value

    def _paired_metric(self, kernel, truth, predicted, weights, dim, *extra, problem=""):
        out, t = self._paired_call(kernel, truth, predicted, weights, dim, *extra, problem=problem)
        return metric_result(out, t)

    def _paired_call(self, kernel, truth, predicted, weights, dim, *extra, problem="", per_channel=1):
        problems = Problems()
        if problem:
            problems.add(problem)
        t = Field(truth, "truth", problems)
        p = Field(predicted, "predicted", problems)
        if t.buffer is not None:
            check_spatial_dims(dim, t.array.ndim, problems)
            if p.buffer is not None and t.array.shape != p.array.shape:
                problems.add(f"predicted: shape {tuple(p.array.shape)} differs from truth's {tuple(t.array.shape)}")
            elif p.buffer is not None and t.dtype != p.dtype:
                problems.add(f"predicted: dtype {p.dtype} differs from truth's {t.dtype}")
        w, form = weights_buffer(weights, t, problems)
        out = np.empty(per_channel * t.channels if not problems else 0, dtype=np.float64)
        ok = not problems
        signature = t.signature(weights is None)
        kernel(self._mesh, problems.text(), signature, t.buffer if ok else None, p.buffer if ok else None, w, form,
               *extra, out)
        return out, t

    # A tensor that requires grad gets a result attached to the graph (docs/python.md, "Gradients"): the value is the
    # library's, the gradient each rank gets is that of the global value with respect to its own shard.

    def weighted_sum(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """``sum(where(weights != 0, data, 0) * weights)`` over the spatial dims (ACE's NaN rule: a NaN under
        zero weight vanishes, others propagate). Collective over ``spatial``."""
        if differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedSum(self, weights, keepdim), data)
        if self._device.takes(data):
            return self._on_device("sum", data, weights, dim, keepdim)
        return self._field_metric(_core.weighted_sum, data, weights, dim, keepdim)

    def weighted_mean(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """``weighted_sum(data, weights) / sum(weights)`` over the spatial dims (``weights=None``: the plain
        mean). Collective over ``spatial``."""
        if differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedMean(self, weights, keepdim), data)
        if self._device.takes(data):
            return self._on_device("mean", data, weights, dim, keepdim)
        return self._field_metric(_core.weighted_mean, data, weights, dim, keepdim)

    def global_mean(self, data, dim=(-2, -1), keepdim=False):
        """The plain mean over the whole global grid (a NaN propagates): the loss of an elementwise error (MSE, L1,
        CRPS per point) whose tiles add up to the global loss, where ACE's rank-local means add up to the sum of the
        tiles' means. Collective over ``spatial``."""
        return self.weighted_mean(data, None, dim, keepdim)

    def weighted_nanmean(self, data, weights=None, dim=(-2, -1), keepdim=False):
        """The weighted mean over the points that are not NaN; NaN for a channel with none. Collective over
        ``spatial``."""
        if differentiable(dim, data):
            return _autograd.reduce(
                _gradients.WeightedMean(self, weights, keepdim, valid_only=True), data)
        if self._device.takes(data):
            return self._on_device("nanmean", data, weights, dim, keepdim)
        return self._field_metric(_core.weighted_nanmean, data, weights, dim, keepdim)

    def weighted_std(self, data, weights=None, dim=(-2, -1)):
        """The weighted population standard deviation over the spatial dims. Collective over ``spatial``."""
        if differentiable(dim, data):
            return _autograd.reduce(_gradients.WeightedStd(self, weights), data)
        if self._device.takes(data):
            return self._on_device("std", data, weights, dim)
        return self._field_metric(_core.weighted_std, data, weights, dim)

    def weighted_mean_bias(self, truth, predicted, weights=None, dim=(-2, -1)):
        """``weighted_mean(predicted - truth, weights)``. Collective over ``spatial``."""
        if differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.Paired(self, weights, "bias"), truth, predicted)
        if self._device.takes(truth, predicted):
            return self._on_device("bias", truth, weights, dim, predicted=predicted)
        return self._paired_metric(_core.bias, truth, predicted, weights, dim)

    def root_mean_squared_error(self, truth, predicted, weights=None, dim=(-2, -1)):
        """``sqrt(weighted_mean((predicted - truth)**2, weights))``. Collective over ``spatial``."""
        if differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.Paired(self, weights, "rmse"), truth, predicted)
        if self._device.takes(truth, predicted):
            return self._on_device("rmse", truth, weights, dim, predicted=predicted)
        return self._paired_metric(_core.rmse, truth, predicted, weights, dim)

    def weighted_mean_gradient_magnitude(self, tensor, weights=None, dim=(-2, -1)):
        """``weighted_nanmean(gradient_magnitude(tensor), weights)``, the magnitudes by halo exchange.
        Collective over ``spatial``."""
        if differentiable(dim, tensor):
            return _autograd.reduce(_gradients.GradientMagnitudeMean(self, weights, False), tensor)
        if self._device.takes(tensor):
            return _device_gradient.weighted_mean_gradient_magnitude(self, tensor, weights, dim)
        return self._field_metric(_core.weighted_mean_gradient_magnitude, tensor, weights, dim)

    def gradient_magnitude_percent_diff(self, truth, predicted, weights=None, dim=(-2, -1), img_shape=None):
        """``100 * (G(predicted) - G(truth)) / G(truth)``, ``G = weighted_mean_gradient_magnitude``, by one
        halo exchange of one-cell strips (never a gather). Each field's magnitudes count where they are valid (ACE's
        rule). ``img_shape``, if given, is checked against the grid the shards form. Collective over ``spatial``."""
        if differentiable(dim, truth, predicted):
            return _autograd.reduce(_gradients.GradientMagnitudeMean(self, weights, True, img_shape), truth, predicted)
        img, problem = declared_img_shape(img_shape)
        if self._device.takes(truth, predicted):
            return _device_gradient.gradient_magnitude_percent_diff(self, truth, predicted, weights, dim, img, problem)
        return self._paired_metric(
            _core.gradient_magnitude_percent_diff, truth, predicted, weights, dim, img, problem=problem
        )

    # ----- ensemble and anomaly scores (docs/forecast.md has the formulas) -----

    # The ensemble scores, each formed alone by one library call; a rank that asks another raises on every rank.
    _ENSEMBLE_SCORES = ("ensemble_mean_rmse", "spread", "spread_skill_ratio", "crps", "fair_crps")

    def _stacked(self, truth, stack, name, axis, problems):
        """``stack`` (fields of the truth's shape along ``axis``) as the library's ``(fields * channels, h, w)``
        buffer, member slowest (a copy only when ``axis`` is not the first dim); and the number of fields. What
        reading or copying it raises is this rank's problem (then ``None, 0``)."""
        with problems.catching(name):
            return self._stacked_unguarded(truth, stack, name, axis, problems)
        return None, 0

    def _stacked_unguarded(self, truth, stack, name, axis, problems):
        array = _arrays.as_numpy(stack, name, problems)
        if truth.buffer is None or array is None:
            return None, 0
        if array.ndim != truth.array.ndim + 1:
            problems.add(f"{name}: shape {tuple(array.shape)} is not the truth's {tuple(truth.array.shape)} "
                         f"with a member dim")
            return None, 0
        normal, message = normalise_dims(axis, array.ndim, "member_dim")
        if message or len(normal) != 1 or normal[0] >= array.ndim - 2:
            problems.add(message or f"member_dim={axis!r}: must name one leading dim of the ensemble")
            return None, 0
        moved = np.moveaxis(array, normal[0], 0)
        if tuple(moved.shape[1:]) != tuple(truth.array.shape) or array.dtype != truth.dtype:
            problems.add(f"{name}: {tuple(array.shape)} {array.dtype} does not hold fields of the truth's "
                         f"{tuple(truth.array.shape)} {truth.dtype} along member_dim={axis!r}")
            return None, 0
        fields = moved.shape[0]
        return _arrays.contiguous(moved).reshape(fields * truth.channels, truth.rows, truth.cols), fields

    def _ensemble(self, truth, ensemble, weights, member_dim, score):
        if _autograd.wanted(truth, ensemble) and isinstance(member_dim, int):
            return _autograd.reduce(_gradients.Ensemble(self, weights, member_dim, score), truth, ensemble)
        out, t = self._ensemble_call(truth, ensemble, weights, member_dim, score)
        return metric_result(out, t)

    def _ensemble_call(self, truth, ensemble, weights, member_dim, score, with_sums=False):
        """The library's ``score`` per channel (float64) and the truth read; ``with_sums``: then the weight of the
        points counted and, for the spread-skill ratio, the spread and the ensemble mean's RMSE (one set each).
        Collective over ``spatial``: one allreduce."""
        problems = Problems()
        t = Field(truth, "truth", problems)
        members, count = self._stacked(t, ensemble, "ensemble", member_dim, problems)
        w, form = weights_buffer(weights, t, problems)
        ok = not problems
        sets = 1 if not with_sums else 4 if score == "spread_skill_ratio" else 2
        out = np.empty(sets * t.channels if ok else 0, dtype=np.float64)
        _core.ensemble_scores(self._mesh, problems.text(),
                              t.signature(weights is None, count, self._ENSEMBLE_SCORES.index(score)),
                              t.buffer if ok else None, members if ok else None, count, w, form, score, with_sums,
                              out)
        return out, t

    def crps(self, truth, ensemble, weights=None, member_dim=0, fair=False):
        """The continuous ranked probability score of an ensemble, the area-weighted mean of
        ``mean_m |x_m - y| - sum_{m,k} |x_m - x_k| / (2 M^2)`` (``fair=True``: ``2 M (M - 1)``), as WeatherBench 2
        defines it. ``ensemble`` holds ``M >= 2`` fields of the truth's shape along ``member_dim``; a point
        counts where the truth and every member are finite. Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "fair_crps" if fair else "crps")

    def ensemble_spread(self, truth, ensemble, weights=None, member_dim=0):
        """``sqrt(weighted_mean(var_m(x)))``, the unbiased variance over members, over the points where the
        truth and every member are finite (as ``gridshard eval``'s ``spread``). Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "spread")

    def ensemble_mean_rmse(self, truth, ensemble, weights=None, member_dim=0):
        """``sqrt(weighted_mean((xbar - y)^2))``, the RMSE of the ensemble mean. Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "ensemble_mean_rmse")

    def spread_skill_ratio(self, truth, ensemble, weights=None, member_dim=0):
        """``ensemble_spread / ensemble_mean_rmse`` of one forecast (without the sqrt((M+1)/M) correction).
        Collective over ``spatial``."""
        return self._ensemble(truth, ensemble, weights, member_dim, "spread_skill_ratio")

    def anomaly_correlation(self, truth, predicted, climatology, weights=None):
        """The uncentred anomaly correlation, as WeatherBench 2: ``sum a x' y' / sqrt(sum a x'^2 sum a y'^2)``
        with ``x' = predicted - climatology`` and ``y' = truth - climatology``, over the points where all three
        are finite. Collective over ``spatial``."""
        problems = Problems()
        t = Field(truth, "truth", problems)
        stacked = None
        if t.buffer is not None:
            p = _arrays.as_numpy(predicted, "predicted", problems)
            c = _arrays.as_numpy(climatology, "climatology", problems)
            if p is not None and c is not None:
                if p.shape != t.array.shape or c.shape != t.array.shape or p.dtype != t.dtype or c.dtype != t.dtype:
                    problems.add(f"predicted {tuple(p.shape)} {p.dtype} and climatology {tuple(c.shape)} {c.dtype} "
                                 f"must have the truth's shape {tuple(t.array.shape)} and dtype {t.dtype}")
                else:
                    with problems.catching("predicted and climatology"):  # one copy of both, on this rank
                        stacked = np.concatenate([_arrays.contiguous(p).reshape(t.buffer.shape),
                                                  _arrays.contiguous(c).reshape(t.buffer.shape)])
        w, form = weights_buffer(weights, t, problems)
        ok = not problems
        out = np.empty(t.channels if ok else 0, dtype=np.float64)
        _core.anomaly_correlation(self._mesh, problems.text(), t.signature(weights is None), t.buffer if ok else None,
                                  stacked if ok else None, w, form, out)
        return metric_result(out, t)

    # ----- regions, zonal means, spectra and the NaN fill -----

    def regional_weighted_mean(self, data, weights, regional_weights, dim=(-2, -1), keepdim=False):
        """The weighted mean with weights ``weights * regional_weights`` (ACE's regional_area_weighted_mean).
        Collective over ``spatial``."""
        if differentiable(dim, data):
            return _autograd.reduce(_gradients.Regional(self, weights, regional_weights, keepdim), data)
        out, field = self._regional_call(_core.regional_weighted_mean, data, weights, regional_weights, dim)
        return metric_result(out, field, keepdim)

    def _regional_call(self, kernel, data, weights, regional_weights, dim, per_channel=1):
        problems = Problems()
        field = Field(data, "data", problems)
        if field.buffer is not None:
            check_spatial_dims(dim, field.array.ndim, problems)
        w, form = weights_buffer(weights, field, problems)
        region = None
        if field.buffer is not None:
            given = _arrays.as_numpy(regional_weights, "regional_weights", problems)
            try:
                region = np.ascontiguousarray(np.broadcast_to(given, (field.rows, field.cols)), dtype=np.float64)
            except ValueError:
                problems.add(f"regional_weights: shape {np.shape(given)} does not broadcast to the shard")
            except Exception as error:  # noqa: BLE001 - a MemoryError from the copy, say: agreed below
                problems.add(f"regional_weights: {type(error).__name__} on reading it: {error}")
        out = np.empty(per_channel * field.channels if not problems else 0, dtype=np.float64)
        ok = not problems
        kernel(self._mesh, problems.text(), field.signature(weights is None), field.buffer if ok else None, w, form,
               region, out)
        return out, field

    def zonal_mean(self, data):
        """The NaN-aware mean over longitude of each local row, ``(..., h_local)``; NaN for an all-NaN row.
        Collective over ``lon``."""
        if _autograd.wanted(data) and getattr(data, "ndim", 0) >= 2:
            return _autograd.reduce(_gradients.ZonalMean(self), data)
        return self._zonal_means(data)[0]

    def _zonal_means(self, data):
        """The zonal means as ``zonal_mean`` returns them and the float64 counts of valid points (None from the
        library unless asked), on the device path (_device) for tensors it takes. Collective over ``lon``."""
        if self._device.takes(data):
            return _device.zonal_means(self, data)
        out, field = self._zonal_call(data, with_counts=True)
        shape = field.leading + (field.rows,)
        return _arrays.like(out[0].astype(field.dtype, copy=False).reshape(shape), data), out[1].reshape(shape)

    def _zonal_call(self, data, with_counts=False):
        """The library's zonal means, float64 ``(1, channels, rows)`` (``with_counts``: ``(2, ...)``, then the valid
        points of each) and the field read. Collective over ``lon``: one allreduce."""
        problems = Problems()
        field = Field(data, "data", problems)
        sets = 2 if with_counts else 1
        out = np.empty(0, dtype=np.float64)
        with problems.catching("data"):  # the result, allocated before the call's agreement
            out = np.empty((sets, field.channels, field.rows) if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.zonal_mean(self._mesh, problems.text(), field.signature(), field.buffer if ok else None, with_counts,
                         out.reshape(-1))
        return out, field

    def spherical_power_spectrum(self, data, grid="legendre-gauss", lmax=None, mmax=None, convention="ace",
                                 truncation="torch-harmonics-0.8", mode="automatic", dtype=None):
        """The spherical-harmonic power per degree of each field, ``(..., L)`` on every spatial rank, computed in
        float64 and rounded once to the input's dtype (``dtype``: float32 or float64 to ask for another), the serial
        answer bit for bit on every mesh (docs/spectrum.md). ``grid``: "legendre-gauss" (ACE's), "equiangular" or
        "lobatto"; ``convention``: "ace" (m >= 0 once each) or "full" (m > 0 doubled); ``lmax``, ``mmax``: None for
        the truncation's. Values that are not finite propagate. Collective over ``spatial``."""
        problems = Problems()
        field = Field(data, "data", problems)
        out_dtype = result_dtype(dtype, field, problems)
        for name, value in (("lmax", lmax), ("mmax", mmax)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                problems.add(f"{name}={value!r}: expected a positive int or None")
        names = {"grid": (grid, ("legendre-gauss", "equiangular", "lobatto")),
                 "convention": (convention, ("ace", "full")),
                 "truncation": (truncation, ("torch-harmonics-0.8", "triangular")),
                 "mode": (mode, ("automatic", "field-owners", "transposes"))}
        for name, (value, known) in names.items():
            if value not in known:
                problems.add(f"{name}={value!r}: expected one of {', '.join(known)}")
        ok = not problems
        values = _core.spherical_power_spectrum(
            self._mesh, problems.text(), field.signature(), field.buffer if ok else None, grid if ok else "",
            truncation if ok else "", (lmax or 0) if ok else 0, (mmax or 0) if ok else 0, convention if ok else "",
            mode if ok else "")
        values = np.frombuffer(values, dtype=np.float64).astype(out_dtype)
        return _arrays.like(values.reshape(field.leading + (-1,)), data)

    def zonal_power_spectrum(self, data, lat=None, weighting="none", dtype=None):
        """The zonal power per wavenumber of each local row, ``(..., h_local, w // 2 + 1)``, computed in float64 and
        rounded once to the input's dtype (``dtype``: float32 or float64 to ask for another):
        ``w_k f_m |rfft(x)_m / w|^2``, f_m = 1 at m = 0 and 2 elsewhere. ``weighting``: "none", "cos-lat"
        (Makani) or "circumference" (WeatherBench 2's zonal energy spectrum), which need ``lat``, the latitudes of
        this rank's rows in degrees. Collective over ``lon``."""
        problems = Problems()
        field = Field(data, "data", problems)
        out_dtype = result_dtype(dtype, field, problems)
        if weighting not in ("none", "cos-lat", "circumference"):
            problems.add(f"weighting={weighting!r}: expected one of none, cos-lat, circumference")
        lat_values = None
        if lat is not None:
            given = _arrays.as_numpy(lat, "lat", problems)
            lat_values = [float(v) for v in np.asarray(given, dtype=np.float64).ravel()]
        elif weighting != "none":
            problems.add(f"lat: needed for weighting={weighting!r}")
        ok = not problems
        values = _core.zonal_power_spectrum(self._mesh, problems.text(), field.signature(),
                                            field.buffer if ok else None, weighting if ok else "none",
                                            lat_values if ok else None)
        values = np.frombuffer(values, dtype=np.float64).astype(out_dtype)
        return _arrays.like(values.reshape(field.leading + (field.rows, -1)), data)

    def smooth_flood_fill(self, data, num_steps=4, blur_kernel_size=5, blur_sigma=1.0):
        """ACE's NaN fill before a spectral transform (``fme.core.fill.SmoothFloodFill``) on shards: each field's NaN
        points far from valid ones to the field's mean, the others grown in from their neighbours for ``num_steps``
        steps, then blended with a Gaussian blur across the boundary; a field without NaN is returned as it is. The
        input's shape and dtype (computed in float64, rounded once), the serial answer bit for bit on every mesh
        (docs/spectrum.md). Each field uses its own NaN points (ACE caches the first field's per variable and requires
        them not to change). Collective over ``spatial``."""
        problems = Problems()
        field = Field(data, "data", problems)
        for name, value in (("num_steps", num_steps), ("blur_kernel_size", blur_kernel_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                problems.add(f"{name}={value!r}: expected an int")
        if not isinstance(blur_sigma, (int, float)) or isinstance(blur_sigma, bool):
            problems.add(f"blur_sigma={blur_sigma!r}: expected a number")
        ok = not problems
        values = _core.smooth_flood_fill(self._mesh, problems.text(), field.signature(), field.buffer if ok else None,
                                         num_steps if ok else 0, blur_kernel_size if ok else 1,
                                         float(blur_sigma) if ok else 1.0)
        values = np.frombuffer(values, dtype=np.float64).astype(field.dtype)
        return _arrays.like(values.reshape(field.leading + (field.rows, field.cols)), data)

    # ----- the halo exchange and the gradient magnitude -----

    def halo_exchange(self, data, width=1, periodic_lon=True, pole="zero"):
        """The shard ``(..., h_local, w_local)`` padded by ``width`` cells on every side with its neighbours' values,
        corners included, ``(..., h_local + 2 width, w_local + 2 width)``, in the input's dtype: longitude wraps
        across ranks (``periodic_lon``; else zeros beyond the first and last columns), and beyond the poles
        ``pole`` gives zeros (``"zero"``), the edge row repeated (``"replicate"``) or, for fields on a regular
        global grid, the rows across the pole shifted by half the longitudes (``"across_pole"``). Any width up to
        the grid's size: where a neighbour's shard is thinner than ``width`` (uneven div_up splits), the halo comes
        from several ranks. A tensor that requires grad gets the adjoint as its backward: each halo cell's gradient
        is added into the rank that owns the cell. Collective over ``spatial`` (messages with the ranks that hold
        the halo only)."""
        if _autograd.wanted(data):
            return _autograd.halo(lambda t: self._halo(t, width, periodic_lon, pole, False),
                                  lambda g: self._halo(g, width, periodic_lon, pole, True), data)
        return self._halo(data, width, periodic_lon, pole, False)

    def _halo(self, data, width, periodic_lon, pole, adjoint):
        problems = Problems()
        field = Field(data, "grad" if adjoint else "data", problems)
        if not isinstance(width, numbers.Integral) or isinstance(width, bool):
            problems.add(f"width={width!r}: expected an int")
        if pole not in ("zero", "replicate", "across_pole"):
            problems.add(f"pole={pole!r}: expected one of zero, replicate, across_pole")
        ok = not problems
        kernel = _core.padded_halo_adjoint if adjoint else _core.padded_halo
        values = kernel(self._mesh, problems.text(), field.signature(bool(periodic_lon), pole if ok else "", adjoint),
                        field.buffer if ok else None, int(width) if ok else 0, bool(periodic_lon),
                        pole if ok else "zero")
        grow = -2 * int(width) if adjoint else 2 * int(width)
        shape = field.leading + (field.rows + grow, field.cols + grow)
        out = _arrays.like(np.frombuffer(values, dtype=field.dtype).reshape(shape).copy(), data)
        return out.to(data.dtype) if _arrays.is_half(data) else out  # values moved, not formed: their own dtype

    def gradient_magnitude(self, tensor, dim=(-2, -1)):
        """``sqrt(g_lat**2 + g_lon**2)`` at this rank's points, torch.gradient's rule (unit spacing,
        one-sided at the grid's edges), the input's shape and dtype. Collective over ``spatial`` (one halo
        exchange; differentiated, its backward one more, the adjoint)."""
        if differentiable(dim, tensor):
            adjoint = _device_gradient if self._device.takes(tensor) else _gradients
            return _autograd.elementwise(lambda t: self.gradient_magnitude(t, dim),
                                         functools.partial(adjoint.gradient_magnitude_backward, self), tensor)
        if self._device.takes(tensor):
            return _device_gradient.gradient_magnitude(self, tensor, dim)
        problems = Problems()
        field = Field(tensor, "tensor", problems)
        if field.buffer is not None:
            check_spatial_dims(dim, field.array.ndim, problems)
        out = np.empty(0, dtype=np.float64)
        with problems.catching("tensor"):  # the result, field-sized, allocated before the call's agreement
            out = np.empty(field.buffer.shape if not problems else 0, dtype=np.float64)
        ok = not problems
        _core.gradient_magnitude(
            self._mesh, problems.text(), field.signature(), field.buffer if ok else None, out.reshape(-1)
        )
        return _arrays.like(out.astype(field.dtype, copy=False).reshape(field.array.shape), tensor)

    # ----- scores of time means -----

    def _time_mean_metric(self, kernel, truth, predicted, weights, time_dim, spatial_dims):
        problems = Problems()
        t = Field(truth, "truth", problems)
        p = Field(predicted, "predicted", problems)
        ntime = 0
        if t.buffer is not None and p.buffer is not None:
            ndim = t.array.ndim
            normal, message = normalise_dims(time_dim, ndim, "time_dim")
            if t.array.shape != p.array.shape or t.dtype != p.dtype:
                problems.add(
                    f"predicted: {tuple(p.array.shape)} {p.dtype} differs from truth's {tuple(t.array.shape)} {t.dtype}"
                )
            elif message or len(normal) != 1 or normal[0] >= ndim - 2:
                problems.add(message or f"time_dim={time_dim!r}: must name one leading dim of a {ndim}-dim tensor")
            else:
                check_spatial_dims(spatial_dims, ndim, problems, "spatial_dims")
                # Time slowest, as the library reads it: a copy only when time_dim is not the first dim.
                axis = normal[0]
                ntime = t.array.shape[axis]
                if ntime < 1:
                    problems.add(f"time_dim={time_dim!r}: the time dim is empty")
                channels = t.channels  # ntime x the other leading dims, time slowest after the move
                with problems.catching("truth and predicted"):  # the copies, before the call's agreement
                    t.buffer = _arrays.contiguous(np.moveaxis(t.array, axis, 0)).reshape(channels, t.rows, t.cols)
                    p.buffer = _arrays.contiguous(np.moveaxis(p.array, axis, 0)).reshape(channels, t.rows, t.cols)
                t.leading = t.leading[:axis] + t.leading[axis + 1:]
        w, form = weights_buffer(weights, t, problems)
        ok = not problems
        out = np.empty(t.channels // ntime if ok and ntime else 0, dtype=np.float64)
        signature = t.signature(weights is None, ntime)
        kernel(self._mesh, problems.text(), signature, t.buffer if ok else None, p.buffer if ok else None, w, form,
               ntime, out)
        return metric_result(out, t)

    def rmse_of_time_mean(self, truth, predicted, weights=None, time_dim=0, spatial_dims=(-2, -1)):
        """The RMSE over space of the time means (over ``time_dim``) of truth and prediction. Collective over
        ``spatial``."""
        return self._time_mean_metric(_core.rmse_of_time_mean, truth, predicted, weights, time_dim, spatial_dims)

    def time_and_global_mean_bias(self, truth, predicted, weights=None, time_dim=0, spatial_dims=(-2, -1)):
        """The weighted spatial mean of (time-mean prediction - time-mean truth). Collective over ``spatial``."""
        return self._time_mean_metric(
            _core.time_and_global_mean_bias, truth, predicted, weights, time_dim, spatial_dims
        )
