// The netCDF layer against small files the tests write with the netCDF C API. No MPI.

#include <gtest/gtest.h>
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/io/zonal_writer.hpp"
#include "netcdf_fixture.hpp"

namespace gridshard::io {
namespace {

using namespace gridshard::io::testing;  // NOLINT(google-build-using-namespace): the shared fixture
namespace fs = std::filesystem;

// Checks every value of read(field, steps, box) against value().
void expect_box(const NetcdfReader& reader, const Spec& s, const Range& steps, const Box& box) {
    const std::vector<float> got = reader.read<float>("field", steps, box);
    const auto nl = static_cast<std::int64_t>(std::max<std::size_t>(s.nlev, 1));
    ASSERT_EQ(got.size(), static_cast<std::size_t>(steps.size() * nl * box.area()));
    std::size_t k = 0;
    for (std::int64_t t = steps.begin; t < steps.end; ++t) {
        for (std::int64_t l = 0; l < nl; ++l) {
            for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j, ++k) {
                    const double want = value(static_cast<std::size_t>(t), static_cast<std::size_t>(l),
                                              static_cast<std::size_t>(i), static_cast<std::size_t>(j)) +
                                        (s.type == NC_DOUBLE ? 0.25 : 0.0);
                    ASSERT_EQ(got[k], static_cast<float>(want))
                        << "t " << t << " lev " << l << " i " << i << " j " << j;
                }
            }
        }
    }
}

std::vector<Box> some_boxes(const Spec& s) {
    const auto nlat = static_cast<std::int64_t>(s.nlat);
    const auto nlon = static_cast<std::int64_t>(s.nlon);
    return {{{0, nlat}, {0, nlon}},     {{1, 4}, {2, 7}},    {{nlat - 1, nlat}, {0, 1}},
            {{0, 2}, {nlon - 3, nlon}}, {{2, 2}, {0, nlon}}, {{nlat, nlat}, {nlon, nlon}}};
}

TEST(NetcdfReader, GridSouthToNorthWithTimeAndBounds) {
    TempDir dir;
    const Spec s;
    const NetcdfReader reader(make_grid_file(dir, "a.nc", s));
    const GridInfo& g = reader.grid();
    EXPECT_EQ(g.lat_dim, "yc");
    EXPECT_EQ(g.lon_dim, "xc");
    EXPECT_EQ(g.lat_deg, (std::vector<double>{-80, -40, 0, 40, 80}));
    EXPECT_EQ(g.lon_deg, (std::vector<double>{0, 45, 90, 135, 180, 225, 270, 315}));
    EXPECT_EQ(g.shape(), (GridShape{5, 8}));
    ASSERT_EQ(g.lat_bounds_deg.size(), 10u);
    EXPECT_EQ(g.lat_bounds_deg[0], -80.5);
    EXPECT_EQ(g.lat_bounds_deg[9], 80.5);
    ASSERT_EQ(g.lon_bounds_deg.size(), 16u);
    EXPECT_EQ(g.lon_bounds_deg[1], 22.5);
    EXPECT_EQ(g.lon_bounds_deg[3], 67.5);
    EXPECT_EQ(g.time_dim, "time");
    EXPECT_EQ(g.ntime, 3);
    EXPECT_EQ(g.time_values, (std::vector<double>{0, 6, 12}));
    EXPECT_EQ(g.time_units, "hours since 2020-01-01 00:00:00");
    EXPECT_EQ(g.time_calendar, "proleptic_gregorian");
    EXPECT_EQ(reader.field_variables(), (std::vector<std::string>{"field"}));

    const VariableShape v = reader.variable("field");
    EXPECT_EQ(v.dim_names, (std::vector<std::string>{"time", "yc", "xc"}));
    EXPECT_EQ(v.dim_sizes, (std::vector<std::int64_t>{3, 5, 8}));
    EXPECT_EQ(v.time_index, 0);
    EXPECT_EQ(v.ntime, 3);
    EXPECT_EQ(v.channels_per_step, 1);
    EXPECT_EQ(v.nlat, 5);
    EXPECT_EQ(v.nlon, 8);
    for (const Box& box : some_boxes(s)) {
        expect_box(reader, s, {0, 3}, box);
        expect_box(reader, s, {1, 2}, box);
        expect_box(reader, s, {2, 2}, box);
    }
}

