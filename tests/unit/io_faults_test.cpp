// The io layer's guarantees against damaged files and careless paths: the file-extent check, truncation at
// open and during reads, CF decoding of valid ranges and packing in the native type, curvilinear grids,
// units and times, output paths and the atomic writer, and bounded allocations. No MPI.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netcdf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/io/units.hpp"
#include "netcdf_fixture.hpp"

namespace gridshard::io {
namespace {

using namespace gridshard::io::testing;  // NOLINT(google-build-using-namespace): the shared fixture
namespace fs = std::filesystem;

std::vector<unsigned char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

struct Format {
    const char* name;
    int mode;
};
const Format formats[] = {{"CDF-1", NC_CLOBBER},
                          {"CDF-2", NC_CLOBBER | NC_64BIT_OFFSET},
                          {"CDF-5", NC_CLOBBER | NC_64BIT_DATA},
                          {"netCDF-4", NC_CLOBBER | NC_NETCDF4}};

// A grid file of `ntime` steps and `nlev` levels in format `f`, named after the format.
std::string file_in_format(const TempDir& dir, const Format& f, std::size_t ntime = 3, std::size_t nlev = 0) {
    Spec s;
    s.ntime = ntime;
    s.nlev = nlev;
    s.mode = f.mode;
    return make_grid_file(dir, std::string(f.name) + ".nc", s);
}

// ------------------------------------------------------------------------------------------- file extent

TEST(FileExtent, EveryFormatNeedsWhatItsWriterWrote) {
    TempDir dir;
    for (const Format& f : formats) {
        const std::string path = file_in_format(dir, f, 3, 2);
        const auto bytes = bytes_of(path);
        const FileExtent extent = netcdf_file_extent(bytes, bytes.size());
        EXPECT_TRUE(extent.problem.empty()) << f.name << ": " << extent.problem;
        EXPECT_EQ(extent.more_header_bytes, 0u) << f.name;
        if (f.mode & NC_NETCDF4) {
            EXPECT_EQ(extent.format, FileExtent::Format::hdf5);
            EXPECT_EQ(extent.required_bytes, bytes.size());
        } else {
            EXPECT_EQ(extent.format, FileExtent::Format::classic) << f.name;
            // Only the padding after the last record variable's last record may follow.
            EXPECT_LE(extent.required_bytes, bytes.size()) << f.name;
            EXPECT_GT(extent.required_bytes + 4, bytes.size()) << f.name;
        }
    }
}

TEST(FileExtent, OneRecordVariableIsUnpaddedAndSeveralArePadded) {
    TempDir dir;
    for (const int nvars : {1, 2}) {
        const std::string path = dir / ("records" + std::to_string(nvars) + ".nc");
        {
            Builder b(path);
            const int time = b.dim("time", NC_UNLIMITED);
            const int x = b.dim("x", 3);  // 3 shorts: 6 bytes, padded to 8 when there are two record variables
            std::vector<int> ids;
            for (int v = 0; v < nvars; ++v) {
                ids.push_back(b.var("v" + std::to_string(v), NC_SHORT, {time, x}));
            }
            b.end();
            for (const int id : ids) {
                b.put(id, {5, 3}, std::vector<double>(15, 7.0));
            }
        }
        const auto bytes = bytes_of(path);
        const FileExtent extent = netcdf_file_extent(bytes, bytes.size());
        ASSERT_TRUE(extent.problem.empty()) << extent.problem;
        EXPECT_EQ(extent.required_bytes, nvars == 1 ? bytes.size() : bytes.size() - 2) << nvars;
    }
}

TEST(FileExtent, AnyPrefixAsksForMoreOrGivesTheSameAnswer) {
    TempDir dir;
    for (const Format& f : formats) {
        const auto bytes = bytes_of(file_in_format(dir, f));
        const FileExtent whole = netcdf_file_extent(bytes, bytes.size());
        for (std::size_t n = 0; n <= std::min<std::size_t>(bytes.size(), 2048); ++n) {
            const FileExtent part = netcdf_file_extent(std::span(bytes).first(n), bytes.size());
            ASSERT_TRUE(part.problem.empty()) << f.name << " prefix " << n << ": " << part.problem;
            if (part.more_header_bytes == 0) {
                EXPECT_EQ(part.required_bytes, whole.required_bytes) << f.name << " prefix " << n;
            } else {
                EXPECT_GT(part.more_header_bytes, n) << f.name << " prefix " << n;
            }
        }
    }
}

// HDF5's end-of-file address is absolute: a file with a 512-byte user block (superblock at 512, base
// address 512) needs exactly the address, not the address plus the base.
TEST(FileExtent, Hdf5EndOfFileIsAnAbsoluteOffsetWithAUserBlock) {
    TempDir dir;
    Spec s;
    s.mode = NC_CLOBBER | NC_NETCDF4;
    const auto plain = bytes_of(make_grid_file(dir, "plain.nc", s));
    ASSERT_GE(plain[8], 2) << "netCDF-4 writes superblock version 2 or 3";
    const int width = plain[9];
    std::vector<unsigned char> blocked(512, 0);
    blocked.insert(blocked.end(), plain.begin(), plain.end());
    const auto put = [&](std::size_t at, std::uint64_t value) {
        for (int k = 0; k < width; ++k) {
            blocked[at + static_cast<std::size_t>(k)] = static_cast<unsigned char>(value >> (8 * k));
        }
    };
    put(512 + 12, 512);                                                   // base address
    put(512 + 12 + 2 * static_cast<std::size_t>(width), blocked.size());  // end of file, absolute
    const FileExtent extent = netcdf_file_extent(blocked, blocked.size());
    EXPECT_EQ(extent.format, FileExtent::Format::hdf5);
    EXPECT_EQ(extent.required_bytes, blocked.size());
}

TEST(FileExtent, CutHeadersAndGarbageAreProblemsOrUnknown) {
    TempDir dir;
    Spec s;
    auto bytes = bytes_of(make_grid_file(dir, "a.nc", s));
    // A file that ends inside its header.
    const FileExtent cut = netcdf_file_extent(std::span(bytes).first(40), 40);
    EXPECT_TRUE(contains(cut.problem, "past the end of the file")) << cut.problem;
    const std::string text = "this is not netCDF";
    EXPECT_EQ(
        netcdf_file_extent(std::span(reinterpret_cast<const unsigned char*>(text.data()), text.size()), text.size())
            .format,
        FileExtent::Format::unknown);
    // Random bytes behind each magic number: never a crash or a read past the prefix (the sanitizer build
    // checks), and a problem or a request for more whenever the answer is not plausible.
    std::mt19937 random(7);
    for (const unsigned char version :
         {static_cast<unsigned char>(1), static_cast<unsigned char>(2), static_cast<unsigned char>(5)}) {
        for (int trial = 0; trial < 2000; ++trial) {
            std::vector<unsigned char> junk(static_cast<std::size_t>(8 + trial % 200));
            for (auto& c : junk) {
                c = random() % 4 == 0 ? static_cast<unsigned char>(random()) : static_cast<unsigned char>(0);
            }
            junk[0] = 'C';
            junk[1] = 'D';
            junk[2] = 'F';
            junk[3] = version;
            const FileExtent e = netcdf_file_extent(junk, junk.size());
            EXPECT_EQ(e.format, FileExtent::Format::classic);
            EXPECT_LE(e.more_header_bytes, junk.size());
        }
    }
}

// Found by the fuzz target: netCDF-C opens a classic file whose names are longer than NC_MAX_NAME and then
// overflows its callers' name buffers; the extent check refuses such a header before netCDF opens it.
TEST(FileExtent, NamesLongerThanNetcdfAllowsAreRefusedBeforeNetcdfOpensTheFile) {
    std::vector<unsigned char> header = {'C', 'D', 'F', 1, 0, 0, 0, 0, 0, 0, 0, 0x0A, 0, 0, 0, 1, 0, 0, 1, 0x2C};
    header.insert(header.end(), 300, 'a');                            // a 300-byte dim name
    header.insert(header.end(), {0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0,  // its length, no global attributes
                                 0, 0, 0, 0, 0, 0, 0, 0});            // no variables
    const FileExtent extent = netcdf_file_extent(header, header.size());
    EXPECT_TRUE(contains(extent.problem, "a name of 300 bytes")) << extent.problem;
    TempDir dir;
    const std::string path = dir / "long_name.nc";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    EXPECT_TRUE(contains(error_of([&] { NetcdfReader reader(path); }), "more than netCDF's limit of 256"));
}

// -------------------------------------------------------------------------------------------- truncation

TEST(Truncation, AFileCutShortIsRefusedAtOpenInEveryFormat) {
    TempDir dir;
    for (const Format& f : formats) {
        const std::string path = file_in_format(dir, f, 4);
        fs::resize_file(path, fs::file_size(path) - fs::file_size(path) / 5);
        const std::string what = error_of([&] { NetcdfReader reader(path); });
        EXPECT_TRUE(contains(what, "is truncated")) << f.name << ": " << what;
    }
}

TEST(Truncation, AFileThatShrinksDuringReadsFailsAtTheNextStep) {
    TempDir dir;
    for (const Format& f : formats) {
        const std::string path = file_in_format(dir, f, 4);
        const NetcdfReader reader(path);
        VariableReader plan = reader.reader("field", {{0, 5}, {0, 8}});
        std::vector<float> step(plan.values_per_step());
        plan.read_step(0, std::span<float>(step));
        EXPECT_EQ(step[9], static_cast<float>(value(0, 0, 1, 1)));
        fs::resize_file(path, fs::file_size(path) / 2);
        const std::string what = error_of([&] { plan.read_step(3, std::span<float>(step)); });
        EXPECT_TRUE(contains(what, "is truncated") && contains(what, "reading variable 'field' at step 3"))
            << f.name << ": " << what;
        EXPECT_THROW(reader.check_complete("now"), NetcdfError);
    }
}

TEST(Truncation, AFifoIsRefusedWithoutOpeningIt) {
    TempDir dir;
    const std::string fifo = dir / "pipe.nc";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string what = error_of([&] { NetcdfReader reader(fifo); });  // would block in open()
    EXPECT_TRUE(contains(what, "is not a regular file (a FIFO)")) << what;
}

// ------------------------------------------------------------------------------------------- CF decoding

// A (3, 4) file with variable "v" of `type` holding `stored`, and the attributes `numbers` (of their own
// types) and `texts`.
struct Attribute {
    std::string name;
    nc_type type;
    std::vector<double> values;
};
std::string decoding_file(const TempDir& dir, const std::string& name, nc_type type, const std::vector<double>& stored,
                          const std::vector<Attribute>& numbers,
                          const std::vector<std::pair<std::string, std::string>>& texts = {}) {
    const std::string path = dir / name;
    Builder b(path, NC_CLOBBER | NC_NETCDF4);
    const int lat_dim = b.dim("lat", 3);
    const int lon_dim = b.dim("lon", 4);
    const int lat = b.var("lat", NC_DOUBLE, {lat_dim});
    const int lon = b.var("lon", NC_DOUBLE, {lon_dim});
    b.text(lat, "units", "degrees_north");
    b.text(lon, "units", "degrees_east");
    const int v = b.var("v", type, {lat_dim, lon_dim});
    for (const Attribute& a : numbers) {
        b.number(v, a.name, a.type, a.values);
    }
    for (const auto& [key, text] : texts) {
        b.text(v, key, text);
    }
    b.end();
    b.put(lat, {-60, 0, 60});
    b.put(lon, {0, 90, 180, 270});
    b.put(v, stored);
    return path;
}

std::vector<double> stored_values(double first, double step) {
    std::vector<double> values(12);
    for (std::size_t k = 0; k < values.size(); ++k) {
        values[k] = first + step * static_cast<double>(k);
    }
    return values;
}

template <class T>
std::vector<T> read_all(const std::string& path) {
    return NetcdfReader(path).read<T>("v", {0, 1}, {{0, 3}, {0, 4}});
}

TEST(CfDecoding, ValuesOutsideTheValidRangeAreMissing) {
    TempDir dir;
    const auto stored = stored_values(-5, 1);  // -5 .. 6
    const std::vector<std::vector<Attribute>> cases = {
        {{"valid_range", NC_FLOAT, {-2, 3}}},
        {{"valid_min", NC_FLOAT, {-2}}, {"valid_max", NC_FLOAT, {3}}},
    };
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const auto got =
            read_all<float>(decoding_file(dir, "r" + std::to_string(c) + ".nc", NC_FLOAT, stored, cases[c]));
        for (std::size_t k = 0; k < got.size(); ++k) {
            if (stored[k] < -2 || stored[k] > 3) {
                EXPECT_TRUE(std::isnan(got[k])) << k;
            } else {
                EXPECT_EQ(got[k], static_cast<float>(stored[k])) << k;
            }
        }
    }
    const auto only_min =
        read_all<float>(decoding_file(dir, "min.nc", NC_FLOAT, stored, {{"valid_min", NC_FLOAT, {0}}}));
    EXPECT_TRUE(std::isnan(only_min[4]));
    EXPECT_EQ(only_min[11], 6.0f);
    const std::string contradicting =
        decoding_file(dir, "bad.nc", NC_FLOAT, stored, {{"valid_range", NC_FLOAT, {3, -2}}});
    EXPECT_TRUE(contains(error_of([&] { (void)read_all<float>(contradicting); }), "minimum is above its maximum"));
}

TEST(CfDecoding, ValidRangeIsInThePackedTypeAndAppliesBeforeUnpacking) {
    TempDir dir;
    const auto stored = stored_values(-6, 1);  // -6 .. 5 as shorts
    const auto got = read_all<double>(decoding_file(
        dir, "packed.nc", NC_SHORT, stored,
        {{"scale_factor", NC_DOUBLE, {0.5}}, {"add_offset", NC_DOUBLE, {100}}, {"valid_range", NC_SHORT, {-4, 4}}}));
    for (std::size_t k = 0; k < got.size(); ++k) {
        if (std::abs(stored[k]) > 4) {
            EXPECT_TRUE(std::isnan(got[k])) << k;
        } else {
            EXPECT_EQ(got[k], stored[k] * 0.5 + 100) << k;
        }
    }
    // _Unsigned bytes: the range is unsigned too (stored -1 is 255).
    const auto bytes = read_all<float>(decoding_file(dir, "ubyte.nc", NC_BYTE, stored_values(-3, 1),
                                                     {{"valid_range", NC_SHORT, {0, 250}}}, {{"_Unsigned", "true"}}));
    EXPECT_TRUE(std::isnan(bytes[0]) && std::isnan(bytes[1]) && std::isnan(bytes[2]));  // 253, 254, 255
    EXPECT_EQ(bytes[3], 0.0f);
    EXPECT_EQ(bytes[11], 8.0f);
}

TEST(CfDecoding, ValuesComeOutInTheirNativeTypeWithoutRounding) {
    TempDir dir;
    struct Case {
        nc_type stored;
        std::vector<Attribute> attributes;
        ValueType expected;
    };
    const Case cases[] = {
        {NC_FLOAT, {}, ValueType::float32},
        {NC_DOUBLE, {}, ValueType::float64},
        {NC_SHORT, {}, ValueType::float32},
        {NC_INT, {}, ValueType::float64},
        {NC_SHORT, {{"scale_factor", NC_DOUBLE, {0.1}}}, ValueType::float64},
        {NC_SHORT, {{"scale_factor", NC_FLOAT, {0.1}}}, ValueType::float32},
        {NC_INT, {{"add_offset", NC_FLOAT, {1}}}, ValueType::float32},
    };
    for (std::size_t c = 0; c < std::size(cases); ++c) {
        const std::string path = decoding_file(dir, "t" + std::to_string(c) + ".nc", cases[c].stored,
                                               stored_values(1, 3), cases[c].attributes);
        EXPECT_EQ(NetcdfReader(path).variable("v").value_type, cases[c].expected) << c;
    }
    // Doubles near 1e5 that differ by 1e-4 stay apart (float would merge them).
    const auto exact = stored_values(1e5, 1e-4);
    EXPECT_EQ(read_all<double>(decoding_file(dir, "d.nc", NC_DOUBLE, exact, {})), exact);
    // Large packed ints with a float scale go through double: one rounding, to the float of the exact value.
    const auto big = stored_values(16777217, 1);  // beyond float's integers
    const auto got = read_all<float>(decoding_file(dir, "big.nc", NC_INT, big, {{"add_offset", NC_FLOAT, {0.5}}}));
    for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k], static_cast<float>(big[k] + 0.5)) << k;
    }
}

