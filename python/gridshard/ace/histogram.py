"""ACE's histogram metric in the drop-in (fme's ``HistogramAggregator``): its keys and its file, from
``gridshard.Aggregator``'s histograms (the library's evaluation layer: every window's range agreed over the ranks,
ACE's bins, the counts summed exactly, the same bits on every mesh). No numerics here: the values are the library's."""
import numpy as np

from ..aggregator import registered_scores
from .calendar import chosen


def _keys():
    """The registry's histogram percentiles with ACE's keys: {key: ACE's key with {var}}."""
    return {s["key"]: s["ace_key"] for s in registered_scores()
            if s["report"] == "forecast" and s["family"] == "histogram" and s["ace_key"]}


def logs(metrics, scores):
    """ACE's scalar logs of its histogram metrics (``<name>/target/99.9999th-percentile/<var>`` and
    ``<name>/prediction/...``, for the variables of its ``percentile_variables``, every one without), images aside."""
    out = {}
    for metric in metrics:
        for name in chosen([metric], sorted(scores)):
            if metric.percentile_variables is not None and name not in metric.percentile_variables:
                continue
            means = scores[name]["regions"]["global"]["time_means"]
            for key, ace_key in _keys().items():
                out[metric.get_name() + ace_key[ace_key.index("/"):].replace("{var}", name)] = float(means[key])
    return out


def datasets(metrics, scores):
    """fme's histogram_diagnostics.nc of each histogram metric: per variable its counts ``(source, bin)`` and its
    ``<var>_bin_edges`` ``(source, bin_edges)``, source = target, prediction."""
    import xarray as xr

    out = {}
    for metric in metrics:
        data = {}
        for name in chosen([metric], sorted(scores)):
            histogram = scores[name]["histogram"]
            data[name] = (("source", "bin"), np.stack([histogram["target_counts"], histogram["prediction_counts"]]))
            data[f"{name}_bin_edges"] = (("source", "bin_edges"),
                                         np.stack([histogram["target_edges"], histogram["prediction_edges"]]))
        if data:
            out[metric.get_name()] = xr.Dataset(data, coords={"source": ["target", "prediction"]})
    return out