TEST(NetcdfReader, NorthToSouthFromMinus180WithoutTimeOrBounds) {
    TempDir dir;
    Spec s;
    s.south_to_north = false;
    s.lon_from_minus_180 = true;
    s.ntime = 0;
    s.bounds = false;
    const NetcdfReader reader(make_grid_file(dir, "b.nc", s));
    const GridInfo& g = reader.grid();
    EXPECT_EQ(g.lat_deg, (std::vector<double>{80, 40, 0, -40, -80}));  // file order, not reordered
    EXPECT_EQ(g.lon_deg, (std::vector<double>{-180, -135, -90, -45, 0, 45, 90, 135}));
    EXPECT_TRUE(g.lat_bounds_deg.empty());
    EXPECT_TRUE(g.lon_bounds_deg.empty());
    EXPECT_TRUE(g.time_dim.empty());
    EXPECT_EQ(g.ntime, 1);
    EXPECT_TRUE(g.time_values.empty());
    const VariableShape v = reader.variable("field");
    EXPECT_FALSE(v.time_index.has_value());
    EXPECT_EQ(v.ntime, 1);
    for (const Box& box : some_boxes(s)) {
        expect_box(reader, s, {0, 1}, box);
    }
    EXPECT_THROW((void)reader.read<float>("field", {0, 2}, {{0, 1}, {0, 1}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {1, 2}, {{0, 1}, {0, 1}}), ArgumentError);
}

TEST(NetcdfReader, LevelsAreChannels) {
    TempDir dir;
    Spec s;
    s.nlev = 3;
    const NetcdfReader reader(make_grid_file(dir, "c.nc", s));
    const VariableShape v = reader.variable("field");
    EXPECT_EQ(v.dim_names, (std::vector<std::string>{"time", "lev", "yc", "xc"}));
    EXPECT_EQ(v.channels_per_step, 3);
    EXPECT_EQ(reader.field_variables(), (std::vector<std::string>{"field"}));  // not lev, time or bounds
    for (const Box& box : some_boxes(s)) {
        expect_box(reader, s, {0, 3}, box);
        expect_box(reader, s, {1, 3}, box);
    }
    // Levels without time: channels all the same.
    s.ntime = 0;
    const NetcdfReader no_time(make_grid_file(dir, "d.nc", s));
    EXPECT_EQ(no_time.variable("field").channels_per_step, 3);
    for (const Box& box : some_boxes(s)) {
        expect_box(no_time, s, {0, 1}, box);
    }
}

TEST(NetcdfReader, DoubleAndShortVariablesConvert) {
    TempDir dir;
    Spec s;
    s.nlev = 2;
    s.type = NC_DOUBLE;
    const NetcdfReader doubles(make_grid_file(dir, "double.nc", s));
    expect_box(doubles, s, {0, 3}, {{1, 5}, {3, 8}});
    s.type = NC_INT;
    const NetcdfReader ints(make_grid_file(dir, "int.nc", s));
    expect_box(ints, s, {1, 3}, {{0, 5}, {0, 8}});
}

TEST(NetcdfReader, DetectsTheGridByUnitsAxisOrName) {
    TempDir dir;
    int n = 0;
    const std::pair<std::string, std::string> unit_spellings[] = {
        {"degrees_north", "degrees_east"}, {"degree_north", "degree_east"}, {"degree_N", "degree_E"},
        {"degrees_N", "degrees_E"},        {"degreeN", "degreeE"},          {"degreesN", "degreesE"}};
    for (const auto& [lat_units, lon_units] : unit_spellings) {
        Spec s;
        s.label = Label::units;
        s.lat_units = lat_units;
        s.lon_units = lon_units;
        const NetcdfReader reader(make_grid_file(dir, std::to_string(n++) + "_units.nc", s));
        EXPECT_EQ(reader.grid().lat_dim, "yc") << lat_units;
        EXPECT_EQ(reader.grid().lon_dim, "xc") << lon_units;
        expect_box(reader, s, {0, 3}, {{1, 3}, {2, 5}});
    }
    Spec s;
    s.label = Label::axis;
    const NetcdfReader by_axis(make_grid_file(dir, "axis.nc", s));
    EXPECT_EQ(by_axis.grid().lat_dim, "yc");
    EXPECT_EQ(by_axis.grid().lon_dim, "xc");
    EXPECT_EQ(by_axis.grid().lat_deg[4], 80.0);
    s.label = Label::name;
    const NetcdfReader by_name(make_grid_file(dir, "name.nc", s));
    EXPECT_EQ(by_name.grid().lat_dim, "latitude");
    EXPECT_EQ(by_name.grid().lon_dim, "longitude");
    expect_box(by_name, s, {0, 3}, {{0, 5}, {0, 8}});
    // Units in degrees of something else, e.g. a rotated grid's, do not make a latitude.
    s.label = Label::units;
    s.lat_units = "degrees";
    const std::string rotated = make_grid_file(dir, "rotated.nc", s);
    EXPECT_NE(error_of([&] { NetcdfReader r(rotated); }).find("no latitude coordinate"), std::string::npos);
}

TEST(NetcdfReader, TimeFoundByStandardNameAxisUnitsUnlimitedOrName) {
    TempDir dir;
    const auto file = [&dir](const std::string& name, const std::string& time_name, bool unlimited,
                             const std::vector<std::pair<std::string, std::string>>& time_attributes,
                             bool coordinate = true) {
        const std::string path = dir / name;
        Builder b(path);
        const int t = b.dim(time_name, unlimited ? NC_UNLIMITED : 2);
        const int y = b.dim("lat", 2);
        const int x = b.dim("lon", 3);
        const int lat = b.var("lat", NC_DOUBLE, {y});
        const int lon = b.var("lon", NC_DOUBLE, {x});
        int time = -1;
        if (coordinate) {
            time = b.var(time_name, NC_DOUBLE, {t});
            for (const auto& [key, text] : time_attributes) {
                b.text(time, key, text);
            }
        }
        const int f = b.var("f", NC_FLOAT, {t, y, x});
        b.end();
        b.put(lat, {-45, 45});
        b.put(lon, {0, 120, 240});
        if (coordinate) {
            b.put(time, {2}, {1.5, 2.5});
        }
        b.put(f, {2, 2, 3}, std::vector<double>(12, 1.0));
        return path;
    };
    const NetcdfReader by_standard_name(file("sn.nc", "valid_time", false, {{"standard_name", "time"}}));
    EXPECT_EQ(by_standard_name.grid().time_dim, "valid_time");
    EXPECT_EQ(by_standard_name.grid().time_values, (std::vector<double>{1.5, 2.5}));
    const NetcdfReader by_axis(file("axis.nc", "t", false, {{"axis", "T"}, {"calendar", "noleap"}}));
    EXPECT_EQ(by_axis.grid().time_dim, "t");
    EXPECT_EQ(by_axis.grid().time_calendar, "noleap");
    const NetcdfReader by_units(file("units.nc", "step", false, {{"units", "days since 2000-01-01"}}));
    EXPECT_EQ(by_units.grid().time_dim, "step");
    EXPECT_EQ(by_units.grid().time_units, "days since 2000-01-01");
    const NetcdfReader by_unlimited(file("unlimited.nc", "record", true, {}, false));
    EXPECT_EQ(by_unlimited.grid().time_dim, "record");
    EXPECT_EQ(by_unlimited.grid().ntime, 2);
    EXPECT_TRUE(by_unlimited.grid().time_values.empty());
    const NetcdfReader by_name(file("name.nc", "time", false, {}));
    EXPECT_EQ(by_name.grid().time_dim, "time");
    EXPECT_EQ(by_name.variable("f").time_index, 0);
    EXPECT_EQ(by_name.read<float>("f", {1, 2}, {{0, 2}, {0, 3}}), std::vector<float>(6, 1.0f));
}

TEST(NetcdfReader, AnEmptyEnsembleDimIsNeverTheTime) {
    // netCDF makes a dim of length 0 unlimited: an empty sample dim must not be taken for the time.
    TempDir dir;
    const std::string path = dir / "empty_sample.nc";
    {
        Builder b(path);
        const int s = b.dim("sample", NC_UNLIMITED);
        const int t = b.dim("time", 4);
        const int y = b.dim("lat", 2);
        const int x = b.dim("lon", 3);
        const int lat = b.var("lat", NC_DOUBLE, {y});
        const int lon = b.var("lon", NC_DOUBLE, {x});
        b.var("f", NC_FLOAT, {s, t, y, x});
        b.end();
        b.put(lat, {-45, 45});
        b.put(lon, {0, 120, 240});
    }
    const NetcdfReader reader(path);
    EXPECT_EQ(reader.grid().time_dim, "time");
    EXPECT_EQ(reader.grid().ntime, 4);
    EXPECT_EQ(reader.variable("f").time_index, 1);
}

TEST(NetcdfReader, FillAndMissingValuesBecomeNan) {
    TempDir dir;
    const std::string path = dir / "fill.nc";
    {
        Builder b(path);
        const int y = b.dim("lat", 2);
        const int x = b.dim("lon", 3);
        const int lat = b.var("lat", NC_FLOAT, {y});
        const int lon = b.var("lon", NC_FLOAT, {x});
        const int both = b.var("both", NC_FLOAT, {y, x});
        b.number(both, "_FillValue", NC_FLOAT, {-999});
        b.number(both, "missing_value", NC_FLOAT, {1e20});
        const int two_missing = b.var("two_missing", NC_DOUBLE, {y, x});
        b.number(two_missing, "missing_value", NC_DOUBLE, {-1, -2});
        const int default_fill = b.var("default_fill", NC_FLOAT, {y, x});
        const int bytes = b.var("bytes", NC_BYTE, {y, x});
        const int unsigned_bytes = b.var("unsigned_bytes", NC_BYTE, {y, x});
        b.text(unsigned_bytes, "_Unsigned", "true");
        b.number(unsigned_bytes, "scale_factor", NC_FLOAT, {0.5});
        b.end();
        b.put(lat, {10, 20});
        b.put(lon, {0, 1, 2});
        b.put(both, {-999, 1, 1e20, 3, 4, -999});
        b.put(two_missing, {0, -1, 2, -2, 4, 5});
        b.put(default_fill, {NC_FILL_FLOAT, 1, 2, 3, 4, 5});
        b.put(bytes, {-127, 1, 2, 3, 4, 5});  // bytes have no default fill
        b.put(unsigned_bytes, {-1, -128, 0, 1, 127, 2});
    }
    const NetcdfReader reader(path);
    const Box all{{0, 2}, {0, 3}};
    const auto nan_at = [](const std::vector<float>& v) {
        std::vector<bool> out;
        for (float x : v) {
            out.push_back(std::isnan(x));
        }
        return out;
    };
    const auto both = reader.read<float>("both", {0, 1}, all);
    EXPECT_EQ(nan_at(both), (std::vector<bool>{true, false, true, false, false, true}));
    EXPECT_EQ(both[1], 1.0f);
    EXPECT_EQ(both[4], 4.0f);
    EXPECT_EQ(nan_at(reader.read<float>("two_missing", {0, 1}, all)),
              (std::vector<bool>{false, true, false, true, false, false}));
    const auto default_fill = reader.read<float>("default_fill", {0, 1}, all);
    EXPECT_TRUE(std::isnan(default_fill[0]));
    EXPECT_EQ(default_fill[5], 5.0f);
    EXPECT_EQ(reader.read<float>("bytes", {0, 1}, all), (std::vector<float>{-127, 1, 2, 3, 4, 5}));
    EXPECT_EQ(reader.read<float>("unsigned_bytes", {0, 1}, all), (std::vector<float>{127.5f, 64, 0, 0.5f, 63.5f, 1}));
    // The sub-box reads the same values.
    EXPECT_EQ(reader.read<float>("unsigned_bytes", {0, 1}, {{1, 2}, {1, 3}}), (std::vector<float>{63.5f, 1}));
}

// Packed values with a fill, missing values and a valid range: the vectorised rule (at most two missing values) and
// the general one (three) give the same values, NaN where any rule says missing or invalid.
TEST(NetcdfReader, PackedValuesWithMissingAndValidRange) {
    TempDir dir;
    const std::string path = dir / "packed_ranges.nc";
    const std::vector<double> stored{-1, 7, 150, -101, 100, 5, 8, -100, 0, 3, -7, 99};
    {
        Builder b(path);
        const int y = b.dim("lat", 3);
        const int x = b.dim("lon", 4);
        const int lat = b.var("lat", NC_FLOAT, {y});
        const int lon = b.var("lon", NC_FLOAT, {x});
        const int two = b.var("two_missing", NC_SHORT, {y, x});
        const int three = b.var("three_missing", NC_SHORT, {y, x});
        for (const int v : {two, three}) {
            b.number(v, "scale_factor", NC_DOUBLE, {0.25});
            b.number(v, "add_offset", NC_DOUBLE, {-3});
            b.number(v, "_FillValue", NC_SHORT, {-1});
            b.number(v, "valid_range", NC_SHORT, {-100, 100});
        }
        b.number(two, "missing_value", NC_SHORT, {7});
        b.number(three, "missing_value", NC_SHORT, {7, 8});
        b.end();
        b.put(lat, {-10, 0, 10});
        b.put(lon, {0, 90, 180, 270});
        b.put(two, {3, 4}, stored);
        b.put(three, {3, 4}, stored);
    }
    const NetcdfReader reader(path);
    const Box all{{0, 3}, {0, 4}};
    const auto two = reader.read<double>("two_missing", {0, 1}, all);
    const auto three = reader.read<double>("three_missing", {0, 1}, all);
    ASSERT_EQ(two.size(), stored.size());
    for (std::size_t k = 0; k < stored.size(); ++k) {
        const double x = stored[k];
        const bool missing = x == -1 || x == 7 || x < -100 || x > 100;
        if (missing) {
            EXPECT_TRUE(std::isnan(two[k])) << k;
        } else {
            EXPECT_EQ(two[k], x * 0.25 - 3) << k;
        }
        if (missing || x == 8) {
            EXPECT_TRUE(std::isnan(three[k])) << k;
        } else {
            EXPECT_EQ(std::bit_cast<std::uint64_t>(three[k]), std::bit_cast<std::uint64_t>(two[k])) << k;
        }
    }
}

TEST(NetcdfReader, PackedShortsAreUnpacked) {
    TempDir dir;
    const std::string path = dir / "packed.nc";
    const std::size_t nt = 2;
    const std::size_t nl = 2;
    const std::size_t ny = 4;
    const std::size_t nx = 6;
    {
        Builder b(path);
        const int t = b.dim("time", NC_UNLIMITED);
        const int l = b.dim("level", nl);
        const int y = b.dim("lat", ny);
        const int x = b.dim("lon", nx);
        const int lat = b.var("lat", NC_DOUBLE, {y});
        b.text(lat, "units", "degrees_north");
        const int lon = b.var("lon", NC_DOUBLE, {x});
        b.text(lon, "units", "degrees_east");
        const int z = b.var("z", NC_SHORT, {t, l, y, x});
        b.number(z, "scale_factor", NC_DOUBLE, {0.5});
        b.number(z, "add_offset", NC_DOUBLE, {100});
        b.number(z, "_FillValue", NC_SHORT, {-32767});
        b.end();
        b.put(lat, {60, 20, -20, -60});
        b.put(lon, {0, 60, 120, 180, 240, 300});
        std::vector<double> packed;
        for (std::size_t tt = 0; tt < nt; ++tt) {
            for (std::size_t ll = 0; ll < nl; ++ll) {
                for (std::size_t i = 0; i < ny; ++i) {
                    for (std::size_t j = 0; j < nx; ++j) {
                        packed.push_back((tt == 1 && ll == 0 && i == 2 && j == 3) ? -32767 : value(tt, ll, i, j));
                    }
                }
            }
        }
        b.put(z, {nt, nl, ny, nx}, packed);
    }
    const NetcdfReader reader(path);
    EXPECT_EQ(reader.variable("z").channels_per_step, 2);
    EXPECT_EQ(reader.grid().time_dim, "time");  // the unlimited dim, no coordinate
    const Box box{{1, 4}, {2, 5}};
    const auto got = reader.read<float>("z", {0, 2}, box);
    ASSERT_EQ(got.size(), 2u * 2u * 3u * 3u);
    std::size_t k = 0;
    for (std::size_t tt = 0; tt < nt; ++tt) {
        for (std::size_t ll = 0; ll < nl; ++ll) {
            for (std::size_t i = 1; i < 4; ++i) {
                for (std::size_t j = 2; j < 5; ++j, ++k) {
                    if (tt == 1 && ll == 0 && i == 2 && j == 3) {
                        EXPECT_TRUE(std::isnan(got[k]));
                    } else {
                        EXPECT_EQ(got[k], static_cast<float>(value(tt, ll, i, j) * 0.5 + 100)) << k;
                    }
                }
            }
        }
    }
}

TEST(NetcdfReader, Netcdf4FileWithStringAttributes) {
    TempDir dir;
    const std::string path = dir / "nc4.nc";
    {
        Builder b(path, NC_CLOBBER | NC_NETCDF4);
        const int y = b.dim("y", 3);
        const int x = b.dim("x", 4);
        const int lat = b.var("y", NC_FLOAT, {y});
        const int lon = b.var("x", NC_FLOAT, {x});
        const char* north = "degrees_north";
        const char* east = "degrees_east";
        ok(nc_put_att_string(b.id(), lat, "units", 1, &north));
        ok(nc_put_att_string(b.id(), lon, "units", 1, &east));
        const int f = b.var("f", NC_FLOAT, {y, x});
        b.end();
        b.put(lat, {-30, 0, 30});
        b.put(lon, {0, 90, 180, 270});
        std::vector<double> values;
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 4; ++j) {
                values.push_back(value(0, 0, i, j));
            }
        }
        b.put(f, values);
    }
    const NetcdfReader reader(path);
    EXPECT_EQ(reader.grid().lat_dim, "y");
    EXPECT_EQ(reader.grid().lon_dim, "x");
    EXPECT_EQ(reader.read<float>("f", {0, 1}, {{1, 3}, {1, 3}}), (std::vector<float>{11, 12, 21, 22}));
}

