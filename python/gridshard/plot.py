"""Plots of a forecast evaluation: ``python3 -m gridshard.plot DIAGNOSTICS_DIR [--out DIR]``.

Reads the diagnostics files that ``gridshard eval --diagnostics DIR`` writes (``mean_diagnostics.nc``,
``zonal_mean_diagnostics.nc``, ``time_mean_diagnostics.nc``) and draws, per variable, as PNG files:

- ``scores-VAR.png``: the scores against lead time (RMSE, with the ensemble-mean RMSE and the spread
  when the forecast is an ensemble; CRPS; bias; the anomaly correlation when present);
- ``zonal_mean-VAR.png``: the zonal means of the prediction and of the target over (lead time, latitude),
  and their difference;
- ``bias_map-VAR.png``: the time-mean bias map over (latitude, longitude);
- ``power_spectrum-VAR.png``: with ``--spectrum``, the mean power spectra of the prediction (dashed) and of the
  target against the wavenumber on log axes, as ACE draws them (a folder of two fields holds these only);
- ``trend-VAR.png``: with ``--trend``, the target's and the prediction's trend maps and their difference, as ACE
  logs its trend images;
- ``near_zero_fraction-VAR.png``: with ``--near-zero-fraction-include-maps``, the prediction's and the target's
  per-cell near-zero fractions and their difference, as ACE logs its images;
- ``video-VAR.png``: with ``--video``, the prediction's and the target's mean maps at the first, middle and last
  lead times of ACE's video (a frame each), and with ``--enable-extended-videos`` their bias;
- ``enso_coefficient-VAR.png``: with ``--enso-coefficient-index`` (or from the drop-in's files), the target's and the
  prediction's regression maps on the Niño 3.4 index and their difference, as ACE logs its coefficient images;
- ``seasonal-VAR.png``: with ``--seasonal``, per season the target's and the prediction's anomalies (their seasonal
  means less the target's mean over the seasons) and the prediction's bias, the panels of ACE's two seasonal images;
- ``annual-VAR.png``: with ``--annual``, the annual means per year, each sample's and their mean, and the target's
  mean, as ACE logs its annual plot;
- ``enso_index-VAR.png``: with ``--enso-index``, the Niño 3.4 index per month, each sample's and their mean, and the
  target's mean, as ACE logs its index plot;
- ``ipo_index-VAR.png``: with ``--ipo-index``, the IPO tripole index per month (unfiltered), as the ENSO index's;
- ``histogram-VAR.png``: with ``--histogram``, the target's and the prediction's (dashed) histograms as densities on
  a log axis, the empty bins at either end trimmed, as ACE logs its histogram images.

The folder the drop-in writes in ACE's loop (``gridshard.ace``) holds ACE's own files: of it the climate images
are drawn (and the spectra), not the scores, which ACE logs itself.

Each image is written to a temporary file in the output folder and renamed, so a failed run leaves none;
the diagnostics files are only read. Needs matplotlib and netCDF4 (Debian's python3-matplotlib and
python3-netcdf4); importing gridshard does not import them.
"""
import argparse
import sys
from pathlib import Path

FILES = ("mean_diagnostics.nc", "zonal_mean_diagnostics.nc", "time_mean_diagnostics.nc")
SPECTRUM = "power_spectrum_diagnostics.nc"
COEFFICIENT = "enso_coefficient_diagnostics.nc"
SEASONAL = "seasonal_diagnostics.nc"  # the tool's only: ACE's seasonal metric writes no file
CLIMATE = ("trend_diagnostics.nc", "near_zero_fraction_diagnostics.nc", "video_diagnostics.nc",
           "annual_diagnostics.nc", "enso_index_diagnostics.nc", "histogram_diagnostics.nc", "ipo_index_diagnostics.nc")


