// Collective parallel I/O (io/parallel_io.hpp) at every mesh: collective reads of each rank's box give the
// bits of independent reads, for netCDF-4 and the classic formats, with ranks that read nothing in some
// rounds; a truncated file fails on every rank; a dataset written collectively, each rank its own box, is
// the same bytes as the one rank's write. In a build without collective I/O, the calls say so.

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../unit/netcdf_fixture.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/parallel_io.hpp"
#include "gridshard/metrics/field.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using io::testing::make_grid_file;
using io::testing::Spec;
using io::testing::TempDir;

// Rank 0's `text` on every rank.
std::string broadcast(const Communicator& comm, std::string text) {
    int size = static_cast<int>(text.size());
    MPI_Bcast(&size, 1, MPI_INT, 0, comm.native());
    text.resize(static_cast<std::size_t>(size));
    MPI_Bcast(text.data(), size, MPI_CHAR, 0, comm.native());
    return text;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A grid file written by rank 0 in a folder rank 0 owns; every rank gets its path.
struct SharedFile {
    std::unique_ptr<TempDir> dir;
    std::string path;
};

SharedFile shared_grid_file(const Communicator& world, const Spec& spec) {
    SharedFile file;
    if (world.rank() == 0) {
        file.dir = std::make_unique<TempDir>();
        file.path = make_grid_file(*file.dir, "grid.nc", spec);
    }
    file.path = broadcast(world, file.path);
    return file;
}

class CollectiveReads : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveReads, GiveTheBitsOfIndependentReadsWithRanksReadingNothing) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& world = mesh.world();
    Spec spec;
    spec.nlat = 11;
    spec.nlon = 14;
    spec.ntime = 5;
    spec.nlev = 2;
    spec.mode = GetParam();
    const SharedFile file = shared_grid_file(world, spec);
    if (!io::collective_io_available()) {
        EXPECT_THROW(io::NetcdfReader(file.path, world), ArgumentError);
        return;
    }
    const ShardedGrid grid(mesh, {11, 14}, SplitRule::div_up);  // some shards empty at 4 ranks in a row
    const io::NetcdfReader together(file.path, world);
    const io::NetcdfReader alone(file.path);
    io::VariableReader collective = together.reader("field", grid.box());
    io::VariableReader independent = alone.reader("field", grid.box());
    ASSERT_TRUE(collective.collective());
    ASSERT_FALSE(independent.collective());
    std::vector<double> got(collective.values_per_step());
    std::vector<double> want(independent.values_per_step());
    std::vector<float> got_float(collective.values_per_step());
    // Round k: world rank r reads step (k + r) % 5 when k <= r % 3, else nothing.
    for (std::int64_t round = 0; round < 3; ++round) {
        const bool reads = round <= world.rank() % 3;
        const std::int64_t step = (round + world.rank()) % 5;
        if (reads) {
            collective.read_step(step, std::span<double>(got));
            independent.read_step(step, std::span<double>(want));
            EXPECT_EQ(got, want) << "step " << step;
            collective.read_step(step, std::span<float>(got_float));
            EXPECT_EQ(std::vector<double>(got_float.begin(), got_float.end()), want) << "step " << step;
        } else {
            collective.read_none();
            collective.read_none();
        }
    }
    // A run of steps in one collective call.
    io::VariableReader by_run = together.reader("field", grid.box(), {"time"});
    std::vector<double> run(3 * by_run.values_per_step());
    const std::int64_t first = 1;
    by_run.read_run(std::span<const std::int64_t>(&first, 1), {0, 3}, std::span<double>(run));
    for (std::int64_t k = 0; k < 3; ++k) {
        independent.read_step(first + k, std::span<double>(want));
        EXPECT_TRUE(std::equal(want.begin(), want.end(), run.begin() + k * static_cast<std::ptrdiff_t>(want.size())));
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, CollectiveReads, ::testing::Values(NC_NETCDF4, NC_64BIT_OFFSET, NC_64BIT_DATA),
                         [](const auto& param_info) {
                             return param_info.param == NC_NETCDF4        ? std::string("netcdf4")
                                    : param_info.param == NC_64BIT_OFFSET ? std::string("cdf2")
                                                                          : std::string("cdf5");
                         });

