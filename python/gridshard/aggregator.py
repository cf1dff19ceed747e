"""``gridshard.Aggregator``: the evaluation layer's streaming aggregator (evaluation/aggregator.hpp) on shards of
numpy arrays or CPU torch tensors, window by window, finished into every score of the registry: the same bits
as ``gridshard eval`` on the same data, at every mesh.

Each rank records its box (``dist.get_local_slices``) of its own initial conditions: by default data rank ``d``
holds the ``d``-th block of ``initial_conditions // data ranks`` (ACE's ``local_batch_size``), and the blocks
of the data ranks must cover every initial condition once. ``record`` is collective over the spatial group,
``finish`` over the world; the maps (time means of the prediction and of the error) come back whole on world
rank 0, gathered one variable at a time, never as tiles.
"""

import warnings

import numpy as np

from . import _arrays
from . import _gridshard as _core
from ._arrays import Problems
from ._mpi import mpi_errors


def registered_scores():
    """Every score of the library's registry (key, table label, ACE key, family, combination, validity rule)."""
    return _core.registered_scores()


def register_score(report, key, definition, label="", ace_key="", policy="follows_option", ace_normalized=False,
                   ace_step_log="none", table_order=1000):
    """Adds a deterministic score to the library's registry (evaluation/score_registry.hpp, register_score): the
    Evaluator's definition ``definition`` (metrics/scores.hpp: ``"rmse"``, ``"bias"``, ``"std_pred"``, ...) under
    ``key`` in the ``report`` ("forecast" or "pair"), with ACE's log key ``ace_key`` (``{var}`` for the variable;
    ``ace_normalized``: logged on the normalised fields too; ``ace_step_log``: logged by ACE's ``mean_step_<k>``
    metric, ``"none"``, ``"fields"`` or ``"fields_and_normalized"``). Every Aggregator (and ACE drop-in) built
    afterwards forms and reports it. Call it on every rank alike, before building aggregators. No MPI calls."""
    _core.register_score(report, key, definition, label=label, ace_key=ace_key, policy=policy,
                         ace_normalized=ace_normalized, ace_step_log=ace_step_log, table_order=table_order)