def _read(path):
    """Every variable of a diagnostics file as float64 with NaN for the fill value, and its global attributes."""
    import netCDF4
    import numpy as np

    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        values = {}
        for name, variable in ds.variables.items():
            if variable.dtype.kind not in "fiu":
                continue  # a string coordinate (the spectra's source)
            data = np.asarray(variable[:], dtype=np.float64)
            fill = getattr(variable, "_FillValue", None)
            if fill is not None:
                data = np.where(data == fill, np.nan, data)
            values[name] = data
        return values, {key: ds.getncattr(key) for key in ds.ncattrs()}


def _lead_units(path):
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        return getattr(ds.variables["lead_time"], "units", "") if "lead_time" in ds.variables else ""


def _save(figure, path):
    """Writes the figure through the library's atomic writer (gridshard._outputs): an unnamed temporary beside
    `path`, flushed, then renamed over it, in the umask's mode."""
    from . import _outputs

    _outputs.write_all([(path, lambda temporary: figure.savefig(temporary, dpi=100, format="png"))])


_HOURS_PER_UNIT = {"microseconds": 1 / 3.6e9, "milliseconds": 1 / 3.6e6, "seconds": 1 / 3600, "minutes": 1 / 60,
                   "hours": 1.0, "days": 24.0}


def _lead_axis(mean, lead_units, steps):
    """Lead times in hours when the file's lead_time has a unit of time, else forecast steps."""
    import numpy as np

    lead = mean.get("lead_time")
    factor = _HOURS_PER_UNIT.get(str(lead_units).strip().lower())
    if lead is None or len(lead) != steps or factor is None:
        return np.arange(steps), "forecast step"
    return lead * factor, "lead time (hours)"


def plot_scores(mean, lead_units, variable, out):
    import matplotlib.pyplot as plt

    get = lambda score: mean.get(f"{score}-{variable}")  # noqa: E731
    rmse = get("weighted_rmse")
    x, label = _lead_axis(mean, lead_units, len(rmse))
    panels = [("RMSE", [("weighted_rmse", "RMSE (mean over samples)"), ("ensemble_mean_rmse", "ensemble-mean RMSE"),
                        ("spread", "ensemble spread")]),
              ("bias", [("weighted_bias", "bias")])]
    if get("crps") is not None:
        panels.append(("CRPS", [("crps", "CRPS"), ("fair_crps", "fair CRPS")]))
    if get("acc") is not None:
        panels.append(("anomaly correlation", [("acc", "ACC")]))
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.8), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels):
        for score, name in lines:
            values = get(score)
            if values is not None:
                style = "--" if score == "spread" else "-"
                ax.plot(x, values, style, marker="o", markersize=3, label=name)
        ax.set_title(f"{variable}: {title}")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    figure.tight_layout()
    _save(figure, out / f"scores-{variable}.png")
    plt.close(figure)


def plot_zonal(zonal, variable, out):
    import matplotlib.pyplot as plt
    import numpy as np

    gen = zonal[f"gen-{variable}"]
    error = zonal[f"error-{variable}"]
    target = gen - error
    lat = zonal["lat"]
    steps = np.arange(gen.shape[0])
    figure, axes = plt.subplots(1, 3, figsize=(14, 4))
    low, high = np.nanmin([gen, target]), np.nanmax([gen, target])
    for ax, values, title in ((axes[0], gen, "prediction"), (axes[1], target, "target")):
        mesh = ax.pcolormesh(steps, lat, values.T, shading="nearest", vmin=low, vmax=high, cmap="viridis")
        ax.set_title(f"{variable} zonal mean, {title}")
        figure.colorbar(mesh, ax=ax)
    limit = np.nanmax(np.abs(error)) or 1.0
    mesh = axes[2].pcolormesh(steps, lat, error.T, shading="nearest", vmin=-limit, vmax=limit, cmap="RdBu_r")
    axes[2].set_title(f"{variable} zonal-mean error (prediction - target)")
    figure.colorbar(mesh, ax=axes[2])
    for ax in axes:
        ax.set_xlabel("forecast step")
        ax.set_ylabel("latitude")
    figure.tight_layout()
    _save(figure, out / f"zonal_mean-{variable}.png")
    plt.close(figure)