// ----------------------------------------------------------------------------------------- curvilinear

std::string curvilinear_file(const TempDir& dir, const std::string& name, bool index_axes) {
    const std::string path = dir / name;
    Builder b(path);
    const int y = b.dim(index_axes ? "y" : "lat", 4);
    const int x = b.dim(index_axes ? "x" : "lon", 5);
    const int yv = b.var(index_axes ? "y" : "lat", NC_DOUBLE, {y});
    const int xv = b.var(index_axes ? "x" : "lon", NC_DOUBLE, {x});
    if (index_axes) {
        b.text(yv, "axis", "Y");
        b.text(xv, "axis", "X");
    } else {
        b.text(yv, "units", "degrees_north");
        b.text(xv, "units", "degrees_east");
    }
    const int lat2d = b.var("lat2d", NC_DOUBLE, {y, x});
    b.text(lat2d, "standard_name", "latitude");
    const int v = b.var("v", NC_FLOAT, {y, x});
    b.text(v, "coordinates", "lat2d");
    b.end();
    b.put(yv, {0, 1, 2, 3});
    b.put(xv, {0, 1, 2, 3, 4});
    b.put(lat2d, std::vector<double>(20, 45.0));
    b.put(v, std::vector<double>(20, 1.0));
    return path;
}

TEST(Curvilinear, IndexAxesBesideTwoDimensionalLatitudesAreRefused) {
    TempDir dir;
    const std::string what = error_of([&] { NetcdfReader reader(curvilinear_file(dir, "a.nc", true)); });
    EXPECT_TRUE(contains(what, "curvilinear") && contains(what, "'lat2d' (y, x)")) << what;
}