class Aggregator:
    """The scores of ``variables`` of a forecast of ``initial_conditions`` x ``members`` x ``lead_times`` on the
    global grid of latitudes ``lat`` (degrees, every row, row 0 first) by ``nlon`` longitudes, in ``dtype``.

    ``counted_leads``: the lead-time rows the time means count (default: every row but row 0, the initial
    condition, as ACE and ``gridshard eval`` on a file with a lead-0 row count). ``maps``: form the time-mean
    maps. ``policy``: the validity policy of the deterministic scores (``skip_invalid_pairs``, ``skip_nan``,
    ``propagate``). ``first_initial_condition``: where this rank's initial conditions start (default: its data
    rank's block). ``scores``: the registry keys of the deterministic scores to form (default every one; the
    gradient score left out saves its halo exchange and gradients). ``lead_ensemble``: with members, form the
    per-lead ensemble scores (WeatherBench 2's). ``ensemble_cell_leads``: the lead times at which ACE's ensemble
    scores are formed (``almost_fair_crps`` with ``crps_alpha``, ``cell_ensemble_mean_rmse``, ``ssr_bias``: per
    cell over every initial condition, then the area mean; ``finish`` gives them under ``at_leads``), with
    ``ensemble_cell_maps=True`` their maps too (ACE's ``log_mean_maps``: ``"cell_maps"``, ``{key: {lead: (nlat,
    nlon)}}`` on world rank 0).
    ``normalize=(MEANS.nc, STDS.nc)``: ACE's stats files, read as ``gridshard eval --normalize`` reads them; every
    window is also scored normalised, ``(x - mean) / std`` in its dtype, and ``finish`` gives each channel's
    ``"normalized"`` scores (those ACE logs normalised) with their ``"ace_keys"`` (``mean_norm/...``,
    ``time_mean_norm/rmse/...``); ``normalized_channel_mean`` is ACE's checkpoint loss. ``spectrum``: ACE's
    power_spectrum metric, ``True`` for ACE's settings or a dict of ``grid`` ("legendre-gauss"), ``truncation``
    ("torch-harmonics-0.8"), ``lmax``, ``mmax`` (None: the truncation's), ``convention`` ("ace") and ``fill_steps``
    (4; None: no NaN fill), and ``variables`` (default every one): the mean spherical power spectrum over every
    counted (sample, lead time) of the prediction and of the target, after ACE's SmoothFloodFill, under
    ``"spectra"`` (``{"prediction": (L,), "target": (L,)}``), and ACE's four norm biases among the global time
    means. ``masks``: ``{variable: (h_local, w_local)}`` this rank's box of a multiplier of that variable's area
    weights (ACE's spatial mask provider: its area means take weights times mask, so a point under a zero mask does
    not count, a missing value there included); every rank gives a mask for the same variables.
    ``near_zero_fraction``: ACE's near_zero_fraction metric, a dict of its config fields ``variables`` (default every
    one), ``eps`` (0), ``per_variable_eps`` ({}) and ``include_maps`` (False): over every counted (sample, lead time)
    the area-weighted fraction of points at or below the variable's eps, averaged, among the global time means
    (``near_zero_fraction_gen``, ``near_zero_fraction_target``, ``near_zero_fraction_gen_minus_target``), and with
    ``include_maps`` per cell the fraction of those at or below it, not area-weighted (``"near_zero_maps"``:
    ``{"prediction": (nlat, nlon), "target": ...}`` on world rank 0). ``trend``: ACE's trend metric, True or a dict of
    its config field ``variables`` (default every one): per cell the least-squares slope per year (365.25 days) of the
    counted values against their times (``record(..., times=...)``), of the prediction (every member) and of the
    truth, ``"trend_maps"`` (``{"prediction": (nlat, nlon), "target": ...}`` on world rank 0), and the area-weighted
    RMSE of their difference among the global time means (``trend_rmse``). ``video``: ACE's video metric, True or a dict
    of its config field ``variables``: per counted lead time and cell the mean over every sample of the prediction
    and of the truth, ``"video"`` (``{"prediction": (lead_times, nlat, nlon), "target": ...}`` on world rank 0; NaN
    at lead times not counted); with ``{"enable_extended_videos": True}`` (ACE's field) its extended videos too, per
    lead time and cell the bias of those means, the RMSE, the least and the greatest error (prediction - truth) over
    every sample and the ratio of the prediction's variance over samples to the truth's (ACE's E[x^2] - E[x]^2, of
    exact means), ``"bias"``, ``"rmse"``, ``"min_error"``, ``"max_error"`` and ``"variance_ratio"`` beside them.
    ``annual``: ACE's annual metric, a dict of the run's ``timestep`` (seconds or a ``datetime.timedelta``) and its
    config field ``variables``: per sample and calendar year of the valid times the mean of the counted steps' global
    means, kept where the year has more than 350 days of steps, ``"annual"`` (``{"years": (Y,), "prediction": (sample,
    Y), "target": ..., "counts": ...}`` on every rank, NaN where a year is not kept), and ACE's ``annual_rmse`` and
    ``annual_crps`` among the global time means (over more than one year). ``seasonal``: ACE's
    seasonal metric, True or a dict of ``variables``: per season (DJF, MAM, JJA, SON) and cell the mean of its counted
    steps, ``"seasonal"`` (``{"prediction": (4, nlat, nlon), "target": ...}`` on world rank 0), and ACE's time-mean RMSE
    per season (``seasonal_rmse_djf``, ...) and over the four (``seasonal_rmse``). The trend, annual and seasonal means
    take each pair's valid time (``record(..., times=...)``). ``nino34_index``: ACE's enso_index metric, True or a dict
    of ``variables`` and the grid's ``lon`` (degrees; default ``k * 360 / nlon``): per counted (sample, lead time) the
    regional mean in ACE's Niño 3.4 box with ACE's weights, then per sample ACE's 5-month running index of the monthly
    anomalies, ``"nino34_index"`` (``{"years": (M,), "months": (M,), "prediction": (sample, M), "target": ...}`` on
    every rank), and ACE's summaries among the global time means (``nino34_index_std``, ``_std_norm``, the band powers
    ``nino34_index_power_2_5yr``, ``_power_1_16yr`` and their ``_norm``, where ACE logs them); it takes each pair's
    valid time too. ``histogram``: ACE's histogram metric, True or a dict of ``variables``: every ``record`` is one of
    ACE's windows, whose range is agreed over the world before its values are binned into ACE's 200 dynamic bins (the
    edges set by the first window and doubled as later ones need, as ACE's), at the points where the target of the
    first initial condition's first counted lead is not NaN; ``"histogram"`` (``{"target_edges": (201,),
    "target_counts": (200,), "prediction_edges": ..., "prediction_counts": ..., "windows_left_out": (target,
    prediction)}`` on every rank; the target's counts once per member, as ACE's folded samples repeat it, and a window
    with a NaN or infinite value at a counted point left out) and the 99.9999th percentiles among the global time means
    (``histogram_percentile_gen``, ``histogram_percentile_target``). ``enso_coefficient``: ACE's enso_coefficient
    metric, a dict of ``index`` (``(local_initial_conditions, lead_times)``: per pair of this rank's initial
    conditions the reference index at its time less its mean over the sample's run, as ACE's get_sample_index_series
    gives it; a row of NaN where the index does not cover the sample) and ``variables``: per cell the mean over the
    covered samples of the regression coefficient sum_t x w / sum_t w^2 over the counted steps,
    ``"enso_coefficient_maps"`` (``{"prediction": (nlat, nlon), "target": ...}`` on world rank 0) and the area-weighted
    RMSE of their difference among the global time means (``enso_coefficient_rmse``). ``ipo_index``: ACE's ipo_index
    metric, True or a dict of ``variables`` and the grid's ``lon``: per counted (sample, lead time) the NaN-skipping
    means in ACE's three tripole boxes (box times cos(lat)), per sample ACE's monthly anomalies and the tripole index
    T2 - (T1 + T3) / 2, ``"ipo_index"`` (as ``"nino34_index"``), and where every sample has 80 years of months the
    spread of its 13-year low-pass filtered index among the global time means (``ipo_tpi_std``, ``ipo_tpi_std_norm``);
    it takes each pair's valid time. Collective over the
    world: the ranks agree on every argument, and a problem on any rank raises ArgumentError on every rank.
    """

    def __init__(self, distributed, variables, lat, nlon, initial_conditions, lead_times, members=1,
                 counted_leads=None, dtype=np.float32, maps=True, policy="skip_invalid_pairs",
                 first_initial_condition=None, local_initial_conditions=None, report="forecast", scores=None,
                 lead_ensemble=True, ensemble_cell_leads=(), ensemble_cell_maps=False, crps_alpha=0.95, normalize=None,
                 spectrum=None,
                 masks=None, near_zero_fraction=None, trend=None, video=None, annual=None, seasonal=None,
                 nino34_index=None, histogram=None, enso_coefficient=None, ipo_index=None):
        self.distributed = distributed
        problems = Problems()
        # Everything that can raise on one rank alone is this rank's problem, raised on every rank by the
        # agreement below, before the first collective of the compiled module.
        self.variables, self.members, self.lead_times, self.dtype = [], 1, 1, np.dtype(np.float32)
        lat_values, nlon_value, ics, counted, first, local = np.zeros(0), 0, 0, [0], 0, 0
        with problems.catching("Aggregator arguments"):
            self.variables = [str(v) for v in variables]
            self.members, self.lead_times, self.dtype = int(members), int(lead_times), np.dtype(dtype)
            lat_values = np.ascontiguousarray(np.asarray(lat, dtype=np.float64))
            nlon_value, ics = int(nlon), int(initial_conditions)
            counted = [int(k) for k in counted_leads] if counted_leads is not None else \
                (list(range(1, self.lead_times)) if self.lead_times > 1 else [0])
            data_ranks = distributed.total_data_parallel_ranks
            if local_initial_conditions is None:
                if ics % data_ranks:
                    problems.add(f"initial_conditions={ics} do not split evenly over {data_ranks} data ranks: give "
                                 f"first_initial_condition and local_initial_conditions")
                local = ics // data_ranks
            else:
                local = int(local_initial_conditions)
            first = distributed.data_parallel_rank * local if first_initial_condition is None \
                else int(first_initial_condition)
        if lat_values.ndim != 1:
            problems.add(f"lat: expected the grid's latitudes, one dim, got shape {lat_values.shape}")
            lat_values = np.zeros(0)
        if self.dtype not in _arrays.FLOATING:
            problems.add(f"dtype={self.dtype}: must be float32 or float64")
        if not self.variables or len(set(self.variables)) != len(self.variables):
            problems.add(f"variables={self.variables!r}: expected distinct names")
        keys, cell_leads, alpha = [], [], 0.95
        with problems.catching("scores"):
            keys = [] if scores is None else [str(k) for k in scores]
        with problems.catching("ensemble_cell_leads"):
            cell_leads = [int(k) for k in ensemble_cell_leads]
        with problems.catching("crps_alpha"):
            alpha = float(crps_alpha)
        spectrum_arguments, spectral = {}, set()
        if spectrum is not None and spectrum is not False:
            with problems.catching("spectrum"):
                spectrum_arguments = _spectrum_arguments(spectrum)
                chosen = spectrum.get("variables") if isinstance(spectrum, dict) else None
                spectral = set(self.variables if chosen is None else (str(v) for v in chosen))
                if spectral - set(self.variables):
                    problems.add(f"spectrum variables {sorted(spectral - set(self.variables))} are not among "
                                 f"variables={self.variables!r}")
        trended = _chosen_variables("trend", trend, self.variables, problems)
        videoed = _chosen_variables("video", video, self.variables, problems, ("variables", "enable_extended_videos"))
        extended_video = bool(videoed) and isinstance(video, dict) and bool(video.get("enable_extended_videos"))
        annualized = _chosen_variables("annual", annual, self.variables, problems,
                                       ("variables", "timestep", "reference"))
        timestep, reference = 0.0, ({}, None, None)
        if annualized:
            with problems.catching("annual"):
                timestep = _annual_timestep(annual)
                reference = _annual_reference(annual, annualized)
        seasoned = _chosen_variables("seasonal", seasonal, self.variables, problems)
        indexed = _chosen_variables("nino34_index", nino34_index, self.variables, problems, ("variables", "lon"))
        index_lon = None
        if indexed:
            with problems.catching("nino34_index"):
                index_lon = _index_lon(nino34_index, nlon_value)
        self._histogrammed = _chosen_variables("histogram", histogram, self.variables, problems)
        regressed = _chosen_variables("enso_coefficient", enso_coefficient, self.variables, problems,
                                      ("variables", "index"))
        regression_index = None
        if regressed:
            with problems.catching("enso_coefficient"):
                regression_index = _regression_index(enso_coefficient, ics, self.lead_times, first, local)
        tripoled = _chosen_variables("ipo_index", ipo_index, self.variables, problems, ("variables", "lon"))
        ipo_lon = None
        if tripoled:
            with problems.catching("ipo_index"):
                ipo_lon = _index_lon(ipo_index, nlon_value)
        self._timed = trended | annualized | seasoned | indexed | tripoled
        self._dated = annualized | seasoned | indexed | tripoled
        near_zero = {}
        if near_zero_fraction is not None:
            with problems.catching("near_zero_fraction"):
                near_zero = _near_zero_settings(near_zero_fraction, self.variables)
        mask_values = {}
        with problems.catching("masks"):
            for name, mask in (masks or {}).items():
                if str(name) not in self.variables:
                    problems.add(f"masks: {name!r} is not among variables={self.variables!r}")
                    continue
                array = _arrays.as_numpy(mask, f"masks[{name!r}]", problems, _arrays.REDUCIBLE)
                if array is not None:
                    mask_values[str(name)] = np.ascontiguousarray(array, dtype=np.float64)
        self._stats = {}
        if normalize is not None:
            with problems.catching("normalize"):
                means, stds = (str(path) for path in normalize)
                self._stats = _core.read_normalization(means, stds, self.variables)
        with mpi_errors():
            seen = distributed._comm.allgather((problems.text(), tuple(self.variables),
                                                tuple(sorted(self._stats.items())),
                                                (tuple(sorted(mask_values)), tuple(sorted(reference[0])))))
        failed = [text for text, *_ in seen if text]
        if failed:
            raise _arrays.agreed_error(failed[0])
        if len({names for _, names, _, _ in seen}) > 1:
            raise _core.ArgumentError(f"variables: the ranks give different variables, {list(seen[0][1])} on rank 0 "
                                      f"and {self.variables} on rank {distributed.rank}")
        if len({stats for _, _, stats, _ in seen}) > 1:
            raise _core.ArgumentError("normalize: the ranks read different means or stds from the stats files")
        if len({masked for *_, (masked, _) in seen}) > 1:
            raise _core.ArgumentError(f"masks: the ranks give masks for different variables, {list(seen[0][3][0])} on "
                                      f"rank 0 and {sorted(mask_values)} on rank {distributed.rank}")
        if len({referenced for *_, (_, referenced) in seen}) > 1:
            raise _core.ArgumentError(f"annual: the ranks give reference data of different variables, "
                                      f"{list(seen[0][3][1])} on rank 0 and {sorted(reference[0])} on rank "
                                      f"{distributed.rank}")
        self.first_initial_condition, self.local_initial_conditions = first, local
        self._by_variable = {}
        with mpi_errors():
            for name in self.variables:  # each agrees on its settings over the world
                settings = _core.AggregatorSettings(
                    nlat=len(lat_values), nlon=nlon_value, element_code=self.dtype.itemsize, initial_conditions=ics,
                    members=self.members, lead_times=self.lead_times, channels=1, mine=(first, first + local),
                    counted_leads=counted, maps=bool(maps), policy=str(policy), report=str(report),
                    deterministic_keys=keys, lead_ensemble_scores=bool(lead_ensemble), ensemble_cell_leads=cell_leads,
                    ensemble_cell_maps=bool(ensemble_cell_maps),
                    crps_alpha=alpha, normalization=self._stats.get(name),
                    **(spectrum_arguments if name in spectral else {}), **near_zero.get(name, {}),
                    trend=name in trended, video=name in videoed, extended_video=extended_video and name in videoed,
                    annual_timestep=timestep if name in annualized else 0.0, seasonal=name in seasoned,
                    nino34_lon=index_lon if name in indexed else None, ipo_lon=ipo_lon if name in tripoled else None,
                    histogram=name in self._histogrammed,
                    regression_index=regression_index if name in regressed else None)
                self._by_variable[name] = _core.Aggregator(distributed._mesh, settings, lat_values,
                                                           mask=mask_values.get(name))
            for name in self.variables:  # ACE's monthly reference data of the annual means, in the same order
                if name in reference[0]:
                    self._by_variable[name].set_annual_reference("", reference[0][name], reference[1].shape[0],
                                                                 reference[1].ravel(), reference[2])
        self.box = next(iter(self._by_variable.values())).box if self._by_variable else (0, 0)
        if spectral and distributed.rank == 0:
            grid = spectrum_arguments["spectrum_grid"]
            offset = _core.latitude_offset_from_nodes_deg(grid, [float(v) for v in lat_values])
            if offset > 1e-4:  # as gridshard eval --spectrum says it
                warnings.warn(f"the latitudes are not the {grid} grid's nodes (up to {offset:.3g} degrees apart); the "
                              f"power spectrum takes each row as that node, as ACE's does", stacklevel=2)
        self._grid = (len(lat_values), nlon_value)

    def record(self, target, prediction, first_lead=0, first_sample=0, times=None):
        """Records one window: ``target[name]`` ``(sample, time, h_local, w_local)`` and ``prediction[name]`` the
        same, or ``(sample, member, time, h_local, w_local)`` with members, for every variable; sample ``s`` is
        initial condition ``first_initial_condition + first_sample + s`` and time ``t`` lead ``first_lead + t``.
        ``times`` (with a trend, annual or seasonal means): ``(sample, time)`` valid dates (cftime or datetime objects,
        or numpy datetime64), each taken in its calendar as seconds since 2000-01-01 00:00:00 (ACE's trend reference),
        year and month; with a trend alone, seconds will do.
        Collective over the spatial group (one agreement and one fused evaluation per pair); with ``histogram``,
        over the world (each record is one of ACE's windows, ended on every rank: two allreduces per variable)."""
        problems = Problems()
        pair_times = None
        if self._timed:
            with problems.catching("times"):
                if times is None:
                    raise ValueError("the trend, annual and seasonal means need each pair's valid time")
                pair_times = _valid_times(times, bool(self._dated))
        fields = {}
        samples = steps = 0
        for name in self.variables:
            truth = self._field(target, name, "target", problems)
            pred = self._field(prediction, name, "prediction", problems)
            if truth is None or pred is None:
                continue
            if self.members == 1 and pred.ndim == 4:
                pred = pred[:, None]
            if truth.ndim != 4 or pred.ndim != 5 or pred.shape[1] != self.members:
                problems.add(f"target[{name!r}] {tuple(truth.shape)} and prediction[{name!r}] {tuple(pred.shape)}: "
                             f"expected (sample, time, h, w) and (sample{', member' if self.members > 1 else ''}, "
                             f"time, h, w) with {self.members} member(s)")
            elif pred.shape[0] != truth.shape[0] or pred.shape[2:] != truth.shape[1:]:
                problems.add(f"prediction[{name!r}]: shape {tuple(pred.shape)} does not match the target's "
                             f"{tuple(truth.shape)}")
            elif truth.shape[2:] != tuple(self.box):
                problems.add(f"target[{name!r}]: shards of {tuple(truth.shape[2:])}, this rank's box is "
                             f"{tuple(self.box)}")
            elif fields and truth.shape[:2] != (samples, steps):
                problems.add(f"target[{name!r}]: {truth.shape[:2]} (sample, time), another variable's are "
                             f"{(samples, steps)}")
            else:
                samples, steps = truth.shape[:2]
                fields[name] = (truth, pred)
        if pair_times is not None and pair_times[0].shape != (samples, steps) and not problems.text():
            problems.add(f"times: shape {pair_times[0].shape}, the window's (sample, time) is {(samples, steps)}")
        # One agreement over the spatial group before any pair: every rank of it records the same window.
        with mpi_errors():
            seen = self.distributed._spatial_comm.allgather(
                (problems.text(), int(samples), int(steps), int(first_lead), int(first_sample)))
        failed = [text for text, *_ in seen if text]
        if failed:
            raise _arrays.agreed_error(failed[0])
        if len({tuple(window) for _, *window in seen}) > 1:
            raise _core.ArgumentError(f"record: the ranks of a spatial group give different windows (samples, "
                                      f"times, first_lead, first_sample): {[tuple(w) for _, *w in seen]}")
        for name, (truth, pred) in fields.items():  # the normalised scores, with normalize, inside the aggregator
            aggregator = self._by_variable[name]
            for s in range(samples):
                for t in range(steps):
                    with mpi_errors():
                        aggregator.record("", self.first_initial_condition + first_sample + s, first_lead + t,
                                          _arrays.contiguous(truth[s, t][None]),
                                          _arrays.contiguous(pred[s, :, t][:, None]),
                                          time=tuple(int(v[s, t]) if k else float(v[s, t])
                                                     for k, v in enumerate(pair_times))
                                          if name in self._timed else None)
        self._end_histogram_window(fields, samples, steps, first_lead, first_sample)

    def _end_histogram_window(self, fields, samples, steps, first_lead, first_sample):
        """ACE's histograms: the window just recorded ended on every rank (collective over the world, in the order of
        the variables), its pairs given again while the library asks (the first window, and one that moves the
        edges)."""
        for name in self.variables:
            if name not in self._histogrammed:
                continue
            aggregator = self._by_variable[name]
            with mpi_errors():
                while aggregator.end_histogram_window():
                    truth, pred = fields[name]
                    for s in range(samples):
                        for t in range(steps):
                            aggregator.replay_histogram(self.first_initial_condition + first_sample + s,
                                                        first_lead + t, _arrays.contiguous(truth[s, t][None]),
                                                        _arrays.contiguous(pred[s, :, t][:, None]))

    def _field(self, fields, name, what, problems):
        try:
            value = fields[name]
        except Exception:  # noqa: BLE001 - a missing variable is this rank's problem, raised everywhere
            problems.add(f"{what}: no variable {name!r}")
            return None
        array = _arrays.as_numpy(value, f"{what}[{name!r}]", problems)
        if array is not None and array.dtype != self.dtype:
            problems.add(f"{what}[{name!r}]: dtype {array.dtype}, the aggregator's is {self.dtype}")
            return None
        return array

    def lead_scores(self, first, stop):
        """``{name: {key: (stop - first,) float64}}``: the deterministic per-lead scores of lead times
        ``first..stop-1`` over every sample, the bits ``finish`` will give them, once every rank has recorded those
        lead times (ACE's per-window time series). Collective over the world."""
        with mpi_errors():
            return {name: {key: np.frombuffer(values, dtype=np.float64).copy()
                           for key, values in self._by_variable[name].lead_scores(int(first), int(stop)).items()}
                    for name in self.variables}

    def finish(self):
        """Every score of every variable: ``{channel: {"regions": {"global": {"per_lead": {key: (leads, width)},
        "time_means": {key: value}, "at_leads": {key: {lead: value}}}}, "profiles": {key: (leads, nlat)},
        "prediction_map": (nlat, nlon) or None, "bias_map": ...}}``, the maps on world rank 0 only. Collective over
        the world; once."""
        out = {}
        with mpi_errors():
            for name in self.variables:
                out.update(self._by_variable[name].finish(name))
        logged_normalized = {s["key"] for s in registered_scores() if s["report"] == "forecast" and
                             s["ace_normalized"] and s["family"] == "time_mean"}
        for name, channel in out.items():
            self._arrays_of(channel)
            normalized = channel.get("normalized")
            if normalized is None:
                continue
            self._arrays_of(normalized)
            normalized["ace_keys"] = {
                **{_core.ace_key(key, name, True): values[:, 0]
                   for key, values in normalized["regions"]["global"]["per_lead"].items()},
                **{_core.ace_key(key, name, True): value
                   for key, value in normalized["regions"]["global"]["time_means"].items()
                   if key in logged_normalized}}
        return out

    def _arrays_of(self, channel):
        """A finished channel's bytes as numpy arrays, in place."""
        nlat, nlon = self._grid
        for region in channel["regions"].values():
            region["per_lead"] = {k: _array(v, (self.lead_times, width)) for k, (v, width) in
                                  region["per_lead"].items()}
        channel["profiles"] = {k: _array(v, (self.lead_times, width)) for k, (v, width) in
                               channel["profiles"].items()}
        channel["spectra"] = {k: _array(v, (width,)) for k, (v, width) in channel["spectra"].items()}
        for key in ("prediction_map", "bias_map"):
            if channel[key] is not None:
                channel[key] = _array(channel[key], (nlat, nlon))
        channel["cell_maps"] = {key: {lead: _array(values, (nlat, nlon)) for lead, values in leads.items()}
                                for key, leads in channel.get("cell_maps", {}).items()}
        video, extended = channel.get("video"), channel.pop("extended_video", None)
        if video is not None:
            channel["video"] = {"prediction": _array(video[0], (self.lead_times, nlat, nlon)),
                                "target": _array(video[1], (self.lead_times, nlat, nlon))}
            if extended is not None:
                channel["video"].update({key: _array(values, (self.lead_times, nlat, nlon)) for key, values in
                                         zip(("bias", "rmse", "min_error", "max_error", "variance_ratio"), extended)})
        seasonal = channel.get("seasonal")
        if seasonal is not None:
            channel["seasonal"] = {"prediction": _array(seasonal[0], (4, nlat, nlon)),
                                   "target": _array(seasonal[1], (4, nlat, nlon))}
        for name in ("nino34_index", "ipo_index"):
            index = channel.get(name)
            if index is not None:
                shape = (int(index["samples"]), len(index["years"]) // 8)
                channel[name] = {"years": np.frombuffer(index["years"], dtype=np.int64).copy(),
                                 "months": np.frombuffer(index["months"], dtype=np.int64).copy(),
                                 **{key: np.zeros(shape) if index[key] is None else _array(index[key], shape)
                                    for key in ("prediction", "target")}}
        annual = channel.get("annual")
        if annual is not None:
            years = np.frombuffer(annual["years"], dtype=np.int64).copy()
            shape = (int(annual["samples"]), len(years))
            channel["annual"] = {"years": years, **{key: np.zeros(shape) if annual[key] is None else
                                                    _array(annual[key], shape)
                                                    for key in ("prediction", "target", "counts")}}
        histogram = channel.get("histogram")
        if histogram is not None:
            channel["histogram"] = {
                **{f"{source}_edges": np.zeros(0) if histogram[f"{source}_edges"] is None else
                   np.frombuffer(histogram[f"{source}_edges"], dtype=np.float64).copy()
                   for source in ("target", "prediction")},
                **{f"{source}_counts": np.frombuffer(histogram[f"{source}_counts"], dtype=np.int64).copy()
                   for source in ("target", "prediction")},
                "windows_left_out": tuple(histogram["windows_left_out"])}
        for key in ("near_zero_maps", "trend_maps", "enso_coefficient_maps"):
            maps = channel.get(key)
            if maps is not None:
                channel[key] = {"prediction": _array(maps[0], (nlat, nlon)), "target": _array(maps[1], (nlat, nlon))}

    @staticmethod
    def normalized_channel_mean(scores):
        """ACE's ``time_mean_norm/rmse/channel_mean`` (its checkpoint loss) of ``finish()``'s scores with
        ``normalize``: the plain mean of the normalised time-mean RMSEs over the channels whose target was not
        missing everywhere."""
        channels = [channel["normalized"] for channel in scores.values()]
        return _core.channel_mean([c["regions"]["global"]["time_means"]["rmse"] for c in channels],
                                  [bool(c["target_missing"]) for c in channels])


def _chosen_variables(setting, option, variables, problems, known=("variables",)):
    """The variables a family's option names (True, or a dict of its config field ``variables`` and the ``known``
    others; None or False: none), checked by the library's rule; a problem goes to ``problems``."""
    if not option:
        return set()
    with problems.catching(setting):
        chosen = None if option is True else dict(option).get("variables")
        unknown = [] if option is True else sorted(set(dict(option)) - set(known))
        if unknown:
            raise ValueError(f"{setting}: unknown option(s) {unknown}; known: {sorted(known)}")
        chosen = list(variables) if chosen is None else [str(v) for v in chosen]
        _core.check_variable_names(setting, "variables", chosen, list(variables))
        return set(chosen)
    return set()


def _index_lon(option, nlon):
    """A regional index's longitudes (degrees): ``option["lon"]``, or ``k * 360 / nlon``."""
    chosen = None if option is True else dict(option).get("lon")
    return [float(v) for v in (np.arange(nlon) * 360.0 / nlon if chosen is None
                               else np.asarray(chosen, dtype=np.float64).ravel())]


def _regression_index(option, initial_conditions, lead_times, first, local):
    """The ENSO coefficient's index over every (initial condition, lead time), flattened: ``option["index"]``
    ``(local, lead_times)`` (this rank's initial conditions; a row of NaN: not covered) in this rank's rows, NaN in the
    others."""
    if option is True or "index" not in dict(option):
        raise ValueError("enso_coefficient: needs the index, {'index': (local initial conditions, lead_times)}")
    rows = np.asarray(dict(option)["index"], dtype=np.float64)
    if rows.shape != (local, lead_times):
        raise ValueError(f"enso_coefficient: index of shape {rows.shape}, expected (local_initial_conditions, "
                         f"lead_times) = {(local, lead_times)}")
    full = np.full((initial_conditions, lead_times), np.nan)
    full[first:first + local] = rows
    return [float(v) for v in full.ravel()]


def _annual_timestep(annual):
    """The timestep in seconds of ``annual``'s ``timestep`` (seconds, or a ``datetime.timedelta``)."""
    if annual is True or "timestep" not in dict(annual):
        raise ValueError("annual: needs the run's timestep, {'timestep': seconds or datetime.timedelta}")
    step = dict(annual)["timestep"]
    seconds = step.total_seconds() if hasattr(step, "total_seconds") else float(step)
    if not seconds > 0:
        raise ValueError(f"annual: timestep={step!r}, needs more than 0 seconds")
    return seconds


def _annual_reference(annual, annualized):
    """ACE's monthly reference data of ``annual``'s ``reference`` (none: ``({}, None, None)``): ``{"values": {name:
    this rank's box (samples, times, rows, cols)}, "counts": (samples, times), "years": (times,)}`` as ({name: float64
    values} of the annual variables it has, float64 counts, int64 years)."""
    given = dict(annual).get("reference") if annual is not True else None
    if given is None:
        return {}, None, None
    unknown = sorted(set(dict(given)) - {"values", "counts", "years"})
    if unknown:
        raise ValueError(f"annual: reference has unknown key(s) {unknown}; known: ['counts', 'values', 'years']")
    counts = np.ascontiguousarray(np.asarray(given["counts"], dtype=np.float64))
    years = np.ascontiguousarray(np.asarray(given["years"]).astype(np.int64).ravel())
    if counts.ndim != 2 or counts.shape[1] != years.size:
        raise ValueError(f"annual: the reference's counts {counts.shape} are not (samples, {years.size} times)")
    values = {str(n): np.ascontiguousarray(np.asarray(v, dtype=np.float64)) for n, v in dict(given["values"]).items()
              if str(n) in annualized}
    return values, counts, years


def _valid_times(times, dated):
    """The pairs' valid times ``(seconds since 2000-01-01 00:00:00 in their calendar, year, month)`` of ``times``:
    dates (cftime or datetime objects, numpy datetime64), or seconds (then no year or month; refused when ``dated``,
    for the annual and seasonal means)."""
    values = np.asarray(times)
    if values.dtype.kind in "fiu":
        if dated:
            raise ValueError("times: the annual and seasonal means need dates (cftime or datetime), got numbers")
        return values.astype(np.float64), np.full(values.shape, 2000, np.int64), np.ones(values.shape, np.int64)
    import cftime

    if values.dtype.kind == "M":
        values = values.astype("datetime64[us]").astype(object)
    flat = list(values.ravel())
    calendar = (getattr(flat[0], "calendar", None) or "standard") if flat else "standard"
    seconds = np.asarray(cftime.date2num(flat, "seconds since 2000-01-01 00:00:00", calendar), dtype=np.float64)
    years = np.array([d.year for d in flat], dtype=np.int64)
    months = np.array([d.month for d in flat], dtype=np.int64)
    return seconds.reshape(values.shape), years.reshape(values.shape), months.reshape(values.shape)


_NEAR_ZERO_DEFAULTS = {"variables": None, "eps": 0.0, "per_variable_eps": {}, "include_maps": False}


def _near_zero_settings(options, variables):
    """``{variable: compiled aggregator settings}`` of ACE's near_zero_fraction config fields ``options`` (a dict of
    _NEAR_ZERO_DEFAULTS' keys) over ``variables``: the library's rule (a name that is not among ``variables`` or is
    given twice, and a threshold below 0 or NaN, are refused)."""
    unknown = sorted(set(options) - set(_NEAR_ZERO_DEFAULTS))
    if unknown:
        raise ValueError(f"near_zero_fraction: unknown option(s) {unknown}; known: {sorted(_NEAR_ZERO_DEFAULTS)}")
    o = {**_NEAR_ZERO_DEFAULTS, **options}
    chosen = None if o["variables"] is None else [str(v) for v in o["variables"]]
    per_variable = {str(k): float(v) for k, v in dict(o["per_variable_eps"]).items()}
    compiled = _core.near_zero_fraction_options(list(variables), chosen, float(o["eps"]), per_variable,
                                                bool(o["include_maps"]))
    return {name: {"near_zero_eps": eps, "near_zero_maps": maps} for name, (eps, maps) in compiled.items()}


_SPECTRUM_DEFAULTS = {"grid": "legendre-gauss", "truncation": "torch-harmonics-0.8", "lmax": None, "mmax": None,
                      "convention": "ace", "fill_steps": 4, "variables": None}


def _spectrum_arguments(spectrum):
    """The compiled aggregator's spectrum arguments of ``spectrum`` (True or a dict of _SPECTRUM_DEFAULTS' keys)."""
    given = {} if spectrum is True else dict(spectrum)
    unknown = sorted(set(given) - set(_SPECTRUM_DEFAULTS))
    if unknown:
        raise ValueError(f"spectrum: unknown option(s) {unknown}; known: {sorted(_SPECTRUM_DEFAULTS)}")
    o = {**_SPECTRUM_DEFAULTS, **given}
    for key in ("lmax", "mmax", "fill_steps"):
        if o[key] is not None and (not isinstance(o[key], int) or isinstance(o[key], bool) or o[key] < 0):
            raise ValueError(f"spectrum {key}={o[key]!r}: expected a non-negative int or None")
    return {"spectrum_grid": str(o["grid"]), "spectrum_truncation": str(o["truncation"]),
            "spectrum_convention": str(o["convention"]), "spectrum_lmax": o["lmax"] or 0,
            "spectrum_mmax": o["mmax"] or 0, "spectrum_fill_steps": -1 if o["fill_steps"] is None else o["fill_steps"]}


def _array(values, shape):
    """float64 bytes from the compiled module as a numpy array of ``shape``."""
    return np.frombuffer(values, dtype=np.float64).reshape(shape).copy()
