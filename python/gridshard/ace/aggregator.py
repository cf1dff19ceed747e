"""gridshard's aggregator inside ACE's inference loop: ``InferenceEvaluatorAggregatorConfig.build`` (fme.ace) made
to return ``InferenceEvaluatorAggregator`` below, by ``gridshard.ace.use_in_ace()``.

ACE's loop calls ``record_initial_condition``, ``record_batch(PairedData)`` window by window, ``flush_diagnostics``
and ``get_summary_logs``; this class answers with ACE's keys and files, its scores from ``gridshard.Aggregator``
(the library's evaluation layer), exact and the same bits on every mesh, and its maps global. The metrics it
implements are ACE's ``mean``/``mean_norm`` time series, ``mean_step_<k>`` (and ``_norm``), ``time_mean`` and
``time_mean_norm``, ``zonal_mean``, ``power_spectrum`` (ACE's NaN fill and spherical power spectrum of every
forward step, averaged, its four norm biases and power_spectrum_diagnostics.nc) and, with several members, ACE's
ensemble scores (``ensemble_step_<k>``: its almost-fair CRPS, ensemble-mean RMSE and spread-skill ratio bias per
cell, then the area mean), its mean maps (log_mean_maps), near_zero_fraction, trend, video (its extended videos too),
annual (its R2 against monthly reference data too), seasonal, ENSO index, ENSO coefficient, IPO index and histogram
metrics: every metric ACE's inference evaluator builds. A metric it does not know (one a later fme adds) is ACE's own
aggregator when the grid is not split, and is refused at build time under spatial parallelism, naming it and the
config field that turns it off. docs/ace.md has the table.
"""

import dataclasses
import os

import numpy as np

from .. import _arrays, _outputs
from .. import _gridshard as _core
from ..aggregator import Aggregator, registered_scores
from ..distributed import ArgumentError, Distributed
from . import calendar, histogram
from .backend import GridshardBackend

# ACE's power_spectrum summaries that its report_directional_bias option adds.
_DIRECTIONAL_SPECTRUM_BIASES = ("positive_norm_bias", "negative_norm_bias")


def _ace_name(score):
    """The middle segment of a score's ACE key, the name ACE logs it under (weighted_rmse of
    "mean/weighted_rmse/{var}")."""
    return score["ace_key"].split("/")[1]


@dataclasses.dataclass(frozen=True)
class _AceKeys:
    """What the drop-in logs, read from the library's registry when an aggregator is built (so a score added with
    ``gridshard.register_score`` is logged too): the per-lead series ACE's ``mean`` metrics log (``series``, and
    ``norm_series`` on the normalised fields), those its ``mean_step_<k>`` metrics log (``step``, ``norm_step``),
    ACE's ``ensemble_step_<k>`` names of the ensemble cell statistics (``ensemble``: ACE's name to the registry's
    key), ACE's names of the time-mean scores (``time_means``, ``norm_time_means``: the registry's key to ACE's name)
    and of the power spectrum's summaries (``spectrum``: the registry's keys, which are ACE's names), and of the
    near-zero fractions (``near_zero``) and of the trend's scores (``trend``), each the registry's key to ACE's
    name."""
    series: tuple
    norm_series: tuple
    step: tuple
    norm_step: tuple
    ensemble: dict
    time_means: dict
    norm_time_means: dict
    spectrum: tuple
    near_zero: dict
    trend: dict

    @classmethod
    def from_registry(cls):
        forecast = [s for s in registered_scores() if s["report"] == "forecast" and s["ace_key"]]
        deterministic = [s for s in forecast if s["family"] == "deterministic"]
        cells = {_ace_name(s): s["key"] for s in forecast
                 if s["family"] == "ensemble" and s["combination"] == "cell_statistic"}
        time_means = [s for s in forecast if s["family"] == "time_mean"]
        return cls(series=tuple(s["key"] for s in deterministic),
                   norm_series=tuple(s["key"] for s in deterministic if s["ace_normalized"]),
                   step=tuple(s["key"] for s in deterministic if s["ace_step_log"] != "none"),
                   norm_step=tuple(s["key"] for s in deterministic if s["ace_step_log"] == "fields_and_normalized"),
                   ensemble=cells,
                   time_means={s["key"]: _ace_name(s) for s in time_means},
                   norm_time_means={s["key"]: _ace_name(s) for s in time_means if s["ace_normalized"]},
                   spectrum=tuple(s["key"] for s in forecast if s["family"] == "power_spectrum"),
                   near_zero={s["key"]: _ace_name(s) for s in forecast if s["family"] == "near_zero_fraction"},
                   trend={s["key"]: _ace_name(s) for s in forecast if s["family"] == "trend"})


def _gridshard_distributed():
    """The gridshard.Distributed ACE's own ``Distributed`` runs on (use_in_ace's backend), or one over this process
    alone when ACE runs on one process. Anything else cannot be scored here: ACE's torch backend's ranks are not
    gridshard's."""
    from fme.core.distributed import Distributed as AceDistributed

    backend = AceDistributed.get_instance()._distributed
    if isinstance(backend, GridshardBackend):
        return backend.distributed
    if AceDistributed.get_instance().world_size == 1:
        from mpi4py import MPI

        return Distributed(MPI.COMM_SELF)
    raise ValueError("gridshard's inference aggregator runs on gridshard's ACE backend: set "
                     "FME_DISTRIBUTED_BACKEND=gridshard (gridshard.ace.use_in_ace()) for a run on several ranks")