TEST(Curvilinear, AFieldOnTwoDimensionalCoordinatesIsRefused) {
    TempDir dir;
    const NetcdfReader reader(curvilinear_file(dir, "b.nc", false));
    EXPECT_TRUE(contains(error_of([&] { (void)reader.variable("v"); }), "curvilinear"));
    EXPECT_TRUE(contains(error_of([&] { (void)reader.field_variables(); }), "curvilinear"));
}

// ------------------------------------------------------------------------------------------------ units

TEST(Units, SameUnitsAsUdunitsSeesThem) {
    EXPECT_TRUE(same_units("m/s", "m s-1"));
    EXPECT_TRUE(same_units("K", "kelvin"));
    EXPECT_TRUE(same_units("", ""));
    EXPECT_TRUE(same_units("no such unit!", "no such unit!"));
    EXPECT_FALSE(same_units("K", "degC"));
    EXPECT_FALSE(same_units("m", "km"));
    EXPECT_FALSE(same_units("K", ""));
    EXPECT_FALSE(same_units("no such unit!", "m"));
}

TEST(Units, TimesAreComparedAfterConversion) {
    GridInfo a;
    a.time_values = {0, 6, 12};
    a.time_units = "hours since 2000-01-01 00:00:00";
    GridInfo b = a;
    b.time_units = "days since 2000-01-01";
    b.time_values = {0, 0.25, 0.5};
    EXPECT_EQ(time_mismatch(a, "A", b, "B"), "");
    b.time_units = "minutes since 1999-12-31 18:00";
    b.time_values = {360, 720, 1080};
    EXPECT_EQ(time_mismatch(a, "A", b, "B"), "");
    b.time_values = {360, 720, 1081};
    EXPECT_TRUE(contains(time_mismatch(a, "A", b, "B"), "differ at step 2"));
    GridInfo c = a;
    c.time_calendar = "noleap";
    EXPECT_TRUE(contains(time_mismatch(a, "A", c, "C"), "calendars differ"));
    GridInfo d = c;
    d.time_units = "hours since 2000-01-02";
    d.time_values = {-24, -18, -12};
    EXPECT_TRUE(contains(time_mismatch(c, "C", d, "D"), "cannot be converted"));
    // UDUNITS-2 counts the standard calendar (Julian before 1582-10-15): proleptic_gregorian is converted
    // only when both reference dates are past the switch.
    GridInfo early = a;
    early.time_calendar = "proleptic_gregorian";
    early.time_units = "days since 0001-01-01";
    early.time_values = {719162, 719162.25, 719162.5};  // 1970-01-01 in the proleptic Gregorian calendar
    GridInfo late = early;
    late.time_units = "days since 1970-01-01";
    late.time_values = {0, 0.25, 0.5};
    EXPECT_TRUE(contains(time_mismatch(early, "E", late, "L"), "cannot be converted"));
    GridInfo later = late;
    later.time_units = "hours since 1969-12-31";
    later.time_values = {24, 30, 36};
    EXPECT_EQ(time_mismatch(late, "L", later, "M"), "");
    // The same units text, even one UDUNITS cannot read, compares the values as they are.
    GridInfo bare = a;
    bare.time_units = "";
    EXPECT_EQ(time_mismatch(bare, "A", bare, "B"), "");
    GridInfo bare_other = bare;
    bare_other.time_values[1] = 7;
    EXPECT_TRUE(contains(time_mismatch(bare, "A", bare_other, "B"), "differ at step 1"));
    a.time_calendar = "gregorian";  // one with standard
    GridInfo e = a;
    e.time_calendar = "standard";
    EXPECT_EQ(time_mismatch(a, "A", e, "E"), "");
    e.time_units = "parsecs";
    EXPECT_TRUE(contains(time_mismatch(a, "A", e, "E"), "cannot read the time units"));
}

