"""ACE's calendar metrics in the drop-in (fme's ``annual``, ``seasonal``, ``enso_index`` and ``enso_coefficient``):
which of them it serves, their keys and their files, from ``gridshard.Aggregator``'s annual means, seasonal scores,
Niño 3.4 index and ENSO coefficient maps (the library's evaluation layer: exact, the same bits on every mesh). No
numerics here: the values are the library's (the ENSO coefficient's reference index is ACE's own, over each sample's
run by the library's rule, which is ACE's)."""
import datetime

import numpy as np

from .._gridshard import sample_index_series
from ..aggregator import registered_scores

# fme's AnnualMetricConfig.build: a run of more than ~2 years
_ANNUAL_MIN_DURATION = datetime.timedelta(days=730)
# fme's EnsoCoefficientMetricConfig.build: a run of more than ~5 years
_ENSO_COEFFICIENT_MIN_DURATION = datetime.timedelta(days=1800)


# fme's SEA_SURFACE_TEMPERATURE_NAMES: the variables its ENSO index is formed of
SST_NAMES = ("sst", "surface_temperature", "TS")
# fme's ipo_index DEFAULT_SST_NAMES: the variables its IPO index is formed of
IPO_NAMES = ("sst",)
# fme's IpoIndexMetricConfig.build: a run of more than MIN_YEARS_FOR_FILTERED_TPI years of 365 days
_IPO_MIN_DURATION = datetime.timedelta(days=80 * 365)


def served(ace_main, metrics, dataset_info, n_timesteps):
    """The annual, seasonal and ENSO index metrics of ``metrics`` the drop-in scores: every seasonal one, the annual
    ones where ACE's build keeps them (a run of more than 730 days; with monthly reference data, its R2 too), and the
    ENSO index ones where ACE's build keeps them (the same length, a latitude-longitude grid)."""
    from fme.ace.aggregator.inference.enso.dynamic_index import EnsoIndexMetricConfig
    from fme.core.coordinates import LatLonCoordinates

    long_enough = n_timesteps * dataset_info.timestep > _ANNUAL_MIN_DURATION
    annual = [m for m in metrics if isinstance(m, ace_main.AnnualMetricConfig) and long_enough]
    seasonal = [m for m in metrics if isinstance(m, ace_main.SeasonalMetricConfig)]
    lat_lon = isinstance(dataset_info.horizontal_coordinates, LatLonCoordinates)
    enso = [m for m in metrics if isinstance(m, EnsoIndexMetricConfig) and long_enough and lat_lon]
    return annual, seasonal, enso


def reference_path(config, annual):
    """The monthly reference data of the annual metrics (fme's AnnualMetricConfig.build: its ``reference_data``, else
    the config's ``monthly_reference_data``), a path or None."""
    for metric in annual:
        path = metric.reference_data or getattr(config, "monthly_reference_data", None)
        if path is not None:
            return str(path)
    return None


def annual_reference(path, names, box):
    """The annual option's ``reference`` from ACE's monthly reference data at ``path`` (None: none): this rank's
    ``box`` (rows, cols slices) of each of ``names`` it has over (sample, time, lat, lon), its counts per (sample,
    time) and the first sample's calendar year per time, by which ACE groups every sample (fme's
    process_monthly_reference, which refuses samples with other time axes alike)."""
    if path is None:
        return None
    import xarray as xr

    rows, cols = box
    with xr.open_dataset(path, decode_timedelta=False) as ref:
        valid_time = ref.valid_time.isel(sample=0)
        for i in range(1, ref.sizes["sample"]):
            if not valid_time.equals(ref.valid_time.isel(sample=i)):
                raise ValueError("All time axes must be the same")
        values = {n: ref[n].isel({ref[n].dims[-2]: rows, ref[n].dims[-1]: cols}).values for n in names if n in ref}
        return {"values": values, "counts": ref["counts"].values, "years": valid_time.dt.year.values}