TEST(NetcdfReader, FieldVariablesSkipCoordinatesBoundsAndCellMeasures) {
    TempDir dir;
    const std::string path = dir / "vars.nc";
    {
        Builder b(path, NC_CLOBBER | NC_NETCDF4);  // the classic format allows no record dim after the first
        const int t = b.dim("time", NC_UNLIMITED);
        const int l = b.dim("plev", 2);
        const int y = b.dim("lat", 2);
        const int x = b.dim("lon", 3);
        const int lat = b.var("lat", NC_DOUBLE, {y});
        const int lon = b.var("lon", NC_DOUBLE, {x});
        const int f = b.var("t2m", NC_FLOAT, {t, y, x});
        b.text(f, "cell_measures", "area: cell_area");
        (void)b.var("cell_area", NC_DOUBLE, {y, x});
        (void)b.var("mask", NC_BYTE, {y, x});
        (void)b.var("ta", NC_FLOAT, {t, l, y, x});
        (void)b.var("transposed", NC_FLOAT, {t, x, y});
        (void)b.var("time_not_first", NC_FLOAT, {l, t, y, x});
        (void)b.var("zonal", NC_FLOAT, {t, y});
        (void)b.var("label", NC_CHAR, {y, x});
        b.end();
        b.put(lat, {-45, 45});
        b.put(lon, {0, 120, 240});
    }
    const NetcdfReader reader(path);
    EXPECT_EQ(reader.field_variables(), (std::vector<std::string>{"t2m", "mask", "ta"}));
    EXPECT_EQ(reader.variable("mask").ntime, 1);
    EXPECT_FALSE(reader.variable("mask").time_index.has_value());
    EXPECT_EQ(reader.variable("ta").channels_per_step, 2);
    EXPECT_EQ(reader.grid().ntime, 0);  // no records written yet
    EXPECT_TRUE(reader.read<float>("t2m", {0, 0}, {{0, 2}, {0, 3}}).empty());

    const std::string transposed = error_of([&] { (void)reader.variable("transposed"); });
    EXPECT_NE(transposed.find(path), std::string::npos) << transposed;
    EXPECT_NE(transposed.find("(time, lon, lat)"), std::string::npos) << transposed;
    EXPECT_THROW((void)reader.read<float>("transposed", {0, 0}, {{0, 1}, {0, 1}}), NetcdfError);
    EXPECT_NE(error_of([&] { (void)reader.variable("time_not_first"); }).find("must come first"), std::string::npos);
    EXPECT_THROW((void)reader.variable("zonal"), NetcdfError);
    EXPECT_THROW((void)reader.variable("label"), NetcdfError);
    const std::string missing = error_of([&] { (void)reader.variable("nope"); });
    EXPECT_NE(missing.find("'nope'"), std::string::npos) << missing;
    EXPECT_NE(missing.find("Variable not found"), std::string::npos) << missing;  // nc_strerror
    EXPECT_THROW((void)reader.read<float>("nope", {0, 0}, {{0, 1}, {0, 1}}), NetcdfError);
}