// --------------------------------------------------------------------------------------- output paths

std::string write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    return path;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OutputPaths, AnOutputThatIsAnInputByAnyNameIsRefused) {
    TempDir dir;
    const std::string input = write_text(dir / "in.nc", "data");
    fs::create_directory(dir / "sub");
    fs::create_symlink(input, dir / "link.nc");
    fs::create_hard_link(input, dir / "hard.nc");
    for (const std::string& output : {input, dir / "sub/../in.nc", dir / "link.nc", dir / "hard.nc"}) {
        const std::string what = error_of([&] { check_output_paths({{"--truth", input}}, {{"--json", output}}); });
        EXPECT_TRUE(contains(what, "is the same file as --truth")) << output << ": " << what;
    }
    EXPECT_TRUE(
        contains(error_of([&] {
                     check_output_paths({}, {{"--json", dir / "new.json"}, {"--zonal", dir / "sub/../new.json"}});
                 }),
                 "is the same file as --json"));
    EXPECT_NO_THROW(
        check_output_paths({{"--truth", input}, {"--pred", ""}}, {{"--json", dir / "out.json"}, {"--zonal", ""}}));
    EXPECT_EQ(read_text(input), "data");
}

TEST(OutputPaths, OnlyRegularFilesInExistingFoldersMayBeOutputs) {
    TempDir dir;
    fs::create_directory(dir / "folder");
    EXPECT_TRUE(contains(error_of([&] { check_output_paths({}, {{"--json", dir / "folder"}}); }), "is a directory"));
    EXPECT_TRUE(contains(error_of([&] {
                             check_output_paths({}, {{"--json", dir / "none/x.json"}});
                         }),
                         "does not exist"));
    fs::create_symlink(dir / "nowhere", dir / "dangling");
    EXPECT_TRUE(contains(error_of([&] { check_output_paths({}, {{"--json", dir / "dangling"}}); }), "dangling"));
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    EXPECT_TRUE(contains(error_of([&] { check_output_paths({}, {{"--zonal", dir / "fifo"}}); }), "a FIFO"));
    EXPECT_NO_THROW(check_output_paths({}, {{"--json", dir / "fifo", true}}));  // a stream may go to a FIFO
    if (::geteuid() == 0) {
        ASSERT_EQ(::mknod((dir / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
        EXPECT_TRUE(contains(error_of([&] {
                                 check_output_paths({}, {{"--zonal", dir / "null"}});
                             }),
                             "a character device"));
        EXPECT_NO_THROW(check_output_paths({}, {{"--json", dir / "null", true}}));
    }
}

TEST(AtomicOutput, ADeviceOrAFifoIsWrittenThroughAndNeverReplaced) {
    TempDir dir;
    {
        AtomicOutput out("/dev/null");
        EXPECT_TRUE(out.writes_directly());
        EXPECT_TRUE(out.temporary_path().empty());
        out.write("discarded");
        out.commit();
    }
    struct stat info {};
    ASSERT_EQ(::stat("/dev/null", &info), 0);
    EXPECT_TRUE(S_ISCHR(info.st_mode));
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    // Without a reader the output fails at once instead of waiting for one.
    EXPECT_TRUE(contains(error_of([&] { AtomicOutput out(dir / "fifo"); }), "no process reads it"));
    const int reader = ::open((dir / "fifo").c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(reader, 0);
    {
        AtomicOutput out(dir / "fifo");
        out.write("report\n");
        out.flush();
        char none[8];
        EXPECT_EQ(::read(reader, none, sizeof none), -1);  // nothing before publish()
        out.publish();
    }
    char got[16] = {};
    EXPECT_EQ(::read(reader, got, sizeof got), 7);
    EXPECT_EQ(std::string(got), "report\n");
    ::close(reader);
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"fifo"}));
}

TEST(AtomicOutput, SharedTemporariesAreNamedForTheirHostAndProcess) {
    TempDir dir;
    AtomicOutput out(dir / "out.json", TemporaryKind::shared);
    EXPECT_FALSE(out.unnamed());
    char host[256] = {};
    ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
    EXPECT_EQ(fs::path(out.temporary_path())
                  .filename()
                  .string()
                  .rfind(".out.json.gridshard-tmp-" + std::string(host) + "-" + std::to_string(::getpid()) + "-", 0),
              0u)
        << out.temporary_path();
}

TEST(AtomicOutput, CommitReplacesTheTargetAndKeepsItsModeAndLinks) {
    TempDir dir;
    const std::string target = write_text(dir / "out.json", "old");
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    fs::create_symlink(target, dir / "link.json");
    {
        AtomicOutput out(dir / "link.json");
        // An unnamed temporary's /proc/self/fd link reads "FOLDER/#INODE (deleted)".
        const fs::path temporary =
            out.unnamed() ? fs::read_symlink(out.temporary_path()) : fs::path(out.temporary_path());
        EXPECT_EQ(temporary.parent_path(), fs::path(target).parent_path());
        out.write("new");
        EXPECT_EQ(read_text(target), "old");  // nothing visible before the commit
        out.commit();
    }
    EXPECT_EQ(read_text(target), "new");
    EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
    EXPECT_EQ(fs::status(target).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    EXPECT_EQ(dir.entries().size(), 2u);
}

TEST(AtomicOutput, AFailureLeavesEveryTargetAsItWasAndNoTemporary) {
    TempDir dir;
    const std::string first = write_text(dir / "first.nc", "first");
    {
        AtomicOutput abandoned(first);
        abandoned.write("half");
    }
    EXPECT_EQ(read_text(first), "first");
    const std::vector<OutputJob> jobs = {
        {first, [](AtomicOutput& out) { out.write("replaced"); }},
        {dir / "second.json", [](AtomicOutput&) { throw SystemError("disk full (simulated)"); }},
    };
    EXPECT_THROW(write_outputs_atomically(jobs), SystemError);
    EXPECT_EQ(read_text(first), "first");
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{"first.nc"}));
    EXPECT_TRUE(contains(error_of([&] { AtomicOutput out(dir / "no/such/folder.json"); }), "No such file"));
}