def coefficient_served(metrics, dataset_info, n_timesteps):
    """The ENSO coefficient metrics of ``metrics`` the drop-in scores: where ACE's build keeps them (a run of more than
    1800 days on a latitude-longitude grid)."""
    from fme.ace.aggregator.inference.enso.enso_coefficient import EnsoCoefficientMetricConfig
    from fme.core.coordinates import LatLonCoordinates

    return [m for m in metrics if isinstance(m, EnsoCoefficientMetricConfig) and
            n_timesteps * dataset_info.timestep > _ENSO_COEFFICIENT_MIN_DURATION and
            isinstance(dataset_info.horizontal_coordinates, LatLonCoordinates)]


def _date_tuple(date):
    """A cftime date as (year, month, day, hour, minute, second)."""
    return (date.year, date.month, date.day, date.hour, date.minute, date.second + date.microsecond * 1e-6)


def ace_reference_index():
    """ACE's own reference Niño 3.4 index (fme's ``NINO34_INDEX`` in its ``INDEX_CALENDAR``): (dates, values,
    calendar), each date (year, month, day, hour, minute, second)."""
    from fme.ace.aggregator.inference.enso.historical_index import INDEX_CALENDAR, NINO34_INDEX

    return [(*d, 0, 0, 0.0) for d, _ in NINO34_INDEX], [float(v) for _, v in NINO34_INDEX], INDEX_CALENDAR


def coefficient_index(initial_time, n_forward_steps, timestep, members):
    """The ENSO coefficient's index per (local initial condition, lead time): ACE's own reference Niño 3.4 index over
    each sample's run by the library's rule (``gridshard.sample_index_series``, ACE's ``get_sample_index_series`` to
    the bit; NaN rows for a sample it does not cover); ACE's folded samples give one row per initial condition."""
    dates, values, calendar = ace_reference_index()
    initial = [_date_tuple(t) for t in np.asarray(initial_time.values)[::members]]
    return sample_index_series(dates, values, calendar, initial, initial_time.dt.calendar,
                               timestep.total_seconds(), n_forward_steps)


def coefficient_logs(metrics, scores):
    """ACE's ENSO coefficient logs (``<name>/rmse/<var>`` of every variable), images aside."""
    out = {}
    for metric in metrics:
        for name in sorted(scores):
            means = scores[name]["regions"]["global"]["time_means"]
            for key, ace_key in _keys("index_regression").items():
                if key in means:
                    out[_relabelled(ace_key, metric.get_name(), name)] = float(means[key])
    return out


def coefficient_datasets(metrics, scores, attributes, coords):
    """fme's enso_coefficient_diagnostics.nc of each ENSO coefficient metric: per variable its coefficient maps over
    (source = target, prediction; lat, lon), ACE's attributes (``attributes(name)``: its long name and units)."""
    import xarray as xr

    out = {}
    for metric in metrics:
        data = {}
        for name in sorted(scores):
            maps = scores[name].get("enso_coefficient_maps")
            if maps is None:
                continue
            long_name, units = attributes(name)
            data[name] = xr.DataArray(np.stack([maps["target"], maps["prediction"]]), dims=("source", "lat", "lon"),
                                      attrs={"long_name": f"{long_name} regression coefficient with Nino3.4 index",
                                             "units": f"{units} / K"})
        if data:
            out[metric.get_name()] = xr.Dataset(data, coords={"source": ["target", "prediction"], **coords})
    return out


def chosen(metrics, names):
    """The variables of ``names`` that one of ``metrics`` names (every one without a list): ACE's ``variables``
    filter, for every family the drop-in serves."""
    return [n for n in names if any(m.variables is None or n in m.variables for m in metrics)]


def _keys(family):
    """The registry's scores of ``family`` with an ACE key: {key: ACE's key with {var}}."""
    return {s["key"]: s["ace_key"] for s in registered_scores()
            if s["report"] == "forecast" and s["family"] == family and s["ace_key"]}


def _relabelled(ace_key, label, name):
    """ACE's key of a score under the metric's configured name (its first segment) for variable ``name``."""
    return label + ace_key[ace_key.index("/"):].replace("{var}", name)


