"""The forecast file pair of `make bench` step 8: ACE's layout (tests/cli/forecast_files.py writes it), one
float32 variable t2m on the 0.25-degree grid, 2 initial conditions x 8 members x 4 six-hourly lead times.

Usage: /usr/bin/python3 make_forecast_files.py TRUTH.nc PRED.nc
"""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "cli"))
import forecast_files as ff  # noqa: E402

ICS, MEMBERS, LEADS = 2, 8, 4


class QuarterDegreeForecast:
    """What forecast_files.write_ace reads: coordinates, times and the fields, generated here."""

    def __init__(self, seed=1):
        rng = np.random.default_rng(seed)
        self.ics, self.members, self.leads = ICS, MEMBERS, LEADS
        self.lat = np.linspace(-90, 90, 721)
        self.lon = np.arange(1440) * 0.25
        la, lo = np.deg2rad(self.lat)[:, None], np.deg2rad(self.lon)[None, :]
        truth = np.empty((ICS, LEADS, 721, 1440), np.float32)
        pred = np.empty((ICS, MEMBERS, LEADS, 721, 1440), np.float32)
        for i in range(ICS):
            for lead in range(LEADS):
                truth[i, lead] = (250 + 40 * np.cos(la) + 10 * np.sin(3 * lo + 0.2 * (i + lead)) * np.cos(2 * la)
                                  + rng.normal(0, 1, (721, 1440)))
                for m in range(MEMBERS):
                    error = 0.3 + np.sqrt(lead) * rng.normal(0, 0.8, (721, 1440)) if lead else 0.0
                    pred[i, m, lead] = truth[i, lead] + error
        self.fields = {"t2m": (truth, pred)}
        self.init_times = ff.EPOCH_2020_US + np.arange(ICS) * 24 * ff.HOUR_US
        self.lead_us = np.arange(LEADS) * 6 * ff.HOUR_US


if __name__ == "__main__":
    ff.write_ace(QuarterDegreeForecast(), sys.argv[1], sys.argv[2])