def plot_bias_map(maps, variable, out):
    import matplotlib.pyplot as plt
    import numpy as np

    bias = maps[f"bias_map-{variable}"]
    lat, lon = maps["lat"], maps["lon"]
    limit = np.nanmax(np.abs(bias)) if np.isfinite(bias).any() else 1.0
    figure, ax = plt.subplots(figsize=(9, 4.5))
    mesh = ax.pcolormesh(lon, lat, bias, shading="nearest", vmin=-limit, vmax=limit, cmap="RdBu_r")
    figure.colorbar(mesh, ax=ax, label="prediction - target")
    ax.set_title(f"{variable}: time-mean bias")
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    figure.tight_layout()
    _save(figure, out / f"bias_map-{variable}.png")
    plt.close(figure)


def plot_spectrum(spectra, variable, out):
    import matplotlib.pyplot as plt
    import numpy as np

    prediction, target = spectra[variable]
    wavenumber = spectra["wavenumber"]
    shown = wavenumber > 0  # log axes: the mean (wavenumber 0) left out
    figure, ax = plt.subplots(figsize=(6, 4.2))
    ax.loglog(wavenumber[shown], np.abs(target[shown]), "-", color="C0", label="target")
    ax.loglog(wavenumber[shown], np.abs(prediction[shown]), "--", color="C1", label="prediction")
    ax.set_title(f"{variable}: spherical power spectrum")
    ax.set_xlabel("total wavenumber")
    ax.set_ylabel("power")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    figure.tight_layout()
    _save(figure, out / f"power_spectrum-{variable}.png")
    plt.close(figure)


def _map_panels(rows, title, path):
    """One figure of map panels: `rows` a list of rows of (label, 2-D values, diverging); the panels of a row share
    a colour scale (symmetric about 0 where diverging)."""
    import matplotlib.pyplot as plt
    import numpy as np

    columns = max(len(row) for row in rows)
    figure, axes = plt.subplots(len(rows), columns, figsize=(4.2 * columns, 2.6 * len(rows) + 0.6), squeeze=False)
    for r, row in enumerate(rows):
        finite = [v[np.isfinite(v)] for _, v, _ in row]
        low = min((f.min() for f in finite if f.size), default=0.0)
        high = max((f.max() for f in finite if f.size), default=1.0)
        for c, (label, values, diverging) in enumerate(row):
            limit = max(abs(low), abs(high)) or 1.0
            bounds = dict(vmin=-limit, vmax=limit, cmap="RdBu_r") if diverging else \
                dict(vmin=low, vmax=high if high > low else low + 1.0, cmap="viridis")
            image = axes[r][c].imshow(values, origin="lower", aspect="auto", interpolation="nearest", **bounds)
            figure.colorbar(image, ax=axes[r][c])
            axes[r][c].set_title(label, fontsize=9)
        for c in range(len(row), columns):
            axes[r][c].axis("off")
    figure.suptitle(title)
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)


def _series_panel(times, target, prediction, title, ylabel, path):
    """A series per sample of the prediction (thin), their mean, and the target's mean over samples (NaN skipped)
    against `times`, as ACE's plot_mean_and_samples draws them."""
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axis = plt.subplots(figsize=(8, 4))
    for row in prediction:
        axis.plot(times, row, color="tab:blue", linewidth=0.5, alpha=0.5)
    with np.errstate(all="ignore"):
        axis.plot(times, np.nanmean(prediction, axis=0), color="tab:blue", linewidth=2, label="prediction mean")
        axis.plot(times, np.nanmean(target, axis=0), color="tab:orange", linewidth=2, label="target mean")
    axis.set_title(title)
    axis.set_ylabel(ylabel)
    axis.legend()
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)


