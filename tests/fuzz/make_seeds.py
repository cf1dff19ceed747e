"""Writes the fuzz target's seed corpus: small valid netCDF files in every classic format (and netCDF-4),
with packing, fill values, valid ranges, levels, no time, curvilinear coordinates, and cut-short copies."""
import sys
from pathlib import Path

import netCDF4
import numpy as np


def write(path, fmt, *, packed=False, valid=False, levels=False, time=True, curvilinear=False, dtype="f4"):
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        lead = ()
        if time:
            ds.createDimension("time", None)
            t = ds.createVariable("time", "f8", ("time",))
            t.units, t.calendar = "hours since 2000-01-01", "standard"
            t[:] = [0, 6]
            lead = ("time",)
        if levels:
            ds.createDimension("lev", 2)
            lev = ds.createVariable("lev", "f8", ("lev",))
            lev.axis = "Z"
            lev[:] = [850, 500]
            lead += ("lev",)
        ds.createDimension("lat", 3)
        ds.createDimension("lon", 4)
        ds.createDimension("bnds", 2)
        lat = ds.createVariable("lat", "f8", ("lat",))
        lat.units, lat.bounds = "degrees_north", "lat_bnds"
        lat[:] = [-60, 0, 60]
        ds.createVariable("lat_bnds", "f8", ("lat", "bnds"))[:] = [[-90, -30], [-30, 30], [30, 90]]
        lon = ds.createVariable("lon", "f8", ("lon",))
        lon.units = "degrees_east"
        lon[:] = [0, 90, 180, 270]
        shape = tuple([2] * len(lead)) + (3, 4)
        values = np.arange(np.prod(shape), dtype="f8").reshape(shape)
        if packed:
            v = ds.createVariable("v", "i2", lead + ("lat", "lon"), fill_value=np.int16(-32767))
            v.scale_factor, v.add_offset = 0.5, 100.0
        else:
            v = ds.createVariable("v", dtype, lead + ("lat", "lon"), fill_value=-999.0)
        v.units = "K"
        if valid:
            v.valid_range = np.array([0, 10], dtype="f4" if not packed else "i2")
        if curvilinear:
            la = ds.createVariable("lat2d", "f8", ("lat", "lon"))
            la.standard_name = "latitude"
            la[:] = 0.0
            v.coordinates = "lat2d"
        v[:] = values


def main():
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for fmt in ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA", "NETCDF4"]:
        for options in [{}, {"packed": True}, {"valid": True}, {"levels": True}, {"time": False},
                        {"curvilinear": True}, {"dtype": "f8"}, {"packed": True, "valid": True}]:
            path = folder / f"seed{n:02d}.nc"
            write(path, fmt, **options)
            data = path.read_bytes()
            (folder / f"seed{n:02d}_cut.nc").write_bytes(data[: len(data) * 3 // 4])
            n += 1


if __name__ == "__main__":
    main()
