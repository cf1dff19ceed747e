#pragma once
// Small netCDF files the unit tests write with the netCDF C API: a scratch folder, a builder, and a grid
// file whose values are a known function of their indices. No MPI.

#include <gtest/gtest.h>
#include <netcdf.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"

namespace gridshard::io::testing {

namespace fs = std::filesystem;

inline void ok(int status) {
    if (status != NC_NOERR) {
        throw std::runtime_error(std::string("test fixture: ") + nc_strerror(status));
    }
}

// A fresh folder per test, removed afterwards.
class TempDir {
  public:
    TempDir() {
        static int counter = 0;
        path_ = fs::temp_directory_path() /
                ("gridshard_netcdf_test." + std::to_string(::getpid()) + "." + std::to_string(counter++));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] std::string operator/(const std::string& name) const { return (path_ / name).string(); }
    [[nodiscard]] std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& entry : fs::directory_iterator(path_)) {
            names.push_back(entry.path().filename().string());
        }
        return names;
    }

  private:
    fs::path path_;
};

// Writes a file through the C API, in define mode until end().
class Builder {
  public:
    explicit Builder(const std::string& path, int mode = NC_CLOBBER) { ok(nc_create(path.c_str(), mode, &id_)); }
    ~Builder() {
        if (id_ >= 0) {
            nc_close(id_);
        }
    }
    Builder(const Builder&) = delete;
    Builder& operator=(const Builder&) = delete;

    int dim(const std::string& name, std::size_t length) {
        int id = -1;
        ok(nc_def_dim(id_, name.c_str(), length, &id));
        return id;
    }
    int var(const std::string& name, nc_type type, const std::vector<int>& dims) {
        int id = -1;
        ok(nc_def_var(id_, name.c_str(), type, static_cast<int>(dims.size()), dims.data(), &id));
        return id;
    }
    void text(int var, const std::string& name, const std::string& value) {
        ok(nc_put_att_text(id_, var, name.c_str(), value.size(), value.c_str()));
    }
    void number(int var, const std::string& name, nc_type type, const std::vector<double>& values) {
        ok(nc_put_att_double(id_, var, name.c_str(), type, values.size(), values.data()));
    }
    void end() { ok(nc_enddef(id_)); }
    // Converted to the variable's type by netCDF (no packing is applied).
    void put(int var, const std::vector<double>& values) { ok(nc_put_var_double(id_, var, values.data())); }
    void put(int var, const std::vector<std::size_t>& count, const std::vector<double>& values) {
        const std::vector<std::size_t> start(count.size(), 0);
        ok(nc_put_vara_double(id_, var, start.data(), count.data(), values.data()));
    }
    [[nodiscard]] int id() const noexcept { return id_; }

  private:
    int id_ = -1;
};

// How the test grid marks its latitude and longitude coordinates.
enum class Label { standard_name, units, axis, name };

struct Spec {
    std::size_t nlat = 5;
    std::size_t nlon = 8;
    bool south_to_north = true;
    bool lon_from_minus_180 = false;
    std::size_t ntime = 3;  // 0: no time dim
    std::size_t nlev = 0;   // 0: no level dim
    Label label = Label::standard_name;
    std::string lat_units = "degrees_north";
    std::string lon_units = "degrees_east";
    bool bounds = true;
    nc_type type = NC_FLOAT;
    int mode = NC_CLOBBER;  // nc_create's mode: the format (NC_64BIT_OFFSET, NC_NETCDF4, ...)
};

inline double value(std::size_t t, std::size_t lev, std::size_t i, std::size_t j) {
    return static_cast<double>(t * 10000 + lev * 1000 + i * 10 + j);
}

inline double lat_of(const Spec& s, std::size_t i) {
    const double south_first = -80.0 + 40.0 * static_cast<double>(i) * 4.0 / static_cast<double>(s.nlat - 1);
    return s.south_to_north ? south_first : -south_first;
}

inline double lon_of(const Spec& s, std::size_t j) {
    return (s.lon_from_minus_180 ? -180.0 : 0.0) + 360.0 * static_cast<double>(j) / static_cast<double>(s.nlon);
}