TEST(NetcdfReader, OutOfRangeStepsOrBoxesAreArgumentErrors) {
    TempDir dir;
    const Spec s;
    const NetcdfReader reader(make_grid_file(dir, "a.nc", s));
    EXPECT_THROW((void)reader.read<float>("field", {0, 4}, {{0, 5}, {0, 8}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {-1, 1}, {{0, 5}, {0, 8}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {2, 1}, {{0, 5}, {0, 8}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {0, 1}, {{0, 6}, {0, 8}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {0, 1}, {{0, 5}, {-1, 8}}), ArgumentError);
    EXPECT_THROW((void)reader.read<float>("field", {0, 1}, {{3, 2}, {0, 8}}), ArgumentError);
}

TEST(NetcdfReader, UnreadableFilesAreNetcdfErrors) {
    TempDir dir;
    const std::string missing = dir / "missing.nc";
    const std::string what = error_of([&] { NetcdfReader r(missing); });
    EXPECT_NE(what.find(missing), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;

    const std::string text = dir / "notes.nc";
    std::ofstream(text) << "this is not a netCDF file\n";
    const std::string not_netcdf = error_of([&] { NetcdfReader r(text); });
    EXPECT_NE(not_netcdf.find(text), std::string::npos) << not_netcdf;
    EXPECT_EQ(not_netcdf.find('\n'), std::string::npos) << not_netcdf;  // one line

    const std::string no_lat = dir / "no_lat.nc";
    {
        Builder b(no_lat);
        const int x = b.dim("lon", 3);
        const int y = b.dim("lat", 2);
        const int lon = b.var("lon", NC_DOUBLE, {x});
        const int rlat = b.var("lat", NC_DOUBLE, {y});  // named lat, but a rotated grid's latitude
        b.text(rlat, "standard_name", "grid_latitude");
        b.text(rlat, "axis", "Y");
        b.end();
        b.put(lon, {0, 1, 2});
        b.put(rlat, {0, 1});
    }
    EXPECT_NE(error_of([&] { NetcdfReader r(no_lat); }).find("no latitude coordinate"), std::string::npos);

    const std::string projected = dir / "projected.nc";
    {
        Builder b(projected);
        for (const auto& [name, axis] : {std::pair{"y", "Y"}, std::pair{"x", "X"}}) {
            const int v = b.var(name, NC_DOUBLE, {b.dim(name, 2)});
            b.text(v, "axis", axis);
            b.text(v, "units", "m");
        }
    }
    EXPECT_NE(error_of([&] { NetcdfReader r(projected); }).find("no latitude coordinate"), std::string::npos);

    const std::string ambiguous = dir / "ambiguous.nc";
    {
        Builder b(ambiguous);
        for (const char* name : {"lat", "lat2"}) {
            const int y = b.dim(name, 2);
            b.text(b.var(name, NC_DOUBLE, {y}), "standard_name", "latitude");
        }
        b.text(b.var("lon", NC_DOUBLE, {b.dim("lon", 3)}), "standard_name", "longitude");
    }
    EXPECT_NE(error_of([&] { NetcdfReader r(ambiguous); }).find("ambiguous latitude"), std::string::npos);

    const std::string bad_lat = dir / "bad_lat.nc";
    {
        Builder b(bad_lat);
        const int lat = b.var("lat", NC_DOUBLE, {b.dim("lat", 2)});
        (void)b.var("lon", NC_DOUBLE, {b.dim("lon", 3)});
        b.end();
        b.put(lat, {0, 95});
    }
    EXPECT_NE(error_of([&] { NetcdfReader r(bad_lat); }).find("not in [-90, 90]"), std::string::npos);
}

TEST(NetcdfReader, MovesKeepTheFileOpen) {
    TempDir dir;
    const Spec s;
    const std::string path = make_grid_file(dir, "a.nc", s);
    NetcdfReader a(path);
    NetcdfReader b(std::move(a));
    expect_box(b, s, {0, 3}, {{0, 5}, {0, 8}});
    NetcdfReader c(make_grid_file(dir, "other.nc", s));
    c = std::move(b);
    EXPECT_EQ(c.path(), path);
    expect_box(c, s, {1, 2}, {{2, 4}, {1, 6}});
}

TEST(SameGrid, SizesAndValuesWithinTolerance) {
    GridInfo a;
    a.lat_deg = {-45, 45};
    a.lon_deg = {0, 120, 240};
    GridInfo b = a;
    b.lat_dim = "latitude";  // names do not matter
    EXPECT_TRUE(same_grid(a, b));
    b.lon_deg[2] += 1e-10;
    EXPECT_TRUE(same_grid(a, b));
    b.lon_deg[2] += 1e-8;
    EXPECT_FALSE(same_grid(a, b));
    EXPECT_TRUE(same_grid(a, b, 1e-6));
    b = a;
    b.lat_deg = {45, -45};
    EXPECT_FALSE(same_grid(a, b));
    b.lat_deg = {-45, 45, 60};
    EXPECT_FALSE(same_grid(a, b));
}

// Reads a (time, lat) double variable and its attributes back with the C API.
struct ReadBack {
    int ncid = -1;
    explicit ReadBack(const std::string& path) { ok(nc_open(path.c_str(), NC_NOWRITE, &ncid)); }
    ~ReadBack() { nc_close(ncid); }
    ReadBack(const ReadBack&) = delete;
    ReadBack& operator=(const ReadBack&) = delete;

    int varid(const std::string& name) const {
        int id = -1;
        ok(nc_inq_varid(ncid, name.c_str(), &id));
        return id;
    }
    std::size_t dim_length(const std::string& name) const {
        int id = -1;
        ok(nc_inq_dimid(ncid, name.c_str(), &id));
        std::size_t length = 0;
        ok(nc_inq_dimlen(ncid, id, &length));
        return length;
    }
    std::vector<double> values(const std::string& name, std::size_t n) const {
        std::vector<double> out(n);
        ok(nc_get_var_double(ncid, varid(name), out.data()));
        return out;
    }
    std::string text(const std::string& var, const std::string& name) const {
        const int id = var.empty() ? NC_GLOBAL : varid(var);
        std::size_t length = 0;
        ok(nc_inq_attlen(ncid, id, name.c_str(), &length));
        std::string out(length, '\0');
        ok(nc_get_att_text(ncid, id, name.c_str(), out.data()));
        return out;
    }
};

TEST(WriteZonalMeans, WritesACfFileAndReadsBack) {
    TempDir dir;
    Spec s;
    s.south_to_north = false;
    const NetcdfReader input(make_grid_file(dir, "input.nc", s));
    fs::remove(dir / "input.nc");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> bias(15);
    for (std::size_t k = 0; k < bias.size(); ++k) {
        bias[k] = 0.5 * static_cast<double>(k) - 3.0;
    }
    bias[7] = nan;
    const std::vector<double> rmse(15, 1.25);
    const std::string out = dir / "zonal.nc";
    write_zonal_means(out, input.grid(), 3, {{"bias", bias, "K", "bias of field"}, {"rmse", rmse}},
                      {"zonal test", "gridshard eval --test"});
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"zonal.nc"}));  // no temporary left

    const ReadBack file(out);
    int format = 0;
    ok(nc_inq_format(file.ncid, &format));
    EXPECT_EQ(format, NC_FORMAT_64BIT_OFFSET);
    int unlimited = -1;
    ok(nc_inq_unlimdim(file.ncid, &unlimited));
    int time_dim = -1;
    ok(nc_inq_dimid(file.ncid, "time", &time_dim));
    EXPECT_EQ(unlimited, time_dim);
    EXPECT_EQ(file.dim_length("time"), 3u);
    EXPECT_EQ(file.dim_length("yc"), 5u);
    EXPECT_EQ(file.values("yc", 5), (std::vector<double>{80, 40, 0, -40, -80}));
    EXPECT_EQ(file.text("yc", "standard_name"), "latitude");
    EXPECT_EQ(file.text("yc", "units"), "degrees_north");
    EXPECT_EQ(file.text("yc", "bounds"), "yc_bnds");
    EXPECT_EQ(file.values("yc_bnds", 10), input.grid().lat_bounds_deg);
    EXPECT_EQ(file.values("time", 3), (std::vector<double>{0, 6, 12}));
    EXPECT_EQ(file.text("time", "units"), "hours since 2020-01-01 00:00:00");
    EXPECT_EQ(file.text("time", "calendar"), "proleptic_gregorian");
    EXPECT_EQ(file.text("", "Conventions"), "CF-1.8");
    EXPECT_EQ(file.text("", "title"), "zonal test");
    EXPECT_EQ(file.text("", "history"), "gridshard eval --test");
    EXPECT_EQ(file.text("bias", "units"), "K");
    EXPECT_EQ(file.text("bias", "long_name"), "bias of field");
    EXPECT_EQ(file.text("bias", "cell_methods"), "longitude: mean");

    int ndims = 0;
    int dims[2] = {};
    nc_type type = NC_NAT;
    ok(nc_inq_var(file.ncid, file.varid("bias"), nullptr, &type, &ndims, dims, nullptr));
    EXPECT_EQ(type, NC_DOUBLE);
    ASSERT_EQ(ndims, 2);
    EXPECT_EQ(dims[0], time_dim);
    double fill = 0.0;
    ok(nc_get_att_double(file.ncid, file.varid("bias"), "_FillValue", &fill));
    EXPECT_EQ(fill, 9.96920996838687e+36);
    const auto got = file.values("bias", 15);
    for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k], k == 7 ? fill : bias[k]) << k;
    }
    EXPECT_EQ(file.values("rmse", 15), rmse);

    // Writing again replaces the file in place.
    write_zonal_means(out, input.grid(), 3, {{"rmse", std::vector<double>(15, 2.0)}});
    EXPECT_EQ(ReadBack(out).values("rmse", 15), std::vector<double>(15, 2.0));
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"zonal.nc"}));
}

