"""Forecast files in ACE's layout and its variants, and an independent float64 numpy reference of every
forecast score (docs/forecast.md), for the tests of `gridshard eval` on forecasts.

ACE's `autoregressive_predictions.nc` / `autoregressive_target.nc` (fme.ace.inference.data_writer.raw):
dims `sample` and `time` (unlimited); `time(time)` int64 lead times in "microseconds"; `init_time(sample)`
int64 "microseconds since 1970-01-01" with a calendar; `valid_time(sample, time)`; `lat(lat)`, `lon(lon)`
float32 without attributes; fields float32 `(sample, time, lat, lon)` with `_FillValue` NaN and
`coordinates = "init_time valid_time"`. Ensemble members are folded into `sample`, member fastest, and the
target is repeated per member.
"""
import warnings

import netCDF4
import numpy as np

HOUR_US = 3_600_000_000
EPOCH_2020_US = 1_577_836_800 * 1_000_000  # 2020-01-01 in microseconds since 1970-01-01


class Forecast:
    """A synthetic forecast: truth[ic, lead, (level,) lat, lon] and members[ic, member, lead, ...] in float32,
    with NaN over a fixed land mask for 'sst' and one NaN point that moves with the sample. Row `k` of the
    lead-time axis is lead `k + first_lead` (x 6 hours): 0 stores the initial condition in the first row (where
    every member is the truth), 1 starts at the first forward step, as ACE's files do (the initial condition
    goes to ACE's initial_condition.nc)."""

    def __init__(self, ics=3, members=4, leads=5, nlat=13, nlon=22, seed=7, levels=0, first_lead=0,
                 init_epoch_us=EPOCH_2020_US):
        rng = np.random.default_rng(seed)
        self.ics, self.members, self.leads = ics, members, leads
        self.lat = np.linspace(-90 + 90 / nlat, 90 - 90 / nlat, nlat)
        self.lon = np.arange(nlon) * 360.0 / nlon
        la, lo = np.meshgrid(np.deg2rad(self.lat), np.deg2rad(self.lon), indexing="ij")
        self.fields = {}
        for name, base, amplitude in (("t2m", 280.0, 20.0), ("sst", 295.0, 5.0)):
            shape_tail = ((levels,) if levels and name == "t2m" else ()) + la.shape
            truth = np.empty((ics, leads) + shape_tail)
            pred = np.empty((ics, members, leads) + shape_tail)
            for i in range(ics):
                for row in range(leads):
                    lead = row + first_lead
                    pattern = base + amplitude * np.cos(la) * np.sin(lo * 2 + 0.3 * (i + lead))
                    pattern = np.broadcast_to(pattern, shape_tail) + rng.normal(0, 0.5, shape_tail)
                    truth[i, row] = pattern
                    for m in range(members):  # lead 0 is the initial condition: the truth itself
                        error = 0.3 + np.sqrt(lead) * rng.normal(0, 0.8, shape_tail)
                        pred[i, m, row] = pattern + (error if lead > 0 else 0.0)
            if name == "sst":
                land = (np.sin(3 * lo) * np.cos(2 * la)) > 0.4
                truth[..., land] = np.nan
                pred[..., land] = np.nan
                for i in range(ics):  # one prediction point that is missing in one member only
                    pred[i, i % members, 1 % leads, i % nlat, (5 * i) % nlon] = np.nan
            self.fields[name] = (truth.astype(np.float32), pred.astype(np.float32))
        self.init_times = init_epoch_us + np.arange(ics) * 24 * HOUR_US
        self.lead_us = (np.arange(leads) + first_lead) * 6 * HOUR_US


def _coordinates(ds, forecast):
    ds.createDimension("lat", len(forecast.lat))
    ds.createDimension("lon", len(forecast.lon))
    ds.createVariable("lat", "f4", ("lat",))[:] = forecast.lat
    ds.createVariable("lon", "f4", ("lon",))[:] = forecast.lon


def _times(ds, sample_dim, init_times, lead_us):
    ds.createDimension("time", None)
    time = ds.createVariable("time", "i8", ("time",))
    time.units = "microseconds"
    time[:] = lead_us
    if sample_dim:
        init = ds.createVariable("init_time", "i8", (sample_dim,))
        init.units = "microseconds since 1970-01-01"
        init.calendar = "julian"
        init[:] = init_times
        valid = ds.createVariable("valid_time", "i8", (sample_dim, "time"))
        valid.units = init.units
        valid.calendar = init.calendar
        valid[:] = init_times[:, None] + lead_us[None, :]