def _mask_provider(dataset_info):
    """ACE's spatial mask provider of the dataset (its area means take weights times a variable's mask), or None."""
    from fme.core.dataset_info import MissingDatasetInfo

    try:
        return dataset_info.spatial_mask_provider
    except MissingDatasetInfo:
        return None


def _dtype_of(value):
    """The dtype the aggregator scores a tensor or array in: its own (float32, float64); a 16-bit one widened to
    float32, as every gridshard call widens it."""
    if _arrays.is_tensor(value):
        return np.dtype(np.float32) if _arrays.is_half(value) else np.dtype(str(value.dtype).replace("torch.", ""))
    return np.asarray(value).dtype


def _field_of(config, metric):
    """The config field that holds ``metric`` ("power_spectrum", "ensembles[0]")."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is metric:
            return field.name
        if isinstance(value, (list, tuple)):
            for k, item in enumerate(value):
                if item is metric:
                    return f"{field.name}[{k}]"
    return metric.get_name()


class InferenceEvaluatorAggregator:
    """ACE's ``InferenceEvaluatorAggregator`` (fme.ace.aggregator.inference.main) on gridshard: the arguments of
    ``InferenceEvaluatorAggregatorConfig.build``. Collective over the world where ACE's is (build, the records,
    the summary and the files)."""

    def __init__(self, config, dataset_info, n_ic_steps, n_forward_steps, initial_time, normalize, output_dir=None,
                 channel_mean_names=None, save_diagnostics=True, n_ensemble_per_ic=1, enable_time_series=True):
        from fme.ace.aggregator.inference import main as ace_main

        if save_diagnostics and output_dir is None:
            raise ValueError("Output directory must be set to save diagnostics")
        if n_ic_steps != 1:
            raise ValueError(f"gridshard's inference aggregator takes one initial-condition step, got n_ic_steps="
                             f"{n_ic_steps}")
        self.distributed = _gridshard_distributed()
        self.n_ensemble_per_ic = n_ensemble_per_ic
        self._n_forward_steps = int(n_forward_steps)
        self._normalize = normalize
        self._output_dir = output_dir
        self._save_diagnostics = save_diagnostics
        self._channel_mean_names = None if channel_mean_names is None else list(channel_mean_names)
        coordinates = dataset_info.horizontal_coordinates
        self._coords = {k: np.asarray(v) for k, v in coordinates.coords.items()}
        self._lat = np.asarray(coordinates.coords["lat"], dtype=np.float64)
        self._nlon = len(coordinates.coords["lon"])
        self._metadata = getattr(dataset_info, "variable_metadata", None) or {}
        self._mask_provider = _mask_provider(dataset_info)

        metrics = config._get_metrics()
        if not enable_time_series:
            metrics = [m for m in metrics if not isinstance(m, ace_main.MeanMetricConfig)]
        implemented = (ace_main.MeanMetricConfig, ace_main.StepMeanMetricConfig, ace_main.TimeMeanMetricConfig,
                       ace_main.ZonalMeanMetricConfig, ace_main.PowerSpectrumMetricConfig,
                       ace_main.NearZeroFractionMetricConfig, ace_main.HistogramMetricConfig)
        # ACE's trend where ACE's build keeps it: two forward steps at least (it drops, or with strict raises, else)
        trend_served = [m for m in metrics if isinstance(m, ace_main.TrendMetricConfig) and n_forward_steps >= 2]
        # ACE's video, its extended videos too
        video_served = [m for m in metrics if isinstance(m, ace_main.VideoMetricConfig)]
        # ACE's annual (where its build keeps it) and seasonal metrics
        annual_served, seasonal_served, enso_served = calendar.served(ace_main, metrics, dataset_info,
                                                                      n_ic_steps + n_forward_steps)
        coefficient_served = calendar.coefficient_served(metrics, dataset_info, n_ic_steps + n_forward_steps)
        ipo_served = calendar.ipo_served(metrics, dataset_info, n_ic_steps + n_forward_steps)
        self._timestep = dataset_info.timestep
        self._annual_reference = calendar.reference_path(config, annual_served)
        self._initial_time = initial_time
        served = (trend_served + video_served + annual_served + seasonal_served + enso_served + coefficient_served +
                  ipo_served)
        ours = [m for m in metrics if isinstance(m, implemented) or self._ensemble_served(ace_main, m, n_forward_steps)
                or any(m is t for t in served)]
        rest = [m for m in metrics if not any(m is o for o in ours)]
        self._series = [m for m in ours if isinstance(m, ace_main.MeanMetricConfig)]
        self._steps = [m for m in ours if isinstance(m, ace_main.StepMeanMetricConfig) and m.step <= n_forward_steps]
        self._time_means = [m for m in ours if isinstance(m, ace_main.TimeMeanMetricConfig)]
        self._zonal = [m for m in ours if isinstance(m, ace_main.ZonalMeanMetricConfig)]
        self._ensembles = [m for m in ours if isinstance(m, ace_main.EnsembleMetricConfig)]
        self._spectra = [m for m in ours if isinstance(m, ace_main.PowerSpectrumMetricConfig)]
        self._near_zero = [m for m in ours if isinstance(m, ace_main.NearZeroFractionMetricConfig)]
        self._trends = [m for m in ours if isinstance(m, ace_main.TrendMetricConfig)]
        self._videos = [m for m in ours if isinstance(m, ace_main.VideoMetricConfig)]
        self._annual = [m for m in ours if isinstance(m, ace_main.AnnualMetricConfig)]
        self._seasonal = [m for m in ours if isinstance(m, ace_main.SeasonalMetricConfig)]
        self._enso = [m for m in ours if any(m is e for e in enso_served)]
        self._histograms = [m for m in ours if isinstance(m, ace_main.HistogramMetricConfig)]
        self._coefficients = [m for m in ours if any(m is c for c in coefficient_served)]
        self._ipo = [m for m in ours if any(m is i for i in ipo_served)]
        self._calendar = None  # the run's calendar, from its first dates
        for zonal in self._zonal:
            if n_ic_steps + n_forward_steps > zonal.zonal_mean_max_size:
                raise ValueError(f"zonal_mean: {n_ic_steps + n_forward_steps} steps exceed zonal_mean_max_size="
                                 f"{zonal.zonal_mean_max_size}, which ACE coarsens in time and gridshard does not; "
                                 f"raise zonal_mean.zonal_mean_max_size or set zonal_mean.enabled=False")
        build_args = dict(dataset_info=dataset_info, n_ic_steps=n_ic_steps, n_forward_steps=n_forward_steps,
                          initial_time=initial_time, normalize=normalize, output_dir=output_dir,
                          channel_mean_names=channel_mean_names, n_ensemble_per_ic=n_ensemble_per_ic)
        self._ace = None
        if self.distributed.has_spatial_parallelism:
            for metric in rest:
                if self._active_on_shards(ace_main, metric, build_args):
                    field = _field_of(config, metric)
                    off = f"{field}.enabled=False"
                    raise ValueError(
                        f"InferenceEvaluatorAggregatorConfig.{field} ({type(metric).__name__}, "
                        f"'{metric.get_name()}'): not implemented by gridshard under spatial parallelism "
                        f"(mesh {'x'.join(map(str, self.distributed.mesh_shape))}); set {off}")
        elif rest:
            self._ace = ace_main.build_inference_evaluator_aggregator(
                metrics=rest, save_diagnostics=save_diagnostics, raise_on_unsupported=False,
                step_diagnostics=config.step_diagnostics, **build_args)
        self._keys = _AceKeys.from_registry()
        self._denorm = self._norm = None
        self._finished = None
        self._seen = 0

    def _ensemble_served(self, ace_main, metric, n_forward_steps):
        """Whether gridshard scores ``metric``: an ensemble metric of a run with members at a step the run has (its
        mean maps too, with log_mean_maps); ACE's build drops one at a later step, and so does this one."""
        return (isinstance(metric, ace_main.EnsembleMetricConfig) and self.n_ensemble_per_ic > 1 and
                metric.step <= n_forward_steps)

    @staticmethod
    def _active_on_shards(ace_main, metric, build_args):
        """Whether ACE would run ``metric`` in this run: ensembles only with members, the rest where ACE's own build
        keeps it (a run too short for ENSO or annual means drops them)."""
        if isinstance(metric, ace_main.EnsembleMetricConfig):
            return build_args["n_ensemble_per_ic"] > 1 and metric.step <= build_args["n_forward_steps"]
        try:
            built = ace_main.build_inference_evaluator_aggregator(metrics=[metric], save_diagnostics=False,
                                                                  raise_on_unsupported=False, **build_args)
        except Exception:  # noqa: BLE001 - a metric ACE cannot build here is one that would run broken
            return True
        return bool(built._aggregators) or bool(built._ensemble_aggregators)

    def _local_masks(self, names):
        """{name: this rank's box of ACE's mask of the variable} for the variables the dataset masks (ACE's provider
        gives the global mask, or the box of one localised to this rank)."""
        if self._mask_provider is None:
            return {}
        rows, cols = self.distributed.get_local_slices((len(self._lat), self._nlon))
        box = (rows.stop - rows.start, cols.stop - cols.start)
        masks = {}
        for name in names:
            mask = self._mask_provider.get_mask_tensor_for(name)
            if mask is None:
                continue
            values = np.asarray(mask.detach().cpu().numpy() if _arrays.is_tensor(mask) else mask, dtype=np.float64)
            if values.shape == (len(self._lat), self._nlon):
                values = values[rows, cols]
            elif values.shape != box:
                raise ValueError(f"the mask of {name!r}: shape {values.shape}, neither the grid's "
                                 f"{(len(self._lat), self._nlon)} nor this rank's box {box}")
            masks[name] = values
        return masks

    # The aggregators, made at the initial condition, when the variables, their dtype and the local samples are known.
    def _start(self, target, prediction):
        names = [n for n in prediction if n in target]
        dist = self.distributed
        members = self.n_ensemble_per_ic
        # Everything that can fail on one rank is agreed over the world before the aggregators' collectives.
        problems, samples, dtype, masks = _arrays.Problems(), 0, np.dtype(np.float32), {}
        with problems.catching("target"):
            first = next(iter(target.values()))
            samples, dtype = int(first.shape[0]), _dtype_of(first)
            if samples % members:
                problems.add(f"record: {samples} samples on rank {dist.rank} are not whole ensembles of "
                             f"n_ensemble_per_ic={members}")
        with problems.catching("the dataset's masks"):
            masks = self._local_masks(names)
        reference = None
        with problems.catching("annual reference_data"):  # ACE's monthly reference data, this rank's box
            reference = calendar.annual_reference(self._annual_reference, calendar.chosen(self._annual, names),
                                                  dist.get_local_slices((len(self._lat), self._nlon)))
        failed = [text for text in dist._comm.allgather(problems.text()) if text]
        if failed:
            raise _arrays.agreed_error(failed[0])
        local = samples // members  # ACE folds each initial condition's members into consecutive samples
        common = dict(lat=self._lat, nlon=self._nlon, initial_conditions=local * dist.total_data_parallel_ranks,
                      lead_times=1 + self._n_forward_steps, members=members, maps=True, dtype=dtype,
                      first_initial_condition=dist.data_parallel_rank * local, local_initial_conditions=local,
                      policy="propagate", lead_ensemble=False)  # ACE's sums let a missing value through
        steps = {target: [m.step for m in self._ensembles if m.target == target] for target in ("denorm", "norm")}
        maps_of = {target: any(m.log_mean_maps for m in self._ensembles if m.target == target)
                   for target in ("denorm", "norm")}
        wants_denorm = any(m.target == "denorm" for m in self._series + self._steps + self._time_means) or \
            bool(self._zonal) or bool(steps["denorm"]) or bool(self._spectra) or bool(self._near_zero) or \
            bool(self._trends) or bool(self._videos) or bool(self._annual) or bool(self._seasonal) or \
            bool(self._enso) or bool(self._histograms) or bool(self._coefficients) or bool(self._ipo)
        wants_norm = any(m.target == "norm" for m in self._series + self._steps + self._time_means) or \
            bool(steps["norm"])
        if wants_denorm:
            # ACE's power spectrum of the variables its metrics name (every one without a list): its fill, its
            # transform (legendre-gauss, torch-harmonics 0.8.0's truncation), each order once.
            spectral = calendar.chosen(self._spectra, names)
            near_zero = None
            for m in self._near_zero:  # ACE's config fields (ACE's config has one such metric); as ACE's filter
                # does, the names of variables the data lacks are left out
                near_zero = {"variables": calendar.chosen([m], names),
                             "eps": m.eps, "include_maps": m.include_maps,
                             "per_variable_eps": {n: e for n, e in (m.per_variable_eps or {}).items() if n in names}}
                near_zero = near_zero if near_zero["variables"] else None
            # ACE's trend, video, annual and seasonal means of the variables their metrics name (every one without a
            # list) that the data has
            trended, videoed = calendar.chosen(self._trends, names), calendar.chosen(self._videos, names)
            annualized, seasoned = calendar.chosen(self._annual, names), calendar.chosen(self._seasonal, names)
            indexed = [n for n in names if n in calendar.SST_NAMES] if self._enso else []
            histogrammed = calendar.chosen(self._histograms, names)
            tripoled = [n for n in names if n in calendar.IPO_NAMES] if self._ipo else []
            coefficient = {"index": calendar.coefficient_index(self._initial_time, self._n_forward_steps,
                                                               self._timestep, members)} if self._coefficients else None
            self._denorm = Aggregator(dist, names, ensemble_cell_leads=steps["denorm"],
                                      ensemble_cell_maps=maps_of["denorm"],
                                      spectrum={"variables": spectral} if spectral else None, masks=masks,
                                      near_zero_fraction=near_zero,
                                      trend={"variables": trended} if trended else None,
                                      video={"variables": videoed, "enable_extended_videos": any(
                                          m.enable_extended_videos for m in self._videos)} if videoed else None,
                                      annual={"variables": annualized, "timestep": self._timestep,
                                              "reference": reference} if annualized else None,
                                      seasonal={"variables": seasoned} if seasoned else None,
                                      nino34_index={"variables": indexed, "lon": self._coords["lon"]} if indexed
                                      else None,
                                      histogram={"variables": histogrammed} if histogrammed else None,
                                      enso_coefficient=coefficient,
                                      ipo_index={"variables": tripoled, "lon": self._coords["lon"]} if tripoled
                                      else None, **common)
        if wants_norm:
            norm_names = [n for n in self._normalize({n: target[n] for n in names})]
            self._norm = Aggregator(dist, norm_names, scores=self._keys.norm_series,
                                    ensemble_cell_leads=steps["norm"], ensemble_cell_maps=maps_of["norm"],
                                    masks={n: m for n, m in masks.items() if n in norm_names},
                                    **common)  # no gradient: ACE logs none

    def _unfolded(self, target, prediction):
        """ACE's folded samples (initial condition i's members are samples i*M..i*M+M-1) as gridshard's: the
        target once per initial condition, the prediction ``(ic, member, time, h, w)``. Raises on every rank
        (one allgather over the world) where a rank's members of an initial condition have different targets."""
        members = self.n_ensemble_per_ic
        if members == 1:
            return target, prediction
        unfold = lambda v: v.reshape((v.shape[0] // members, members) + tuple(v.shape[1:]))  # noqa: E731
        truth, problem = {}, ""
        for name, value in target.items():
            t = unfold(value)
            first = t[:, :1]
            same = ((t == first) | ((t != t) & (first != first))).all()
            if not bool(same) and not problem:
                problem = (f"target[{name!r}]: the {members} members of an initial condition have different targets, "
                           f"and ACE's ensemble repeats one")
            truth[name] = t[:, 0]
        failed = [text for text in self.distributed._comm.allgather(problem) if text]
        if failed:
            raise ValueError(failed[0])
        return truth, {name: unfold(value) for name, value in prediction.items()}

    @staticmethod
    def _time_of(initial_condition):
        """The times ``(sample, 1)`` of ACE's initial condition (a PairedData or a PrognosticState)."""
        time = getattr(initial_condition, "time", None)
        return time if time is not None else initial_condition.as_batch_data().time

    def _dates(self, time):
        """The valid dates ``(initial condition, time)`` of ACE's ``(sample, time)`` times (cftime, in the run's
        calendar; an initial condition's members share its dates): the trend's, annual and seasonal means' times."""
        if self._calendar is None:
            self._calendar = time.dt.calendar
        return np.asarray(time.values)[::self.n_ensemble_per_ic]

    def _record(self, target, prediction, first_lead, time):
        target, prediction = self._unfolded(target, prediction)
        if self._denorm is not None:
            self._denorm.record(target, prediction, first_lead=first_lead,
                                times=self._dates(time) if self._trends or self._annual or self._seasonal or self._enso
                                or self._ipo else None)
        if self._norm is not None:
            self._norm.record(self._normalize(target), self._normalize(prediction), first_lead=first_lead)
        stop = first_lead + int(next(iter(target.values())).shape[1])
        rows = [{} for _ in range(first_lead, stop)]
        for metric in self._series:
            aggregator, keys = ((self._denorm, self._keys.series) if metric.target == "denorm"
                                else (self._norm, self._keys.norm_series))
            label = metric.get_name()
            for name, series in aggregator.lead_scores(first_lead, stop).items():
                for key in keys:
                    for row, value in zip(rows, series[key]):
                        row[f"{label}/{key}/{name}"] = float(value)
            for row, step in zip(rows, range(first_lead, stop)):
                row[f"{label}/forecast_step"] = step
        return rows

    @staticmethod
    def _merged(ours, theirs):
        if theirs is None:
            return ours
        rows = [dict(row) for row in ours]
        for k, row in enumerate(theirs):
            if k < len(rows):
                rows[k].update(row)
            else:
                rows.append(dict(row))
        return rows

    def record_initial_condition(self, initial_condition):
        """Row 0 of the time series: the initial condition against its target (a PrognosticState: against itself).
        Not a forecast step: the time means and the zonal means leave it out, as ACE's."""
        from fme.ace.data_loading.batch_data import PairedData

        if self._seen != 0:
            raise RuntimeError("record_initial_condition may only be called once, before recording any batches")
        if isinstance(initial_condition, PairedData):
            target, prediction = initial_condition.target, initial_condition.prediction
        else:
            target = prediction = initial_condition.as_batch_data().data
        times = int(next(iter(target.values())).shape[1])
        if times != 1:
            raise ValueError(f"Expected 1 initial condition steps, but got {times}")
        self._start(target, prediction)
        rows = self._record(target, prediction, 0, self._time_of(initial_condition))
        self._seen = 1
        theirs = self._ace.record_initial_condition(initial_condition) if self._ace is not None else None
        return self._merged(rows, theirs)

    def record_batch(self, data):
        """One window of forward steps (``PairedData``, tensors ``(sample, time, h_local, w_local)``)."""
        if len(data.prediction) == 0:
            raise ValueError("No prediction values in data")
        if len(data.target) == 0:
            raise ValueError("No target values in data")
        if self._seen == 0:
            raise RuntimeError("gridshard's inference aggregator needs record_initial_condition first")
        rows = self._record(data.target, data.prediction, self._seen, data.time)
        self._seen += int(data.time.shape[1])
        theirs = self._ace.record_batch(data) if self._ace is not None else None
        return self._merged(rows, theirs)

    @property
    def log_time_series(self):
        return bool(self._series) or (self._ace is not None and self._ace.log_time_series)

    def _scores(self):
        """Every score, finished once (collective over the world)."""
        if self._finished is None:
            self._finished = (self._denorm.finish() if self._denorm is not None else None,
                              self._norm.finish() if self._norm is not None else None)
        return self._finished

    def get_summary(self):
        from fme.core.generics.aggregator import InferenceSummary

        if self._seen == 0:
            raise RuntimeError("No data recorded")  # ACE's message
        denorm, norm = self._scores()
        logs = {}
        for metric in self._time_means:
            label = metric.get_name()
            scores, names = ((denorm, self._keys.time_means) if metric.target == "denorm"
                             else (norm, self._keys.norm_time_means))
            for key, ace_name in names.items():
                values = {name: float(channel["regions"]["global"]["time_means"][key])
                          for name, channel in scores.items()}
                logs.update({f"{label}/{ace_name}/{name}": value for name, value in values.items()})
                if metric.target == "norm":
                    logs[f"{label}/{ace_name}/channel_mean"] = self._channel_mean(values, scores)
        for metric in self._steps:
            for (key, name), value in self._step_values(metric, denorm, norm).items():
                logs[f"{metric.get_name()}/{key}/{name}"] = value
        for metric in self._ensembles:
            logs.update(self._ensemble_logs(metric, denorm if metric.target == "denorm" else norm))
        for metric in self._spectra:
            keys = [key for key in self._keys.spectrum
                    if metric.report_directional_bias or key not in _DIRECTIONAL_SPECTRUM_BIASES]
            for name in self._spectral(metric, denorm):
                means = denorm[name]["regions"]["global"]["time_means"]
                logs.update({f"{metric.get_name()}/{key}/{name}": float(means[key]) for key in keys})
        for metric in self._near_zero:
            logs.update(self._near_zero_logs(metric, denorm))
        for metric in self._trends:  # fme's TrendEvaluatorAggregator.get_logs, images aside
            for name in self._trended(metric, denorm):
                means = denorm[name]["regions"]["global"]["time_means"]
                logs.update({f"{metric.get_name()}/{ace_name}/{name}": float(means[key])
                             for key, ace_name in self._keys.trend.items()})
        logs.update(calendar.logs(self._annual, self._seasonal, self._enso, self._ipo, denorm or {}))
        logs.update(histogram.logs(self._histograms, denorm or {}))
        logs.update(calendar.coefficient_logs(self._coefficients, denorm or {}))
        if self._ace is not None:
            logs.update(self._ace.get_summary().logs)
        return InferenceSummary(logs=logs, loss=logs.get("time_mean_norm/rmse/channel_mean"))

    def _step_values(self, metric, denorm, norm):
        """``{(key, variable): value}`` of a ``mean_step_<k>`` metric: ACE's scores at forward step k (the registry's
        that ACE's metric logs: denorm, rmse, bias and the gradient score; norm, rmse, with each one's channel mean
        under the name ``channel_mean``)."""
        scores, keys = (denorm, self._keys.step) if metric.target == "denorm" else (norm, self._keys.norm_step)
        values = {(key, name): float(channel["regions"]["global"]["per_lead"][key][metric.step, 0])
                  for name, channel in scores.items() for key in keys}
        if metric.target == "norm":
            for key in keys:
                per_variable = {name: values[(key, name)] for name in scores}
                values[(key, "channel_mean")] = self._channel_mean(per_variable, scores)
        return values

    def _ensemble_logs(self, metric, scores):
        """ACE's ``<name>/{crps,ensemble_mean_rmse,ssr_bias}/<var>`` of an ensemble metric at its step (and, on the
        normalised fields, each one's ``channel_mean``)."""
        label, logs = metric.get_name(), {}
        for ace_key, key in sorted(self._keys.ensemble.items()):
            values = {name: float(channel["regions"]["global"]["at_leads"][key][metric.step])
                      for name, channel in scores.items()}
            logs.update({f"{label}/{ace_key}/{name}": value for name, value in values.items()})
            if metric.target == "norm":
                logs[f"{label}/{ace_key}/channel_mean"] = self._channel_mean(
                    values, scores, metric.channel_mean_names or self._channel_mean_names)
            for name, channel in scores.items() if metric.log_mean_maps else ():  # the global maps, on world rank 0
                mean_map = channel["cell_maps"].get(key, {}).get(metric.step)
                if mean_map is not None:
                    logs[f"{label}/{ace_key}/mean_map/{name}"] = self._mean_map_image(ace_key, name, mean_map)
        return logs

    def _mean_map_image(self, ace_key, name, values):
        """ACE's image of an ensemble statistic's mean map (fme's ensemble aggregator: plot_paneled_data, diverging
        for the spread-skill ratio bias, its caption)."""
        from fme.ace.aggregator.plotting import plot_paneled_data

        meta = self._metadata.get(name)
        caption = (f"{meta.display_long_name(name)} ({meta.display_units()})" if meta is not None
                   else f"{name} (unknown_units)")
        return plot_paneled_data([[values]], diverging=ace_key == "ssr_bias", caption=caption)

    def _near_zero_logs(self, metric, scores):
        """ACE's ``<name>/gen/<var>`` and ``<name>/gen_minus_target/<var>`` of its near_zero_fraction metric: the
        registry's scores with an ACE key, under the metric's configured name."""
        label, logs = metric.get_name(), {}
        for name in self._near_zero_variables(scores):
            means = scores[name]["regions"]["global"]["time_means"]
            for key, ace_name in self._keys.near_zero.items():
                logs[f"{label}/{ace_name}/{name}"] = float(means[key])
        return logs

    @staticmethod
    def _near_zero_variables(scores):
        """The variables with near-zero fractions, sorted as ACE's aggregator logs them."""
        return sorted(n for n in scores if "near_zero_fraction_gen" in scores[n]["regions"]["global"]["time_means"])

    @staticmethod
    def _trended(metric, scores):
        """The variables of a trend metric, sorted as ACE's aggregator orders them."""
        return sorted(n for n in scores if "trend_rmse" in scores[n]["regions"]["global"]["time_means"] and
                      (metric.variables is None or n in metric.variables))

    @staticmethod
    def _spectral(metric, scores):
        """The variables of a power spectrum metric, sorted as ACE's aggregator orders them."""
        return sorted(n for n in scores if "prediction" in scores[n]["spectra"] and
                      (metric.variables is None or n in metric.variables))

    def _channel_mean(self, rmse, scores, names=None):
        """ACE's channel mean: the plain mean over channel_mean_names (default every variable) of those whose
        target is not all missing."""
        names = names if names is not None else self._channel_mean_names
        names = list(rmse) if names is None else list(names)
        missing = [n for n in names if n not in rmse]
        if missing:
            raise KeyError(f"channel_mean_names contains entries not present in the recorded data: {missing}. "
                           f"Available: {sorted(rmse)}.")
        missing = [bool(scores[n]["target_missing"]) for n in names]
        if all(missing):
            raise ValueError("All target variables are NaN; cannot compute channel mean.")
        return _core.channel_mean([rmse[n] for n in names], missing)

    def get_summary_logs(self):
        return self.get_summary().logs

    def flush_diagnostics(self, subdir=None):
        """ACE's diagnostics files, written by world rank 0 from the global maps through the library's atomic
        writer (gridshard._outputs: every file to an unnamed temporary in the folder, all flushed, then renamed, in
        the umask's mode; 64-bit offset netCDF): ``mean[_norm]_diagnostics.nc`` (forecast_step: the initial condition,
        then every forward step), ``mean_step_<k>[_norm]_diagnostics.nc``, ``time_mean[_norm]_diagnostics.nc``
        (lat, lon) and ``zonal_mean_diagnostics.nc`` (forecast_step, lat: the forward steps, then the initial
        condition's row empty, as ACE's). Collective over the world (the scores are finished first); a failure to
        write (a read-only folder: ArgumentError; a full disk: SystemFailure, naming the file) is raised on every
        rank. Before any record: ACE's ValueError, on every rank."""
        if self._seen == 0:
            raise ValueError("No batches have been recorded.")  # ACE's message
        denorm, norm = self._scores()
        if self._save_diagnostics:
            folder = self._output_dir if subdir is None else os.path.join(self._output_dir, subdir)

            def jobs():  # on world rank 0, which holds the maps
                os.makedirs(folder, exist_ok=True)
                return [(os.path.join(folder, f"{name}_diagnostics.nc"), _netcdf_of(dataset))
                        for name, dataset in self._datasets(denorm, norm).items()]

            _outputs.write_on_root(self.distributed._comm, jobs)
        if self._ace is not None:
            self._ace.flush_diagnostics(subdir)

    def _display(self, name):
        """ACE's display long name and units of a variable (its metadata's, else the name and "unknown units")."""
        meta = self._metadata.get(name)
        if meta is None:
            return name, "unknown units"
        return meta.display_long_name(name), meta.display_units("unknown units")

    def _attrs(self, name):
        meta = self._metadata.get(name)
        if meta is None:
            return {"long_name": name, "units": "unknown_units"}
        return {"long_name": meta.long_name, "units": meta.units}

    def _datasets(self, denorm, norm):
        import xarray as xr

        steps = 1 + self._n_forward_steps
        out = {}
        for metric in self._series:
            scores, keys = ((denorm, self._keys.series) if metric.target == "denorm"
                            else (norm, self._keys.norm_series))
            data = {f"{key}-{name}": xr.DataArray(channel["regions"]["global"]["per_lead"][key][:, 0],
                                                  dims=("forecast_step",), attrs=self._attrs(name))
                    for name, channel in scores.items() for key in keys}
            out[metric.get_name()] = xr.Dataset(data, coords={"forecast_step": np.arange(steps)})
        variables = set(denorm or {}) | set(norm or {})
        for metric in self._steps:  # the channel mean is no variable: no attributes
            out[metric.get_name()] = xr.Dataset(
                {f"{key}-{name}": xr.DataArray(value, attrs=self._attrs(name) if name in variables else {})
                 for (key, name), value in self._step_values(metric, denorm, norm).items()})
        horizontal = {k: self._coords[k] for k in ("lat", "lon")}
        for metric in self._time_means:
            scores = denorm if metric.target == "denorm" else norm
            data = {}
            for name, channel in scores.items():
                data[f"bias_map-{name}"] = xr.DataArray(channel["bias_map"], dims=("lat", "lon"),
                                                        attrs=self._attrs(name))
                data[f"gen_map-{name}"] = xr.DataArray(channel["prediction_map"], dims=("lat", "lon"),
                                                       attrs=self._attrs(name))
            out[metric.get_name()] = xr.Dataset(data, coords=horizontal)
        for metric in self._zonal:
            data = {}
            for name, channel in denorm.items():
                for key in ("gen", "error"):
                    rows = np.full((steps, len(self._lat)), np.nan)
                    rows[:steps - 1] = channel["profiles"][key][1:]  # forward steps first, the IC's row last, empty
                    data[f"{key}-{name}"] = xr.DataArray(rows, dims=("forecast_step", "lat"), attrs=self._attrs(name))
            out[metric.get_name()] = xr.Dataset(data, coords={"lat": self._coords["lat"]})
        for metric in self._near_zero:  # fme's NearZeroFractionAggregator.get_dataset
            data = {}
            for name in self._near_zero_variables(denorm) if metric.include_maps else ():
                maps = denorm[name]["near_zero_maps"]
                data[f"gen_map-{name}"] = xr.DataArray(maps["prediction"], dims=("lat", "lon"))
                data[f"target_map-{name}"] = xr.DataArray(maps["target"], dims=("lat", "lon"))
                data[f"error_map-{name}"] = xr.DataArray(maps["prediction"] - maps["target"], dims=("lat", "lon"))
            if data:
                out[metric.get_name()] = xr.Dataset(data, coords=horizontal)
        for metric in self._trends:  # fme's TrendEvaluatorAggregator.get_dataset: (source, lat, lon)
            data = {}
            for name in self._trended(metric, denorm):
                maps = denorm[name]["trend_maps"]
                meta = self._metadata.get(name)
                long_name = getattr(meta, "long_name", None) or name
                units = getattr(meta, "units", None) or "unknown units"
                data[name] = xr.DataArray(np.stack([maps["target"], maps["prediction"]]), dims=("source", "lat", "lon"),
                                          attrs={"long_name": f"{long_name} linear trend", "units": f"{units} / year"})
            if data:
                out[metric.get_name()] = xr.Dataset(data, coords={"source": ["target", "prediction"], **horizontal})
        for metric in self._videos:  # fme's VideoAggregator.get_dataset: (source, timestep, lat, lon)
            data = {}
            for name in sorted(n for n in denorm if denorm[n].get("video") is not None and
                               (metric.variables is None or n in metric.variables)):
                video = denorm[name]["video"]
                meta = self._metadata.get(name)
                attrs = {"long_name": f"ensemble mean of {getattr(meta, 'long_name', None) or name}"}
                if getattr(meta, "units", None) is not None:
                    attrs = {"units": meta.units, **attrs}
                data[name] = xr.DataArray(np.stack([video["prediction"], video["target"]]),
                                          dims=("source", "timestep", "lat", "lon"), attrs=attrs)
                if metric.enable_extended_videos:
                    data[f"bias_{name}"] = _video_map(video["bias"], meta, f"bias of {_long_name(meta)}")
            for label, key, units, text in _EXTENDED_VIDEOS if metric.enable_extended_videos else ():
                for name in sorted(n for n in denorm if denorm[n].get("video") is not None and
                                   (metric.variables is None or n in metric.variables)):
                    meta = self._metadata.get(name)
                    data[f"{label}_{name}"] = _video_map(denorm[name]["video"][key], meta,
                                                         text.format(_long_name(meta)), units)
            if data:
                out[metric.get_name()] = xr.Dataset(data)
        out.update(calendar.annual_datasets(self._annual, denorm or {}))  # fme's annual_diagnostics.nc
        out.update(calendar.enso_datasets(self._enso, denorm or {}, self._calendar))  # enso_index_diagnostics.nc
        out.update(calendar.ipo_datasets(self._ipo, denorm or {}, self._calendar))  # ipo_index_diagnostics.nc
        out.update(histogram.datasets(self._histograms, denorm or {}))  # histogram_diagnostics.nc
        out.update(calendar.coefficient_datasets(self._coefficients, denorm or {}, self._display,
                                                 {k: self._coords[k] for k in ("lat", "lon")}))
        for metric in self._spectra:  # fme's PairedSphericalPowerSpectrumAggregator.get_dataset
            data = {}
            for name in self._spectral(metric, denorm):
                spectra = denorm[name]["spectra"]
                meta = self._metadata.get(name)
                if meta is not None and meta.long_name is not None:
                    attrs = {"long_name": f"spherical power spectrum of {meta.long_name}",
                             "units": f"({meta.units or 'unknown_units'})^2"}
                else:
                    attrs = {"long_name": f"spherical power spectrum of {name}", "units": "unknown_units"}
                data[name] = xr.DataArray(np.stack([spectra["prediction"], spectra["target"]]),
                                          dims=("source", "wavenumber"), attrs=attrs)
            if data:
                degrees = next(iter(data.values())).shape[1]
                out[metric.get_name()] = xr.Dataset(data, coords={"source": ["prediction", "target"],
                                                                  "wavenumber": np.arange(degrees)})
        return out


# fme's VideoAggregator's extended videos after each variable's bias, in its order: its label, the library's map, the
# units ("": ACE's; None: the variable's) and ACE's long name of the variable's long name.
_EXTENDED_VIDEOS = (("rmse", "rmse", None, "root mean squared error of {}"),
                    ("min_err", "min_error", None, "min error of {} across ensemble members"),
                    ("max_err", "max_error", None, "max error of {} across ensemble members"),
                    ("gen_var", "variance_ratio", "", "prediction variance of {} as fraction of target variance"))


def _long_name(meta):
    """fme's VideoAggregator's get_long_name: the variable's long name, None without metadata."""
    return getattr(meta, "long_name", None)


def _video_map(values, meta, long_name, units=None):
    """One of fme's extended video maps over (timestep, lat, lon), ACE's attributes: units (``units``, else the
    variable's where known) and ``long_name``."""
    import xarray as xr

    units = units if units is not None else getattr(meta, "units", None)
    attrs = {"long_name": long_name} if units is None else {"units": units, "long_name": long_name}
    return xr.DataArray(values, dims=("timestep", "lat", "lon"), attrs=attrs)


def _netcdf_of(dataset):
    """The writer of ``dataset`` by path: 64-bit offset netCDF, as the tool's files (an unnamed temporary is written
    through /proc/self/fd, which netCDF-4's HDF5 layer refuses)."""
    return lambda path: dataset.to_netcdf(path, format="NETCDF3_64BIT")


def build(config, dataset_info, n_ic_steps, n_forward_steps, initial_time, normalize, output_dir=None,
          channel_mean_names=None, save_diagnostics=True, n_ensemble_per_ic=1, enable_time_series=True):
    """``InferenceEvaluatorAggregatorConfig.build``, gridshard's: the same arguments, gridshard's aggregator."""
    return InferenceEvaluatorAggregator(config, dataset_info, n_ic_steps, n_forward_steps, initial_time, normalize,
                                        output_dir=output_dir, channel_mean_names=channel_mean_names,
                                        save_diagnostics=save_diagnostics, n_ensemble_per_ic=n_ensemble_per_ic,
                                        enable_time_series=enable_time_series)


__all__ = ["ArgumentError", "InferenceEvaluatorAggregator", "build"]