TEST(WriteZonalMeans, WithoutTimeCoordinateOrWithOtherTimes) {
    TempDir dir;
    Spec s;
    s.ntime = 0;
    s.bounds = false;
    const NetcdfReader input(make_grid_file(dir, "input.nc", s));
    const std::string out = dir / "zonal.nc";
    write_zonal_means(out, input.grid(), 1, {{"mean", {1, 2, 3, 4, 5}}});
    {
        const ReadBack file(out);
        EXPECT_EQ(file.dim_length("time"), 1u);
        int varid = -1;
        EXPECT_EQ(nc_inq_varid(file.ncid, "time", &varid), NC_ENOTVAR);
        EXPECT_EQ(nc_inq_varid(file.ncid, "yc_bnds", &varid), NC_ENOTVAR);
        EXPECT_EQ(file.values("mean", 5), (std::vector<double>{1, 2, 3, 4, 5}));
    }
    // Time values given explicitly, e.g. one value for a mean over all steps.
    Spec timed;
    const NetcdfReader with_time(make_grid_file(dir, "timed.nc", timed));
    write_zonal_means(out, with_time.grid(), 1, {{"mean", {1, 2, 3, 4, 5}}}, {}, std::vector<double>{6.0});
    const ReadBack file(out);
    EXPECT_EQ(file.values("time", 1), (std::vector<double>{6.0}));
    EXPECT_EQ(file.text("time", "units"), "hours since 2020-01-01 00:00:00");
}