def _field(ds, name, dims, values):
    v = ds.createVariable(name, "f4", dims, fill_value=np.float32(np.nan))
    if "init_time" in ds.variables:
        v.coordinates = "init_time valid_time"
    v.units = "K"
    v[:] = values


def write_ace(forecast, truth_path, pred_path, with_init_time=True, truth_per_ic=False):
    """ACE's layout: members folded into `sample` (member fastest); the target repeated per member, or with
    `truth_per_ic` one target sample per initial condition."""
    m = forecast.members
    samples = forecast.ics * m
    for path, is_truth in ((truth_path, True), (pred_path, False)):
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            n = forecast.ics if (is_truth and truth_per_ic) else samples
            ds.createDimension("sample", n)
            init = np.repeat(forecast.init_times, 1 if (is_truth and truth_per_ic) else m)
            _times(ds, "sample" if with_init_time else None, init, forecast.lead_us)
            _coordinates(ds, forecast)
            for name, (truth, pred) in forecast.fields.items():
                if is_truth:
                    values = truth if truth_per_ic else np.repeat(truth, m, axis=0)
                else:
                    values = pred.reshape((samples,) + pred.shape[2:])
                dims = ("sample", "time") + (("level",) if values.ndim == 5 else ()) + ("lat", "lon")
                if values.ndim == 5 and "level" not in ds.dimensions:
                    ds.createDimension("level", values.shape[2])
                _field(ds, name, dims, values)


def write_member_dim(forecast, truth_path, pred_path, member_dim="member", with_sample=True):
    """A separate member dim: prediction (sample, member, time, lat, lon) and truth (sample, time, lat, lon);
    without `with_sample`, one initial condition: (member, time, lat, lon) and (time, lat, lon)."""
    assert with_sample or forecast.ics == 1
    for path, is_truth in ((truth_path, True), (pred_path, False)):
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            if with_sample:
                ds.createDimension("sample", forecast.ics)
            if not is_truth:
                ds.createDimension(member_dim, forecast.members)
            _times(ds, "sample" if with_sample else None, forecast.init_times, forecast.lead_us)
            _coordinates(ds, forecast)
            for name, (truth, pred) in forecast.fields.items():
                lead = ("sample",) if with_sample else ()
                if is_truth:
                    values = truth if with_sample else truth[0]
                    dims = lead + ("time",)
                else:
                    values = pred if with_sample else pred[0]
                    dims = lead + (member_dim, "time")
                extra = values.ndim - len(dims) - 2
                if extra:
                    if "level" not in ds.dimensions:
                        ds.createDimension("level", values.shape[len(dims)])
                    dims += ("level",)
                _field(ds, name, dims + ("lat", "lon"), values)


def write_climatology(forecast, path, per_lead):
    """A climatology per variable: the mean over initial conditions of the truth, per lead or over leads."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _coordinates(ds, forecast)
        if per_lead:
            ds.createDimension("time", forecast.leads)
        for name, (truth, _) in forecast.fields.items():
            with warnings.catch_warnings():  # land points are NaN at every time
                warnings.simplefilter("ignore", RuntimeWarning)
                clim = np.nanmean(truth.astype(np.float64), axis=0)  # (lead, ...)
                if not per_lead:
                    clim = np.nanmean(clim, axis=0)
            clim = np.nan_to_num(clim, nan=float(np.nanmean(clim))) - 1.0
            dims = (("time",) if per_lead else ()) + (("level",) if clim.ndim == (4 if per_lead else 3) else ())
            if "level" in dims and "level" not in ds.dimensions:
                ds.createDimension("level", clim.shape[-3])
            v = ds.createVariable(name, "f4", dims + ("lat", "lon"))
            v[:] = clim.astype(np.float32)
    return path


def write_day_of_year_climatology(forecast, path, hours=(0, 6, 12, 18)):
    """A climatology laid out as WeatherBench 2's: (hour, dayofyear, lat, lon) with coordinates hour and
    dayofyear (1 to 366). Returns a function (ic, lead) -> the field the forecast's valid time selects, found
    with cftime in the files' calendar, and the variable name it covers."""
    import cftime

    la, lo = np.meshgrid(np.deg2rad(forecast.lat), np.deg2rad(forecast.lon), indexing="ij")
    days = np.arange(1, 367)
    field = (280 + 10 * np.cos(la)[None, None] + 0.01 * days[None, :, None, None]
             + 0.1 * np.asarray(hours)[:, None, None, None] + np.sin(lo)[None, None]).astype(np.float32)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _coordinates(ds, forecast)
        ds.createDimension("hour", len(hours))
        ds.createDimension("dayofyear", len(days))
        ds.createVariable("hour", "i4", ("hour",))[:] = hours
        ds.createVariable("dayofyear", "i4", ("dayofyear",))[:] = days
        ds.createVariable("t2m", "f4", ("hour", "dayofyear", "lat", "lon"))[:] = field

    def select(ic, lead):
        when = cftime.num2date(int(forecast.init_times[ic] + forecast.lead_us[lead]),
                               "microseconds since 1970-01-01", "julian")
        return field[list(hours).index(when.hour), when.dayofyr - 1].astype(np.float64)

    return select