// The names in `dir` that are temporaries (".NAME.gridshard-tmp-...").
std::vector<std::string> temporaries_in(const TempDir& dir) {
    std::vector<std::string> found;
    for (const std::string& name : dir.entries()) {
        if (contains(name, ".gridshard-tmp-")) {
            found.push_back(name);
        }
    }
    return found;
}

// Runs `write(kill)` in a child process, which calls `kill()` while its output lives: the child is killed outright
// there (SIGKILL: no handler, no destructor runs).
template <class Write>
void killed_while_writing(Write write) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        write([] { ::raise(SIGKILL); });
        ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(AtomicOutput, AnUnnamedTemporaryIsNeverSeenAndGoesWithAKilledWriter) {
    TempDir dir;
    {
        AtomicOutput out(dir / "out.nc");
        ASSERT_TRUE(out.unnamed()) << "this file system has no O_TMPFILE: " << out.temporary_path();
        // A library writes it by path (netCDF, as the tool's writers do).
        int ncid = -1;
        ASSERT_EQ(nc_create(out.temporary_path().c_str(), NC_CLOBBER | NC_64BIT_OFFSET, &ncid), NC_NOERR);
        ASSERT_EQ(nc_close(ncid), NC_NOERR);
        EXPECT_EQ(dir.entries(), std::vector<std::string>{});  // nothing in the folder before the commit
        out.commit();
    }
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.nc"});
    EXPECT_EQ(bytes_of(dir / "out.nc").at(3), 2);  // "CDF\2": the 64-bit offset file netCDF wrote by path
    killed_while_writing([&](auto kill) {
        AtomicOutput out(dir / "out.nc");
        out.write("half a file");
        kill();
    });
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.nc"});  // no temporary outlives its writer
    // A shared (named) one is left by a SIGKILL, and the next output of the same target removes it: its
    // process is gone, and it holds no liveness lock.
    killed_while_writing([&](auto kill) {
        AtomicOutput out(dir / "out.nc", TemporaryKind::shared);
        out.write("half a file");
        kill();
    });
    EXPECT_EQ(temporaries_in(dir).size(), 1u);
    { AtomicOutput next(dir / "out.nc"); }
    EXPECT_EQ(temporaries_in(dir), std::vector<std::string>{});
}

