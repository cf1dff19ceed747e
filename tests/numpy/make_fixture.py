"""Writes a test field and numpy's answers for it, for numpy_agreement_test.

Fields: truth and prediction of shape (2, 19, 24) float32 with a ~30% NaN land mask in channel 1 and an
all-NaN row; latitudes pole to pole; cos-lat weights normalised to sum 1 (poles weigh 0). numpy computes
every reference in float64: weighted sums with np.where / np.sum, NaN-aware means with np.nansum,
gradients with np.gradient on the float32 fields (unit spacing, edge_order 1; float32 magnitudes, as
gridshard computes a float field's, averaged in float64 over the points where both are valid), zonal means with
np.nanmean, and each channel's quantiles with np.nanquantile (numpy's own bits, both methods).

Usage: make_fixture.py OUTDIR  -> OUTDIR/fields.bin (truth f4, prediction f4, lat f8), OUTDIR/expected.json
"""
import json
import sys
from fractions import Fraction
import warnings
from pathlib import Path

import numpy as np

CHANNELS, NLAT, NLON = 2, 19, 24
QUANTILES = [0.0, 1e-6, 0.1, 0.5, 0.99, 0.9999, 1.0]


def fields(rng):
    i = np.arange(NLAT)[:, None]
    j = np.arange(NLON)[None, :]
    truth = np.empty((CHANNELS, NLAT, NLON), np.float32)
    prediction = np.empty_like(truth)
    for c in range(CHANNELS):
        t = 250 + 30 * np.sin(0.7 * i + 0.45 * j + c) + 5 * rng.random((NLAT, NLON))
        truth[c] = t
        prediction[c] = t + 2 * (rng.random((NLAT, NLON)) - 0.4)
    land = rng.random((NLAT, NLON)) < 0.3
    truth[1][land] = np.nan
    prediction[1][land] = np.nan
    truth[1, 3, :] = np.nan
    return truth, prediction


def weighted_mean(x, a):
    return float(np.sum(np.where(a != 0, x, 0) * a) / np.sum(a))


def weighted_nanmean(x, a):
    valid = ~np.isnan(x) & (a != 0)
    return float(np.sum(np.where(valid, x * a, 0)) / np.sum(np.where(valid, a, 0)))


def gradient_magnitude(x):
    """|grad x| of a float32 field in float32 arithmetic, as gridshard computes a float field's magnitudes."""
    gy, gx = np.gradient(x, axis=(-2, -1))
    return np.sqrt(gy * gy + gx * gx)


def gradient_means(t, p, a):
    """The weighted means of |grad t| and |grad p|, each over its own non-NaN points (ACE's rule)."""
    return tuple(weighted_nanmean(g.astype(np.float64), a) for g in (gradient_magnitude(t), gradient_magnitude(p)))


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    truth, prediction = fields(np.random.default_rng(2026))
    lat = np.linspace(-90.0, 90.0, NLAT)
    cosines = np.where(np.abs(lat) == 90.0, 0.0, np.cos(np.deg2rad(lat)))
    a = np.broadcast_to((cosines / (cosines.sum() * NLON))[:, None], (NLAT, NLON))
    expected = {name: [] for name in (
        "weighted_mean", "weighted_nanmean", "weighted_std", "bias", "rmse", "grad_mag_percent_diff")}
    for c in range(CHANNELS):
        t = truth[c].astype(np.float64)
        p = prediction[c].astype(np.float64)
        mean = weighted_mean(t, a)
        expected["weighted_mean"].append(mean)
        expected["weighted_nanmean"].append(weighted_nanmean(t, a))
        expected["weighted_std"].append(float(np.sqrt(weighted_mean((t - mean) ** 2, a))))
        expected["bias"].append(weighted_mean(p - t, a))
        expected["rmse"].append(float(np.sqrt(weighted_mean((p - t) ** 2, a))))
        gt, gp = gradient_means(truth[c], prediction[c], a)
        expected["grad_mag_percent_diff"].append(100 * (gp - gt) / gt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the all-NaN row
        zonal = np.nanmean(truth.astype(np.float64), axis=-1)
    expected["zonal_mean"] = zonal.ravel().tolist()
    # Quantiles of each channel over the grid (NaN skipped), both methods: numpy's own values, compared bit for bit.
    for method in ("linear", "inverted_cdf"):
        values = np.nanquantile(truth, QUANTILES, axis=(-2, -1), method=method)  # (len(q), channels)
        expected["quantile_" + method] = values.astype(np.float64).ravel().tolist()
    expected["quantiles"] = QUANTILES
    # The weighted "inverted_cdf" with the integer weights (i + 2 j) % 4 of cell (i, j), zeros among them: in exact
    # arithmetic (numpy 1.24 has no weights), the smallest value whose cumulative weight reaches q times the total.
    weights = np.add.outer(np.arange(NLAT), 2 * np.arange(NLON)) % 4
    weighted = []
    for q in QUANTILES:
        for c in range(CHANNELS):
            pairs = sorted((float(v), int(w)) for v, w in zip(truth[c].ravel(), weights.ravel()) if not np.isnan(v))
            total, cumulative = sum(w for _, w in pairs), 0
            chosen = np.nan
            for value, w in pairs:
                cumulative += w
                if cumulative > 0 and cumulative >= Fraction(q) * total:
                    chosen = value
                    break
            weighted.append(chosen)
    expected["quantile_weighted_inverted_cdf"] = weighted
    # JSON has no NaN: null stands for it.
    for key, values in expected.items():
        expected[key] = [None if np.isnan(v) else v for v in values]
    expected["shape"] = [CHANNELS, NLAT, NLON]
    with open(out / "fields.bin", "wb") as f:
        f.write(truth.tobytes())
        f.write(prediction.tobytes())
        f.write(lat.astype(np.float64).tobytes())
    (out / "expected.json").write_text(json.dumps(expected))


if __name__ == "__main__":
    main()