def plot_histograms(histograms, variable, out):
    """ACE's histogram image of `variable`: per source its counts over their integral against the bins' lower edges,
    steps on a log axis, the empty bins at either end left out (fme's ComparedDynamicHistograms)."""
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axis = plt.subplots()
    for k, (label, style) in enumerate((("target", "-"), ("prediction", "--"))):
        counts, edges = histograms[variable][k], histograms[f"{variable}_bin_edges"][k]
        held = np.flatnonzero(counts > 0)
        if held.size == 0:
            continue
        counts, edges = counts[held[0]:held[-1] + 1], edges[held[0]:held[-1] + 2]
        axis.step(edges[:-1], counts / np.sum(counts * np.diff(edges)), style, where="post", label=label,
                  color=f"C{k}")
    axis.set(yscale="log", title=f"{variable}: histogram")
    axis.legend()
    figure.tight_layout()
    _save(figure, out / f"histogram-{variable}.png")
    plt.close(figure)


def _decimal_years(path):
    """The time coordinate of `path` as decimal years (year + (month - 1) / 12), in its calendar."""
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        time = ds["time"]
        dates = netCDF4.num2date(time[:], time.units, getattr(time, "calendar", "standard"))
        return [d.year + (d.month - 1) / 12 for d in dates]


def plot_climate(folder, out):
    """The trend, ENSO coefficient, seasonal, near-zero fraction, video, annual, ENSO index and histogram images of the
    files
    present in `folder`; returns the paths."""
    written = []
    for file, name, title in ((CLIMATE[0], "trend", "linear trend per year"),
                              (COEFFICIENT, "enso_coefficient", "regression coefficient with the Nino 3.4 index")):
        if not (folder / file).is_file():  # (source = target, prediction, lat, lon) per variable
            continue
        maps, _ = _read(folder / file)
        for variable in (n for n, v in maps.items() if v.ndim == 3):
            target, prediction = maps[variable]
            _map_panels([[("target", target, True), ("prediction", prediction, True),
                          ("prediction - target", prediction - target, True)]],
                        f"{variable}: {title}", out / f"{name}-{variable}.png")
            written.append(out / f"{name}-{variable}.png")
    if (folder / SEASONAL).is_file():  # (source = target, prediction, season, lat, lon) per variable
        maps, _ = _read(folder / SEASONAL)
        for variable in (n for n, v in maps.items() if v.ndim == 4):
            target, prediction = maps[variable]
            pattern = target.mean(axis=0)  # ACE's anomalies: less the target's mean over the seasons
            seasons = ("DJF", "MAM", "JJA", "SON")
            rows = [[(f"{label} anomaly, {season}", values[k] - pattern, True) for k, season in enumerate(seasons)]
                    for label, values in (("target", target), ("prediction", prediction))]
            rows.append([(f"bias, {season}", prediction[k] - target[k], True) for k, season in enumerate(seasons)])
            _map_panels(rows, f"{variable}: seasonal means", out / f"seasonal-{variable}.png")
            written.append(out / f"seasonal-{variable}.png")
    if (folder / CLIMATE[1]).is_file():  # gen_map-VAR, target_map-VAR, error_map-VAR
        fractions, _ = _read(folder / CLIMATE[1])
        for variable in (n[len("gen_map-"):] for n in fractions if n.startswith("gen_map-")):
            _map_panels([[("prediction", fractions[f"gen_map-{variable}"], False),
                          ("target", fractions[f"target_map-{variable}"], False),
                          ("prediction - target", fractions[f"error_map-{variable}"], True)]],
                        f"{variable}: fraction of the time at or below eps", out / f"near_zero_fraction-{variable}.png")
            written.append(out / f"near_zero_fraction-{variable}.png")
    if (folder / CLIMATE[2]).is_file():  # (source = prediction, target, timestep, lat, lon) per variable
        import numpy as np

        videos, _ = _read(folder / CLIMATE[2])
        for variable in (n for n, v in videos.items() if v.ndim == 4):
            prediction, target = videos[variable]
            steps = [k for k in range(prediction.shape[0]) if np.isfinite(prediction[k]).any()]
            frames = sorted({steps[0], steps[len(steps) // 2], steps[-1]}) if steps else []
            rows = [[(f"{source}, step {k}", values[k], False) for k in frames]
                    for source, values in (("prediction", prediction), ("target", target))]
            if f"bias_{variable}" in videos:  # ACE's extended videos: the bias row too
                rows.append([(f"bias, step {k}", videos[f"bias_{variable}"][k], True) for k in frames])
            if frames:
                _map_panels(rows, f"{variable}: mean over every sample", out / f"video-{variable}.png")
                written.append(out / f"video-{variable}.png")
    for file, name, axis, title in ((CLIMATE[3], "annual", "year", "annual global mean"),
                                    (CLIMATE[4], "enso_index", "time", "Nino 3.4 index"),
                                    (CLIMATE[6], "ipo_index", "time", "IPO tripole index (unfiltered)")):
        if not (folder / file).is_file():  # (source = target, prediction, sample, year or time) per variable
            continue
        series, _ = _read(folder / file)
        times = series[axis] if axis == "year" else _decimal_years(folder / file)
        for variable in (n for n, v in series.items() if v.ndim == 3 and n != "counts"):
            target, prediction = series[variable]
            _series_panel(times, target, prediction, f"{variable}: {title}", variable, out / f"{name}-{variable}.png")
            written.append(out / f"{name}-{variable}.png")
    if (folder / CLIMATE[5]).is_file():  # VAR (source, bin), VAR_bin_edges (source, bin_edges)
        histograms, _ = _read(folder / CLIMATE[5])
        for variable in (n for n in histograms if f"{n}_bin_edges" in histograms):
            plot_histograms(histograms, variable, out)
            written.append(out / f"histogram-{variable}.png")
    return written


def plot(folder, out=None):
    """Draws every plot of the diagnostics in `folder` into `out` (default: `folder`); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    folder = Path(folder)
    out = Path(out) if out is not None else folder
    present = [name for name in FILES if (folder / name).is_file()]
    has_spectrum = (folder / SPECTRUM).is_file()
    has_climate = any((folder / name).is_file() for name in CLIMATE + (COEFFICIENT, SEASONAL))
    missing = [name for name in FILES if name not in present]
    if (present and missing) or (not present and not has_spectrum and not has_climate):
        raise FileNotFoundError(f"{folder}: no {', '.join(missing + ([] if present else [SPECTRUM]))} (write them "
                                f"with gridshard eval --diagnostics)")
    if not out.is_dir():
        raise FileNotFoundError(f"--out {out}: not an existing folder")
    written = plot_climate(folder, out)
    if has_spectrum:
        spectra, _ = _read(folder / SPECTRUM)
        for variable in (name for name, values in spectra.items() if values.ndim == 2):
            plot_spectrum(spectra, variable, out)
            written.append(out / f"power_spectrum-{variable}.png")
    if not present:
        return written
    (mean, attributes), (zonal, _), (maps, _) = (_read(folder / name) for name in FILES)
    if "variables" not in attributes:
        if written:  # the drop-in's folder in ACE's loop: ACE's own files, whose scores ACE logs; the climate images
            return written
        raise KeyError(f"{folder / FILES[0]}: no 'variables' attribute; not written by gridshard eval --diagnostics")
    lead_units = _lead_units(folder / FILES[0])
    for variable in str(attributes["variables"]).split():
        plot_scores(mean, lead_units, variable, out)
        written.append(out / f"scores-{variable}.png")
        if f"gen-{variable}" in zonal:
            plot_zonal(zonal, variable, out)
            written.append(out / f"zonal_mean-{variable}.png")
        if f"bias_map-{variable}" in maps:
            plot_bias_map(maps, variable, out)
            written.append(out / f"bias_map-{variable}.png")
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m gridshard.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the --diagnostics folder of a forecast evaluation")
    parser.add_argument("--out", help="where to write the PNG files (default: the folder)")
    args = parser.parse_args(argv)
    try:
        written = plot(args.folder, args.out)
    except (FileNotFoundError, KeyError) as error:
        print(f"gridshard.plot: error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