// A grid file with the variable "field" = value(t, lev, i, j) over ([time,] [lev,] lat, lon).
inline std::string make_grid_file(const TempDir& dir, const std::string& name, const Spec& s) {
    const std::string path = dir / name;
    Builder b(path, s.mode);
    const bool by_name = s.label == Label::name;
    const std::string lat_name = by_name ? "latitude" : "yc";
    const std::string lon_name = by_name ? "longitude" : "xc";
    std::vector<int> dims;
    int time_var = -1;
    if (s.ntime > 0) {
        const int time_dim = b.dim("time", NC_UNLIMITED);
        dims.push_back(time_dim);
        time_var = b.var("time", NC_DOUBLE, {time_dim});
        b.text(time_var, "standard_name", "time");
        b.text(time_var, "units", "hours since 2020-01-01 00:00:00");
        b.text(time_var, "calendar", "proleptic_gregorian");
    }
    int lev_var = -1;
    if (s.nlev > 0) {
        const int lev_dim = b.dim("lev", s.nlev);
        dims.push_back(lev_dim);
        lev_var = b.var("lev", NC_DOUBLE, {lev_dim});
        b.text(lev_var, "units", "hPa");
    }
    const int lat_dim = b.dim(lat_name, s.nlat);
    const int lon_dim = b.dim(lon_name, s.nlon);
    const int bnds_dim = b.dim("bnds", 2);
    dims.push_back(lat_dim);
    dims.push_back(lon_dim);
    const int lat_var = b.var(lat_name, NC_DOUBLE, {lat_dim});
    const int lon_var = b.var(lon_name, NC_FLOAT, {lon_dim});
    switch (s.label) {
        case Label::standard_name:
            b.text(lat_var, "standard_name", "latitude");
            b.text(lon_var, "standard_name", "longitude");
            break;
        case Label::units:
            b.text(lat_var, "units", s.lat_units);
            b.text(lon_var, "units", s.lon_units);
            break;
        case Label::axis:
            b.text(lat_var, "axis", "Y");
            b.text(lon_var, "axis", "X");
            break;
        case Label::name:
            break;
    }
    int lat_bnds = -1;
    int lon_bnds = -1;
    if (s.bounds) {
        b.text(lat_var, "bounds", "lat_bnds");
        b.text(lon_var, "bounds", "lon_bnds");
        lat_bnds = b.var("lat_bnds", NC_DOUBLE, {lat_dim, bnds_dim});
        lon_bnds = b.var("lon_bnds", NC_DOUBLE, {lon_dim, bnds_dim});
    }
    const int field = b.var("field", s.type, dims);
    b.text(field, "units", "K");
    b.end();

    if (s.ntime > 0) {
        std::vector<double> times(s.ntime);
        for (std::size_t t = 0; t < s.ntime; ++t) {
            times[t] = 6.0 * static_cast<double>(t);
        }
        b.put(time_var, {s.ntime}, times);
    }
    if (s.nlev > 0) {
        std::vector<double> levels(s.nlev);
        for (std::size_t l = 0; l < s.nlev; ++l) {
            levels[l] = 1000.0 - 100.0 * static_cast<double>(l);
        }
        b.put(lev_var, levels);
    }
    std::vector<double> lats(s.nlat);
    std::vector<double> lons(s.nlon);
    std::vector<double> lat_b;
    std::vector<double> lon_b;
    for (std::size_t i = 0; i < s.nlat; ++i) {
        lats[i] = lat_of(s, i);
        lat_b.push_back(lats[i] - 0.5);
        lat_b.push_back(lats[i] + 0.5);
    }
    for (std::size_t j = 0; j < s.nlon; ++j) {
        lons[j] = lon_of(s, j);
        lon_b.push_back(lons[j] - 22.5);
        lon_b.push_back(lons[j] + 22.5);
    }
    b.put(lat_var, lats);
    b.put(lon_var, lons);
    if (s.bounds) {
        b.put(lat_bnds, lat_b);
        b.put(lon_bnds, lon_b);
    }
    const std::size_t nt = std::max<std::size_t>(s.ntime, 1);
    const std::size_t nl = std::max<std::size_t>(s.nlev, 1);
    std::vector<double> values;
    for (std::size_t t = 0; t < nt; ++t) {
        for (std::size_t l = 0; l < nl; ++l) {
            for (std::size_t i = 0; i < s.nlat; ++i) {
                for (std::size_t j = 0; j < s.nlon; ++j) {
                    values.push_back(value(t, l, i, j) + (s.type == NC_DOUBLE ? 0.25 : 0.0));
                }
            }
        }
    }
    std::vector<std::size_t> count;
    if (s.ntime > 0) {
        count.push_back(s.ntime);
    }
    if (s.nlev > 0) {
        count.push_back(s.nlev);
    }
    count.push_back(s.nlat);
    count.push_back(s.nlon);
    b.put(field, count, values);
    return path;
}

template <class F>
inline std::string error_of(F&& f) {
    try {
        f();
    } catch (const ArgumentError& e) {  // NetcdfError is one
        return e.what();
    }
    return "(no ArgumentError)";
}

}  // namespace gridshard::io::testing