TEST(CollectiveReads, ATruncatedFileFailsOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& world = mesh.world();
    Spec spec;
    spec.mode = NC_64BIT_OFFSET;
    const SharedFile file = shared_grid_file(world, spec);
    if (!io::collective_io_available()) {
        GTEST_SKIP() << "no collective I/O in this build (the test above checks it says so)";
    }
    if (world.rank() == 0) {
        std::error_code error;
        const auto size = static_cast<off_t>(std::filesystem::file_size(file.path, error));
        ASSERT_EQ(::truncate(file.path.c_str(), size - 40), 0);  // into the data, past the header
    }
    world.barrier();
    try {
        const io::NetcdfReader reader(file.path, world);
        ADD_FAILURE() << "a truncated file was opened";
    } catch (const ArgumentError& error) {  // agreed: the same error on every rank
        EXPECT_NE(std::string(error.what()).find("is truncated"), std::string::npos) << error.what();
    }
}

TEST(CollectiveWrites, AreTheBytesOfOneRanksWrite) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& world = mesh.world();
    const GridShape shape{9, 13};
    const ShardedGrid grid(mesh, shape, SplitRule::balanced);
    const Box& box = grid.box();
    const auto value = [](std::int64_t i, std::int64_t j) {
        return (i * 31 + j) % 7 == 0 ? std::numeric_limits<double>::quiet_NaN()
                                     : 0.25 * static_cast<double>(i * 100 + j);
    };
    io::Dataset whole;
    whole.dims = {{"lat",
                   shape.nlat,
                   std::vector<double>(static_cast<std::size_t>(shape.nlat), 1.5),
                   {{"units", "degrees_north"}}},
                  {"lon", shape.nlon, {}, {}},
                  {"step", 3, {0, 1, 2}, {}},
                  {"source", 2, {}, {}, false, {"prediction", "target"}}};  // a string coordinate
    whole.variables.push_back(
        {"score", {"step"}, {1.0, 2.0, std::numeric_limits<double>::quiet_NaN()}, {{"units", "K"}}});
    whole.variables.push_back({"map", {"lat", "lon"}, {}, {{"long_name", "a map"}}});
    whole.global_attributes = {{"title", "collective"}};
    for (std::int64_t i = 0; i < shape.nlat; ++i) {
        for (std::int64_t j = 0; j < shape.nlon; ++j) {
            whole.variables[1].values.push_back(value(i, j));
        }
    }
    // Each rank's part: its box, on data rank 0 only (the others write nothing).
    io::Dataset parts = whole;
    io::DatasetVariable& map = parts.variables[1];
    map.values.clear();
    const bool writes = mesh.coords().data == 0;
    map.start = {writes ? box.lat.begin : 0, writes ? box.lon.begin : 0};
    map.count = {writes ? box.lat.size() : 0, writes ? box.lon.size() : 0};
    for (std::int64_t i = box.lat.begin; writes && i < box.lat.end; ++i) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
            map.values.push_back(value(i, j));
        }
    }
    std::unique_ptr<TempDir> dir;
    std::string folder;
    if (world.rank() == 0) {
        dir = std::make_unique<TempDir>();
        folder = *dir / "";
    }
    folder = broadcast(world, folder);
    std::optional<io::AtomicOutput> output;
    if (world.rank() == 0) {
        output.emplace(folder + "together.nc", io::TemporaryKind::shared);  // every rank opens it
    }
    const std::string temporary = broadcast(world, world.rank() == 0 ? output->temporary_path() : "");
    if (!io::collective_io_available()) {
        EXPECT_THROW(io::write_dataset_collectively(temporary, folder + "together.nc", parts, world), ArgumentError);
        return;
    }
    io::write_dataset_collectively(temporary, folder + "together.nc", parts, world);
    if (world.rank() == 0) {
        output->commit();
        io::AtomicOutput serial(folder + "alone.nc");
        io::write_dataset(serial, whole);
        serial.commit();
        EXPECT_EQ(bytes_of(folder + "together.nc"), bytes_of(folder + "alone.nc"));
        EXPECT_GT(bytes_of(folder + "alone.nc").size(), 9u * 13u * 8u);
    }
    // A part outside its dims fails on every rank, before anything is written.
    io::Dataset bad = parts;
    if (world.rank() == world.size() - 1) {
        bad.variables[1].start = {shape.nlat, 0};
        bad.variables[1].count = {1, 1};
        bad.variables[1].values = {1.0};
    }
    EXPECT_THROW(io::write_dataset_collectively(temporary, folder + "together.nc", bad, world), ArgumentError);
}

}  // namespace
}  // namespace gridshard
