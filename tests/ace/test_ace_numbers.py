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
