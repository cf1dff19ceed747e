"""Writes ACE's own reference Niño 3.4 index (fme's ``NINO34_INDEX``, in its calendar) as a netCDF file for
``gridshard eval --enso-coefficient-index``, so that a run scored from its files gets the ENSO coefficient ACE's loop
gives. Needs fme; written through gridshard's atomic writer (complete or absent).

    python3 -m gridshard.ace.enso_reference_index nino34.nc
"""
import argparse

import numpy as np

from .._outputs import write_all
from .calendar import ace_reference_index


def write(path):
    """Writes ACE's reference index to ``path``: ``time`` (days since 1940-01-01 in the index's calendar) and
    ``nino34_index`` over it."""
    import cftime
    import netCDF4

    dates, values, calendar = ace_reference_index()
    units = "days since 1940-01-01"

    def fill(temporary):
        with netCDF4.Dataset(temporary, "w", format="NETCDF3_64BIT_OFFSET") as f:
            f.title = "ACE's reference Nino 3.4 index (fme's NINO34_INDEX)"
            f.createDimension("time", len(dates))
            time = f.createVariable("time", "f8", ("time",))
            time.units, time.calendar = units, calendar
            time[:] = cftime.date2num([cftime.datetime(*d, calendar=calendar) for d in dates], units, calendar)
            index = f.createVariable("nino34_index", "f8", ("time",))
            index.long_name = "Nino 3.4 index anomaly, 3-monthly centered running mean"
            index.units = "K"
            index[:] = np.asarray(values, dtype=np.float64)

    write_all([(path, fill)])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m gridshard.ace.enso_reference_index", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the netCDF file to write")
    write(parser.parse_args(argv).path)


if __name__ == "__main__":
    main()