TEST(WriteZonalMeans, FailuresLeaveNoFile) {
    TempDir dir;
    const Spec s;
    const NetcdfReader input(make_grid_file(dir, "input.nc", s));
    const GridInfo grid = input.grid();
    fs::remove(dir / "input.nc");
    const std::vector<double> values(15, 1.0);

    const std::string nowhere = dir / "no_such_folder/zonal.nc";
    const std::string what = error_of([&] { write_zonal_means(nowhere, grid, 3, {{"m", values}}); });
    EXPECT_NE(what.find(nowhere), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
    EXPECT_TRUE(dir.entries().empty());

    const std::string out = dir / "zonal.nc";
    EXPECT_THROW(write_zonal_means(out, grid, 3, {{"m", std::vector<double>(14)}}), ArgumentError);
    EXPECT_THROW(write_zonal_means(out, grid, 2, {{"m", std::vector<double>(10)}}), ArgumentError);  // 3 times
    EXPECT_THROW(write_zonal_means(out, grid, 3, {{"m", values}}, {}, std::vector<double>{1.0}), ArgumentError);
    EXPECT_TRUE(dir.entries().empty());
    // Errors after the temporary file exists: a bad name, a duplicate name.
    EXPECT_THROW(write_zonal_means(out, grid, 3, {{"bad/name", values}}), NetcdfError);
    EXPECT_THROW(write_zonal_means(out, grid, 3, {{"m", values}, {"m", values}}), NetcdfError);
    EXPECT_TRUE(dir.entries().empty());

    // A failed write over an existing file leaves it as it was.
    write_zonal_means(out, grid, 3, {{"m", values}});
    EXPECT_THROW(write_zonal_means(out, grid, 3, {{"m", values}, {"m", values}}), NetcdfError);
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"zonal.nc"}));
    EXPECT_EQ(ReadBack(out).values("m", 15), values);

    // A path that is a folder is refused before anything is written.
    const std::string folder = dir / "folder.nc";
    fs::create_directories(fs::path(folder) / "inside");
    const std::string is_folder = error_of([&] { write_zonal_means(folder, grid, 3, {{"m", values}}); });
    EXPECT_NE(is_folder.find("is a directory"), std::string::npos) << is_folder;
    EXPECT_EQ(dir.entries().size(), 2u);
    EXPECT_TRUE(fs::is_directory(folder));
}

}  // namespace
}  // namespace gridshard::io