TEST(AtomicOutput, ATemporaryWhoseWriterHoldsItsLockIsKeptWhateverItsName) {
    // A temporary named for a process of this host that is gone, but locked by a live writer (a container that
    // shares this host's name and not its processes): kept until the lock goes.
    TempDir dir;
    const pid_t gone = ::fork();
    ASSERT_GE(gone, 0);
    if (gone == 0) {
        ::_exit(0);
    }
    ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
    char host[256] = {};
    ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
    const std::string name = ".out.json.gridshard-tmp-" + std::string(host) + "-" + std::to_string(gone) + "-0";
    const int fd = ::open((dir / name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    ASSERT_GE(fd, 0);
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = off_t{1} << 62;  // the byte every writer locks (output_file.cpp)
    lock.l_len = 1;
    ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &lock), 0);
    { AtomicOutput next(dir / "out.json"); }
    EXPECT_EQ(temporaries_in(dir), std::vector<std::string>{name});
    ::close(fd);  // the writer ends: the lock goes
    { AtomicOutput next(dir / "out.json"); }
    EXPECT_EQ(temporaries_in(dir), std::vector<std::string>{});
}

// --------------------------------------------------------------------------------------------- memory

TEST(Memory, AvailableBytesAreKnownAndHugeAllocationsSayWhat) {
    const auto available = available_memory_bytes();
    ASSERT_TRUE(available.has_value());
    EXPECT_GT(*available, 0u);
    EXPECT_EQ(format_bytes(17), "17 bytes");
    EXPECT_EQ(format_bytes(1536), "1.50 KiB");
    EXPECT_EQ(format_bytes(std::uint64_t{3} << 30), "3.00 GiB");
    try {
        (void)allocate_vector<double>(std::size_t{1} << 61, "the test's buffer");
        FAIL() << "no SystemError";
    } catch (const SystemError& error) {
        EXPECT_TRUE(contains(error.what(), "out of memory allocating the test's buffer")) << error.what();
    }
}

}  // namespace
}  // namespace gridshard::io