def write_mask(forecast, path, name="land_fraction"):
    """A fractional mask on the grid (0 to 1, NaN in one corner). Its values are the same on every CPU: numpy's
    sin and cos differ in the last bit between instruction sets (AVX-512 against AVX2), so the product is rounded
    to a multiple of 2**-20 (which a last-bit difference moves with odds of about 2**-32 a point)."""
    la, lo = np.meshgrid(forecast.lat, forecast.lon, indexing="ij")
    wave = np.round(np.sin(np.deg2rad(lo)) * np.cos(np.deg2rad(la)) * 2.0**20) / 2.0**20
    mask = np.clip(0.5 + 0.5 * wave, 0, 1)
    mask[0, 0] = np.nan
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _coordinates(ds, forecast)
        ds.createVariable(name, "f8", ("lat", "lon"))[:] = mask
    return np.nan_to_num(mask, nan=0.0)


# ------------------------------------------------------------------------------- the numpy reference

def _wmean(x, w):
    """Weighted mean over the last two axes of the points where x is finite and w > 0."""
    valid = np.isfinite(x) & (w > 0)
    return np.where(valid, x * w, 0).sum(axis=(-2, -1)) / np.where(valid, w, 0).sum(axis=(-2, -1))


def _gradient(x):
    gy, gx = np.gradient(x, axis=(-2, -1))
    return np.sqrt(gy**2 + gx**2)


def reference(forecast, weights, first_counted=1, climatology=None):
    """Every score per variable (and channel) for one region's weights `weights` (lat, lon): a dict
    name -> {"per_step": {score: [lead values]}, "time_mean": {...}}. `climatology` maps a variable to
    its climatology (lead, ...) in float64, for acc."""
    out = {}
    for name, (truth32, pred32) in forecast.fields.items():
        truth = truth32.astype(np.float64)
        pred = pred32.astype(np.float64)
        if truth.ndim == 5:  # a level dim: one channel each
            for c in range(truth.shape[2]):
                out[f"{name}[{c}]"] = _reference_channel(
                    truth[:, :, c], pred[:, :, :, c], weights, first_counted,
                    None if climatology is None else climatology[name][:, c])
        else:
            clim = None if climatology is None else climatology[name]
            out[name] = _reference_channel(truth, pred, weights, first_counted, clim)
    return out


