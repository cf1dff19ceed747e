"""Writes small CF netCDF truth/prediction files for the eval tests (also usable from the shell).

The fields follow no particular physics: smooth patterns with noise, a sea-surface variable masked with
_FillValue over ~30% "land", a variable with a level dim, and a packed short variable. Options let the
tests build the awkward cases: north-to-south latitudes, -180..180 longitudes, no bounds, no time.
"""
import argparse

import netCDF4
import numpy as np

FILL = np.float32(-9999.0)


def write(path, nlat, nlon, ntime, *, seed, north_to_south=False, centred_lon=False, bounds=True, time=True,
          shift=0.0, with_levels=True, extra_vars=True, lat_name="lat", coordinate_attributes=True):
    rng = np.random.default_rng(seed)
    dlat = 180.0 / nlat
    lat = -90 + dlat / 2 + dlat * np.arange(nlat)
    if north_to_south:
        lat = lat[::-1]
    dlon = 360.0 / nlon
    lon = dlon * np.arange(nlon) + (-180.0 if centred_lon else 0.0)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        if time:
            ds.createDimension("time", None)
        ds.createDimension(lat_name, nlat)
        ds.createDimension("lon", nlon)
        ds.createDimension("bnds", 2)
        if time:
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "hours since 2000-01-01 00:00:00"
            t.calendar = "standard"
            t.standard_name = "time"
            t[:] = 6.0 * np.arange(ntime)
        y = ds.createVariable(lat_name, "f8", (lat_name,))
        x = ds.createVariable("lon", "f8", ("lon",))
        if coordinate_attributes:
            y.units, y.standard_name = "degrees_north", "latitude"
            x.units, x.standard_name = "degrees_east", "longitude"
        y[:] = lat
        x[:] = lon
        if bounds:
            y.bounds = "lat_bnds"
            x.bounds = "lon_bnds"
            yb = ds.createVariable("lat_bnds", "f8", (lat_name, "bnds"))
            xb = ds.createVariable("lon_bnds", "f8", ("lon", "bnds"))
            yb[:] = np.stack([lat - dlat / 2, lat + dlat / 2], axis=1) if not north_to_south else np.stack(
                [lat + dlat / 2, lat - dlat / 2], axis=1)
            xb[:] = np.stack([lon - dlon / 2, lon + dlon / 2], axis=1)
        lead = ("time",) if time else ()
        steps = ntime if time else 1
        la = np.deg2rad(lat)[None, :, None]
        lo = np.deg2rad(lon)[None, None, :]
        tt = np.arange(steps)[:, None, None]
        t2m = (288 - 40 * np.sin(la) ** 2 + 5 * np.sin(3 * lo + 2 * la - 0.1 * tt + shift)
               + rng.normal(0, 0.5, (steps, nlat, nlon)))
        v = ds.createVariable("t2m", "f4", lead + (lat_name, "lon"))
        v.units = "K"
        v[:] = t2m if time else t2m[0]
        if extra_vars:
            sst = 300 - 30 * np.sin(la) ** 2 + 2 * np.cos(4 * lo + la + shift) + rng.normal(0, 0.2, (steps, nlat, nlon))
            land = (np.sin(2 * lo) * np.cos(3 * la) + 0.5 * np.sin(5 * lo + la)) > 0.45
            sst = np.where(np.broadcast_to(land, sst.shape), FILL, sst).astype(np.float32)
            s = ds.createVariable("sst", "f4", lead + (lat_name, "lon"), fill_value=FILL)
            s.units = "K"
            s[:] = np.ma.masked_equal(sst, FILL) if time else np.ma.masked_equal(sst[0], FILL)
            # A packed variable: int16 with scale_factor and add_offset.
            z = 5500 + 200 * np.cos(2 * la) + 50 * np.sin(4 * lo + shift) + rng.normal(0, 1, (steps, nlat, nlon))
            zz = ds.createVariable("z", "i2", lead + (lat_name, "lon"))
            zz.units, zz.scale_factor, zz.add_offset = "m", 0.1, 5500.0
            zz[:] = z if time else z[0]
            if not with_levels:
                return
            # A variable with a level dim: its levels become channels.
            ds.createDimension("plev", 2)
            p = ds.createVariable("plev", "f8", ("plev",))
            p.units, p.axis, p.positive = "Pa", "Z", "down"
            p[:] = [85000.0, 50000.0]
            ta = np.stack([t2m - 10, t2m - 40], axis=1)
            tv = ds.createVariable("ta", "f4", lead + ("plev", lat_name, "lon"))
            tv.units = "K"
            tv[:] = ta if time else ta[0]


def write_grid_file(path, values, *, fmt="NETCDF4", dtype="f4", units="K", time_units="hours since 2000-01-01",
                    times=None, calendar=None, attributes=None, lat=None, lon=None):
    """A (time, lat, lon) variable `v` with the given values and attributes; lat/lon from the shape."""
    ntime, nlat, nlon = values.shape
    lat = np.linspace(-87.5, 87.5, nlat) if lat is None else lat
    lon = np.arange(nlon) * 360.0 / nlon if lon is None else lon
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", nlat)
        ds.createDimension("lon", nlon)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = time_units
        if calendar:
            t.calendar = calendar
        t[:] = 6.0 * np.arange(ntime) if times is None else times
        y = ds.createVariable("lat", "f8", ("lat",))
        y.units, y.standard_name = "degrees_north", "latitude"
        y[:] = lat
        x = ds.createVariable("lon", "f8", ("lon",))
        x.units, x.standard_name = "degrees_east", "longitude"
        x[:] = lon
        v = ds.createVariable("v", dtype, ("time", "lat", "lon"))
        v.set_auto_maskandscale(False)
        if units is not None:
            v.units = units
        for key, value in (attributes or {}).items():
            v.setncattr(key, value)
        v[:] = values
    return lat


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("truth")
    parser.add_argument("pred")
    parser.add_argument("--nlat", type=int, default=91)
    parser.add_argument("--nlon", type=int, default=180)
    parser.add_argument("--ntime", type=int, default=3)
    args = parser.parse_args()
    write(args.truth, args.nlat, args.nlon, args.ntime, seed=1)
    write(args.pred, args.nlat, args.nlon, args.ntime, seed=2, shift=0.2)


if __name__ == "__main__":
    main()