def logs(annual, seasonal, enso, ipo, scores):
    """ACE's scalar logs of its annual metrics (``<name>/rmse/<var>`` and ``<name>/crps/<var>`` as its report_rmse and
    report_crps say, over more than one year), seasonal ones (``<name>/time-mean-rmse/<var>-<season>`` and over
    the four seasons), ENSO index and IPO index ones, images aside."""
    out = {}
    for metric in annual:
        for name in chosen([metric], sorted(scores)):
            means = scores[name]["regions"]["global"]["time_means"]
            for key, ace_key in _keys("annual").items():
                reported = getattr(metric, "report_" + key.split("_", 1)[1], True)
                if reported and key in means:  # the library forms them over more than one year, as ACE
                    out[_relabelled(ace_key, metric.get_name(), name)] = float(means[key])
    for metric in seasonal:
        for name in chosen([metric], sorted(scores)):
            means = scores[name]["regions"]["global"]["time_means"]
            for key, ace_key in _keys("seasonal").items():
                out[_relabelled(ace_key, metric.get_name(), name)] = float(means[key])
    for family, metrics, names in (("regional_index", enso, SST_NAMES), ("tripole_index", ipo, IPO_NAMES)):
        for metric in metrics:  # fme's PairedRegionalIndexAggregator and PairedIPOIndexAggregator, images aside
            for name in (n for n in names if n in scores):
                means = scores[name]["regions"]["global"]["time_means"]
                for key, ace_key in _keys(family).items():
                    if key in means:  # the library forms them where ACE logs them
                        out[_relabelled(ace_key, metric.get_name(), name)] = float(means[key])
    return out


def enso_datasets(enso, scores, calendar):
    """fme's enso_index_diagnostics.nc of each ENSO index metric: per SST variable its index over (source = target,
    prediction; sample; time), the time the 15th of each month in the run's ``calendar``."""
    return _index_datasets(enso, scores, calendar, "nino34_index", SST_NAMES)


def ipo_datasets(ipo, scores, calendar):
    """fme's ipo_index_diagnostics.nc of each IPO index metric: per variable ACE forms it of its unfiltered monthly
    tripole index over (source = target, prediction; sample; time), as the ENSO index's file."""
    return _index_datasets(ipo, scores, calendar, "ipo_index", IPO_NAMES)


def ipo_served(metrics, dataset_info, n_timesteps):
    """The IPO index metrics of ``metrics`` the drop-in scores: where ACE's build keeps them (a run of more than 80
    years of 365 days on a latitude-longitude grid)."""
    from fme.ace.aggregator.inference.ipo.ipo_index import IpoIndexMetricConfig
    from fme.core.coordinates import LatLonCoordinates

    return [m for m in metrics if isinstance(m, IpoIndexMetricConfig) and
            n_timesteps * dataset_info.timestep > _IPO_MIN_DURATION and
            isinstance(dataset_info.horizontal_coordinates, LatLonCoordinates)]


def _index_datasets(metrics, scores, calendar, key, names):
    """Per metric a dataset of the monthly index ``key`` of the variables of ``names``, over (source, sample, time)."""
    import cftime
    import xarray as xr

    out = {}
    for metric in metrics:
        data, time = {}, None
        for name in (n for n in names if n in scores):
            index = scores[name][key]
            time = [cftime.datetime(int(y), int(m), 15, calendar=calendar or "standard")
                    for y, m in zip(index["years"], index["months"])]
            data[name] = (("source", "sample", "time"), np.stack([index["target"], index["prediction"]]))
        if data:
            out[metric.get_name()] = xr.Dataset(data, coords={"source": ["target", "prediction"], "time": time})
    return out


def annual_datasets(annual, scores):
    """fme's annual_diagnostics.nc of each annual metric: per variable and ``counts`` (source = target, prediction;
    sample; year), the years from the first kept to the last."""
    import xarray as xr

    out = {}
    for metric in annual:
        data, years, counts = {}, None, None
        for name in chosen([metric], sorted(scores)):
            means = scores[name]["annual"]
            years, counts = means["years"], means["counts"]
            data[name] = (("source", "sample", "year"), np.stack([means["target"], means["prediction"]]))
        if data:
            data["counts"] = (("source", "sample", "year"), np.stack([counts, counts]))
            out[metric.get_name()] = xr.Dataset(data, coords={"source": ["target", "prediction"], "year": years})
    return out