def _reference_channel(truth, pred, w, first_counted, clim):
    ics, members, leads = pred.shape[:3]
    per_sample = {k: np.empty((ics, members, leads)) for k in (
        "weighted_rmse", "weighted_bias", "weighted_mean_gen", "weighted_mean_target", "weighted_std_gen",
        "weighted_grad_mag_percent_diff", "acc")}
    ensemble = {k: np.empty((ics, leads)) for k in ("ensemble_mean_rmse", "spread", "crps", "fair_crps")}
    for i in range(ics):
        for lead in range(leads):
            t = truth[i, lead]
            for m in range(members):
                p = pred[i, m, lead]
                pair = np.isfinite(t) & np.isfinite(p)
                tp, pp = np.where(pair, t, np.nan), np.where(pair, p, np.nan)
                s = per_sample
                s["weighted_rmse"][i, m, lead] = np.sqrt(_wmean((pp - tp) ** 2, w))
                s["weighted_bias"][i, m, lead] = _wmean(pp - tp, w)
                mean_gen = _wmean(pp, w)
                s["weighted_mean_gen"][i, m, lead] = mean_gen
                s["weighted_mean_target"][i, m, lead] = _wmean(tp, w)
                s["weighted_std_gen"][i, m, lead] = np.sqrt(_wmean((pp - mean_gen) ** 2, w))
                # ACE's rule: each field's magnitudes averaged over that field's own valid points.
                g_t, g_p = _wmean(_gradient(t), w), _wmean(_gradient(p), w)
                s["weighted_grad_mag_percent_diff"][i, m, lead] = 100 * (g_p - g_t) / g_t
                if clim is not None:
                    c = clim(i, lead) if callable(clim) else clim[lead] if clim.ndim == 3 else clim
                    valid = np.isfinite(t) & np.isfinite(p) & np.isfinite(c) & (w > 0)
                    x, y = np.where(valid, p - c, 0), np.where(valid, t - c, 0)
                    s["acc"][i, m, lead] = (w * x * y).sum() / np.sqrt((w * x * x).sum() * (w * y * y).sum())
            if members > 1:
                x = pred[i, :, lead]
                valid = np.isfinite(t) & np.all(np.isfinite(x), axis=0)
                x = np.where(valid, x, np.nan)
                y = np.where(valid, t, np.nan)
                xbar = x.mean(axis=0)
                ensemble["ensemble_mean_rmse"][i, lead] = np.sqrt(_wmean((xbar - y) ** 2, w))
                ensemble["spread"][i, lead] = np.sqrt(_wmean(x.var(axis=0, ddof=1), w))
                skill = np.abs(x - y).mean(axis=0)
                pairs = np.abs(x[:, None] - x[None, :]).sum(axis=(0, 1))
                ensemble["crps"][i, lead] = _wmean(skill - pairs / (2 * members**2), w)
                ensemble["fair_crps"][i, lead] = _wmean(skill - pairs / (2 * members * (members - 1)), w)
    per_step = {k: v.reshape(ics * members, leads).mean(axis=0) for k, v in per_sample.items()}
    if clim is None:
        del per_step["acc"]
    if members > 1:
        ens = {k: v.mean(axis=0) for k, v in ensemble.items()}
        per_step["ensemble_mean_rmse"] = ens["ensemble_mean_rmse"]
        per_step["spread"] = ens["spread"]
        per_step["spread_skill_ratio"] = ens["spread"] / ens["ensemble_mean_rmse"]
        per_step["crps"] = ens["crps"]
        per_step["fair_crps"] = ens["fair_crps"]
    # Time-mean maps over the counted leads and every sample; a point not finite at any of them is NaN.
    counted = pred[:, :, first_counted:]
    diff = counted - truth[:, None, first_counted:]
    bias_map = np.where(np.all(np.isfinite(diff), axis=(0, 1, 2)), np.nan_to_num(diff).mean(axis=(0, 1, 2)), np.nan)
    gen_map = np.where(np.all(np.isfinite(counted), axis=(0, 1, 2)), np.nan_to_num(counted).mean(axis=(0, 1, 2)),
                       np.nan)
    time_mean = {"rmse": np.sqrt(_wmean(bias_map**2, w)), "bias": _wmean(bias_map, w)}
    for k, v in per_step.items():
        time_mean[k] = v[first_counted:].mean()
    zonal_gen = np.nanmean(pred, axis=-1).reshape(ics * members, leads, -1).mean(axis=0)
    zonal_target = np.nanmean(truth, axis=-1).mean(axis=0)
    return {"per_step": per_step, "time_mean": time_mean, "gen_map": gen_map, "bias_map": bias_map,
            "zonal_gen": zonal_gen, "zonal_error": zonal_gen - zonal_target}


def ace_time_mean(forecast, name, weights):
    """ACE's TimeMeanAggregator (fme.ace.aggregator.inference.time_mean) on variable `name` of `forecast` as
    ACE's files hold it: the per-point means over every sample and every row it is given (every forward
    step; ACE's files start at lead 1), then the area-weighted RMSE and bias of gen minus target, in float64.
    NaN propagates, as in torch: use it on a variable without missing values."""
    truth, pred = (a.astype(np.float64) for a in forecast.fields[name])
    samples = forecast.ics * forecast.members
    gen = pred.reshape((samples,) + pred.shape[2:]).mean(axis=(0, 1))
    target = np.repeat(truth, forecast.members, axis=0).mean(axis=(0, 1))
    w = weights / weights.sum()
    return {"rmse": float(np.sqrt((w * (gen - target) ** 2).sum())), "bias": float((w * (gen - target)).sum())}


def cos_lat_weights(forecast):
    return np.broadcast_to(np.cos(np.deg2rad(forecast.lat.astype(np.float32).astype(np.float64)))[:, None],
                           (len(forecast.lat), len(forecast.lon)))


def box_weights(forecast, south, north, west, east):
    lat = forecast.lat.astype(np.float32).astype(np.float64)
    lon = forecast.lon.astype(np.float32).astype(np.float64) % 360
    w0, e0 = west % 360, east % 360
    if abs(east - west) >= 360:
        in_lon = np.ones_like(lon, dtype=bool)
    else:
        in_lon = (lon >= w0) & (lon <= e0) if w0 <= e0 else (lon >= w0) | (lon <= e0)
    inside = ((lat >= south) & (lat <= north))[:, None] & in_lon[None, :]
    return np.where(inside, cos_lat_weights(forecast), 0.0)