namespace gridshard::io {
namespace {

using namespace gridshard::io::testing;  // NOLINT(google-build-using-namespace): the shared fixture

// ACE's layout: (sample, time, lat, lon), an ensemble dim before time; and a member dim after a level dim.
TEST(NetcdfReader, EnsembleDimsBeforeTimeAndRunsOfSamples) {
    TempDir dir;
    const std::string path = dir / "ace.nc";
    {
        Builder b(path, NC_CLOBBER | NC_NETCDF4);
        const int s = b.dim("sample", 4);
        const int t = b.dim("time", 3);
        const int l = b.dim("level", 2);
        const int y = b.dim("lat", 2);
        const int x = b.dim("lon", 3);
        const int lat = b.var("lat", NC_DOUBLE, {y});
        const int lon = b.var("lon", NC_DOUBLE, {x});
        const int init = b.var("init_time", NC_INT64, {s});
        b.text(init, "units", "microseconds since 1970-01-01");
        b.text(init, "calendar", "julian");
        const int f = b.var("f", NC_FLOAT, {s, t, y, x});
        const int g = b.var("g", NC_FLOAT, {t, l, s, y, x});  // a member dim after a level dim
        (void)b.var("bad", NC_FLOAT, {l, t, y, x});
        b.end();
        b.put(lat, {-45, 45});
        b.put(lon, {0, 120, 240});
        b.put(init, {7, 7, 9, 9});
        std::vector<double> fv;
        for (int k = 0; k < 4 * 3 * 6; ++k) {
            fv.push_back(k);
        }
        b.put(f, fv);
        std::vector<double> gv;
        for (int k = 0; k < 3 * 2 * 4 * 6; ++k) {
            gv.push_back(1000 + k);
        }
        b.put(g, gv);
    }
    const NetcdfReader reader(path);
    const VariableShape v = reader.variable("f");
    EXPECT_EQ(v.time_index, 1);
    EXPECT_EQ(v.ntime, 3);
    EXPECT_EQ(v.channels_per_step, 4);  // the sample dim, when not indexed
    EXPECT_NE(error_of([&] { (void)reader.variable("bad"); }).find("must come first"), std::string::npos);

    VariableReader plan = reader.reader("f", {{0, 2}, {0, 3}}, {"sample", "time"});
    EXPECT_EQ(plan.values_per_step(), 6u);
    std::vector<float> one(6);
    plan.read_at(std::vector<std::int64_t>{2, 1}, std::span<float>(one));
    EXPECT_EQ(one[0], static_cast<float>((2 * 3 + 1) * 6));
    ASSERT_TRUE(plan.can_read_run(0));
    std::vector<float> run(12);
    plan.read_run(std::vector<std::int64_t>{1, 2}, {0, 2}, std::span<float>(run));
    for (int k = 0; k < 2; ++k) {
        for (int p = 0; p < 6; ++p) {
            EXPECT_EQ(run[static_cast<std::size_t>(k * 6 + p)], static_cast<float>(((1 + k) * 3 + 2) * 6 + p));
        }
    }
    EXPECT_TRUE(plan.can_read_run(1));  // time: the only dim before it, sample, is indexed
    EXPECT_THROW(plan.read_run(std::vector<std::int64_t>{3, 0}, {0, 2}, std::span<float>(run)), ArgumentError);
    EXPECT_THROW(plan.read_at(std::vector<std::int64_t>{4, 0}, std::span<float>(one)), ArgumentError);
    EXPECT_THROW(plan.read_at(std::vector<std::int64_t>{0}, std::span<float>(one)), ArgumentError);
    EXPECT_THROW((void)reader.reader("f", {{0, 2}, {0, 3}}, {"member", "time"}), NetcdfError);

    // g (time, level, sample, lat, lon): a run of samples is not the slowest dim read (level comes first).
    VariableReader members = reader.reader("g", {{0, 2}, {0, 3}}, {"time", "sample"});
    EXPECT_EQ(members.values_per_step(), 12u);  // the 2 levels
    EXPECT_FALSE(members.can_read_run(1));
    std::vector<float> levels(12);
    members.read_at(std::vector<std::int64_t>{1, 3}, std::span<float>(levels));
    EXPECT_EQ(levels[0], static_cast<float>(1000 + ((1 * 2 + 0) * 4 + 3) * 6));
    EXPECT_EQ(levels[6], static_cast<float>(1000 + ((1 * 2 + 1) * 4 + 3) * 6));

    const std::optional<WholeVariable> init = reader.whole_variable("init_time");
    ASSERT_TRUE(init.has_value());
    EXPECT_EQ(init->values, (std::vector<double>{7, 7, 9, 9}));
    EXPECT_EQ(init->dims, (std::vector<std::string>{"sample"}));
    EXPECT_EQ(init->units, "microseconds since 1970-01-01");
    EXPECT_EQ(init->calendar, "julian");
    EXPECT_FALSE(reader.whole_variable("nope").has_value());
    EXPECT_TRUE(is_ensemble_dim_name("Members"));
    EXPECT_TRUE(is_ensemble_dim_name("realization"));
    EXPECT_FALSE(is_ensemble_dim_name("level"));
}

TEST(WriteDataset, ReadsBackWithFillValuesAndCoordinates) {
    TempDir dir;
    const std::string path = dir / "d.nc";
    Dataset d;
    d.dims.push_back({"forecast_step", 3, {0, 1, 2}, {{"long_name", "step"}}});
    d.dims.push_back({"lat", 2, {-45, 45}, {{"units", "degrees_north"}}});
    d.variables.push_back({"score-x", {"forecast_step"}, {0.5, std::nan(""), 2.5}, {{"units", "K"}}});
    d.variables.push_back({"gen-x", {"forecast_step", "lat"}, {1, 2, 3, 4, 5, 6}});
    d.global_attributes.emplace_back("variables", "x");
    {
        AtomicOutput out(path);
        write_dataset(out, d);
        out.commit();
    }
    int ncid = -1;
    ASSERT_EQ(nc_open(path.c_str(), NC_NOWRITE, &ncid), NC_NOERR);
    int varid = -1;
    ASSERT_EQ(nc_inq_varid(ncid, "score-x", &varid), NC_NOERR);
    double values[3];
    ASSERT_EQ(nc_get_var_double(ncid, varid, values), NC_NOERR);
    double fill = 0;
    ASSERT_EQ(nc_get_att_double(ncid, varid, "_FillValue", &fill), NC_NOERR);
    EXPECT_EQ(values[0], 0.5);
    EXPECT_EQ(values[1], fill);
    EXPECT_EQ(values[2], 2.5);
    ASSERT_EQ(nc_inq_varid(ncid, "forecast_step", &varid), NC_NOERR);
    ASSERT_EQ(nc_get_var_double(ncid, varid, values), NC_NOERR);
    EXPECT_EQ(values[2], 2.0);
    nc_close(ncid);

    Dataset wrong = d;
    wrong.variables[1].values.pop_back();
    {
        AtomicOutput out(dir / "w.nc");
        EXPECT_THROW(write_dataset(out, wrong), ArgumentError);
    }
    wrong = d;
    wrong.variables[0].dims = {"nowhere"};
    {
        AtomicOutput out(dir / "w.nc");
        EXPECT_THROW(write_dataset(out, wrong), ArgumentError);
    }
    EXPECT_FALSE(fs::exists(dir / "w.nc"));  // never committed
}

TEST(WriteDataset, StringCoordinatesAreCharactersPaddedToTheLongest) {
    TempDir dir;
    const std::string path = dir / "s.nc";
    Dataset d;
    d.dims.push_back({"source", 2, {}, {{"long_name", "which field"}}, false, {"prediction", "target"}});
    d.dims.push_back({"wavenumber", 3, {0, 1, 2}});
    d.variables.push_back({"t2m", {"source", "wavenumber"}, {1, 2, 3, 4, 5, 6}});
    {
        AtomicOutput out(path);
        write_dataset(out, d);
        out.commit();
    }
    int ncid = -1;
    ASSERT_EQ(nc_open(path.c_str(), NC_NOWRITE, &ncid), NC_NOERR);
    int varid = -1;
    ASSERT_EQ(nc_inq_varid(ncid, "source", &varid), NC_NOERR);
    nc_type type = NC_NAT;
    int dims[2] = {-1, -1};
    int ndims = 0;
    ASSERT_EQ(nc_inq_var(ncid, varid, nullptr, &type, &ndims, dims, nullptr), NC_NOERR);
    EXPECT_EQ(type, NC_CHAR);
    ASSERT_EQ(ndims, 2);
    char name[NC_MAX_NAME + 1] = {};
    std::size_t width = 0;
    ASSERT_EQ(nc_inq_dim(ncid, dims[1], name, &width), NC_NOERR);
    EXPECT_STREQ(name, "string10");
    char characters[20] = {};
    ASSERT_EQ(nc_get_var_text(ncid, varid, characters), NC_NOERR);
    EXPECT_EQ(std::string(characters, 10), "prediction");
    EXPECT_EQ(std::string(characters + 10), "target");
    char encoding[16] = {};
    ASSERT_EQ(nc_get_att_text(ncid, varid, "_Encoding", encoding), NC_NOERR);
    EXPECT_STREQ(encoding, "utf-8");
    nc_close(ncid);
    Dataset wrong = d;
    wrong.dims[0].labels.pop_back();
    AtomicOutput out(dir / "w.nc");
    EXPECT_THROW(write_dataset(out, wrong), ArgumentError);
}

}  // namespace
}  // namespace gridshard::io
