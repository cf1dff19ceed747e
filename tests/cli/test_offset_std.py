"""Standard deviations of fields far from zero (a mean 1e6 to 1e8 times the std), from `gridshard eval` on
two fields and on forecasts, against exact rational arithmetic, and the same bits at every mesh. A sum of
rounded squares, or a variance finalised in 106 bits, loses such a std entirely (docs/design.md §5)."""
import json
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import forecast_files as ff
import make_files


def exact_std(values, weights):
    """The weighted population std of `values` (as stored) with `weights`, exactly, then a 40-digit root."""
    xs = [Fraction(float(v)) for v in np.ravel(values)]
    ws = [Fraction(float(a)) for a in np.ravel(weights)]
    total = sum(ws)
    mean = sum(a * v for a, v in zip(ws, xs)) / total
    variance = sum(a * (v - mean) ** 2 for a, v in zip(ws, xs)) / total
    with localcontext() as context:
        context.prec = 40
        return float((Decimal(variance.numerator) / Decimal(variance.denominator)).sqrt())


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("dtype, noise", [("f8", 1e-3), ("f4", 64.0)])
def test_two_field_std_of_offset_data(mpirun, tmp_path, dtype, noise, meshes):
    rng = np.random.default_rng(3)
    shape = (2, 11, 18)
    truth = (1e8 + noise * rng.standard_normal(shape)).astype(dtype)
    pred = (truth + 0.1 * noise * rng.standard_normal(shape)).astype(dtype)
    truth[1] = truth[1, 0, 0]  # a constant step: exactly 0
    lat = make_files.write_grid_file(tmp_path / "t.nc", truth, dtype=dtype)
    make_files.write_grid_file(tmp_path / "p.nc", pred, dtype=dtype)
    weights = np.broadcast_to(np.cos(np.deg2rad(lat))[:, None], shape[1:])
    first = None
    for ranks, mesh in meshes(((1, "1x1x1"), (3, "1x3x1"), (4, "2x1x2"), (6, "1x2x3"))):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--mesh", mesh,
                   "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        scores = load(out)["variables"]["v"]["per_time"]
        if first is None:
            first = scores
            assert scores["std_truth"][1] == 0.0
            for step in range(shape[0]):
                for key, field in (("std_truth", truth), ("std_pred", pred)):
                    want = exact_std(field[step], weights)
                    assert scores[key][step] == pytest.approx(want, rel=1e-12, abs=0), (key, step)
        else:
            assert scores == first, mesh


def test_forecast_std_of_offset_data_in_regions(mpirun, tmp_path):
    forecast = ff.Forecast(ics=2, members=2, leads=3, nlat=13, nlon=22)
    rng = np.random.default_rng(11)
    truth32, _ = forecast.fields["t2m"]
    pred32 = (1e6 + 0.5 * rng.standard_normal((2, 2, 3, 13, 22))).astype(np.float32)
    forecast.fields = {"t2m": ((1e6 + 0.5 * rng.standard_normal(truth32.shape)).astype(np.float32), pred32)}
    truth_path, pred_path = tmp_path / "autoregressive_target.nc", tmp_path / "autoregressive_predictions.nc"
    ff.write_ace(forecast, truth_path, pred_path)
    lat, lon = forecast.lat.astype(np.float32).astype(np.float64), forecast.lon.astype(np.float32).astype(np.float64)
    one_point = f"point:{lat[6] - 1},{lat[6] + 1},{lon[3] - 1},{lon[3] + 1}"
    box = f"box:{lat[3] - 1},{lat[8] + 1},{lon[2] - 1},{lon[9] + 1}"
    regions = {"global": ff.cos_lat_weights(forecast),
               "box": ff.box_weights(forecast, lat[3] - 1, lat[8] + 1, lon[2] - 1, lon[9] + 1)}
    first = None
    for ranks, mesh in ((1, "1x1x1"), (4, "2x1x2"), (3, "1x3x1")):
        out = tmp_path / f"{mesh}.json"
        r = mpirun(ranks, "eval", "--truth", truth_path, "--pred", pred_path, "--mesh", mesh, "--region", one_point,
                   "--region", box, "--json", out, "--quiet")
        assert r.returncode == 0, r.stderr
        got = load(out)["variables"]["t2m"]["regions"]
        if first is None:
            first = got
            assert got["point"]["per_step"]["weighted_std_gen"] == [0.0] * 3
            for name, weights in regions.items():
                for lead in range(3):
                    want = np.mean([exact_std(pred32[i, m, lead], weights) for i in range(2) for m in range(2)])
                    value = got[name]["per_step"]["weighted_std_gen"][lead]
                    assert value == pytest.approx(want, rel=1e-12, abs=0), (name, lead)
        else:
            assert got == first, mesh
