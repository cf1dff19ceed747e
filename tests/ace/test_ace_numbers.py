"""gridshard's scores under ACE's names against ACE's own functions (fme.core.metrics, computed here on the
whole field in each process), on data where the two rules could part: NaN in different places in truth
and prediction. Run by run_ace_tests.py under mpirun at ACE's CI layouts, with the mesh of the layout."""
import numpy as np
import pytest
import torch
from fme.core import metrics as ace_metrics
from mpi_pytest import mesh_shape

import gridshard

pytestmark = pytest.mark.parallel


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_magnitude_percent_diff_is_aces_with_nan_in_different_places(dtype):
    _, h, w = mesh_shape()
    dist = gridshard.Distributed(spatial_parallelism=(h, w))
    rng = np.random.default_rng(4)
    grid = (7, 15)
    truth = 280 + 10 * rng.standard_normal((2, 3) + grid)
    pred = truth + rng.standard_normal(truth.shape)
    truth[0, 1, 3, 4:7] = np.nan  # the truth's own NaN
    pred[0, 1, 5, 9] = np.nan  # the prediction's, elsewhere
    pred[1, 2, 0, :] = np.nan
    weights = rng.uniform(0.5, 2.0, grid)
    t, p, a = (torch.tensor(x, dtype=dtype if x.ndim == 4 else torch.float64) for x in (truth, pred, weights))
    want = ace_metrics.gradient_magnitude_percent_diff(t, p, weights=a, dim=(-2, -1))
    slices = dist.get_local_slices(truth.shape)
    got = dist.gradient_magnitude_percent_diff(t[slices], p[slices], a[slices[-2:]], dim=(-2, -1), img_shape=grid)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=tolerance, atol=tolerance)
    # The pair rule would give another number here (the test can fail): check the data make it so.
    gt, gp = ace_metrics.gradient_magnitude(t, dim=(-2, -1)), ace_metrics.gradient_magnitude(p, dim=(-2, -1))
    both = ~(torch.isnan(gt) | torch.isnan(gp))
    pair = 100 * (ace_metrics.weighted_nanmean(torch.where(both, gp, np.nan), a, dim=(-2, -1)) /
                  ace_metrics.weighted_nanmean(torch.where(both, gt, np.nan), a, dim=(-2, -1)) - 1)
    assert not np.allclose(pair[0, 1].item(), want[0, 1].item(), rtol=1e-3)


@pytest.mark.parametrize("calendar", ["julian", "noleap", "proleptic_gregorian", "standard", "all_leap"])
def test_the_enso_coefficient_index_is_aces_to_the_bit(calendar):
    """gridshard.sample_index_series (io::sample_index_series: the drop-in's and `gridshard eval`'s ENSO coefficient
    index) against ACE's own get_sample_index_series on ACE's own reference index: the same bits for runs that start
    anywhere from 1930 to 2020 (so that the index covers them wholly, partly or not at all), steps of 6 hours to 30
    days, in each calendar ACE converts the index's Julian dates to, and the same samples left out."""
    import datetime

    import cftime
    import xarray as xr
    from fme.ace.aggregator.inference.enso.enso_coefficient import (EnsoCoefficientEvaluatorAggregator,
                                                                    get_sample_index_series)

    from gridshard.ace.calendar import ace_reference_index

    dates, values, index_calendar = ace_reference_index()
    rng = np.random.default_rng(11)
    covered = left_out = 0
    for _ in range(12):
        hours = int(rng.choice([6, 24, 120, 720]))
        steps = int(rng.integers(1, 8 * 365 * 24 // hours))
        year = int(rng.integers(1930, 2021))
        initial = [cftime.datetime(year, int(rng.integers(1, 13)), int(rng.integers(1, 29)), int(rng.choice([0, 18])),
                                   calendar=calendar), cftime.datetime(min(year + 3, 2020), 3, 1, calendar=calendar)]
        ace = get_sample_index_series(EnsoCoefficientEvaluatorAggregator._enso_index,
                                      xr.DataArray(initial, dims=["sample"]), steps, datetime.timedelta(hours=hours))
        mine = gridshard.sample_index_series(dates, values, index_calendar,
                                             [(t.year, t.month, t.day, t.hour, t.minute, float(t.second))
                                              for t in initial], calendar, hours * 3600.0, steps)
        assert mine.shape == (2, steps + 1)
        for want, got in zip(ace, mine):
            if want is None:
                left_out += 1
                assert np.all(np.isnan(got))
            else:
                covered += 1
                want = np.asarray(want.values, dtype=np.float64)
                assert np.array_equal(want.view(np.int64), got.view(np.int64)), (initial, hours, steps)
    assert covered >= 4 and left_out >= 1
