// The process mesh: coordinates, the five groups, neighbours, and errors raised on every rank.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

// The world ranks (of the mesh's world) that make up `group`, in group-rank order.
std::vector<int> members(const ProcessMesh& mesh, const Communicator& group) {
    std::vector<int> ranks(static_cast<std::size_t>(group.size()));
    const int mine = mesh.world().rank();
    GRIDSHARD_MPI(MPI_Allgather, &mine, 1, MPI_INT, ranks.data(), 1, MPI_INT, group.native());
    return ranks;
}

TEST(ProcessMesh, CoordinatesAndGroups) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const MeshShape s = mesh.shape();
    const MeshCoords c = mesh.coords();
    EXPECT_EQ(mesh.world().rank(), c.data * s.lat * s.lon + c.lat * s.lon + c.lon);
    EXPECT_TRUE(mesh.world().owns());
    EXPECT_EQ(mesh.data().size(), s.data);
    EXPECT_EQ(mesh.lat().size(), s.lat);
    EXPECT_EQ(mesh.lon().size(), s.lon);
    EXPECT_EQ(mesh.spatial().size(), s.lat * s.lon);
    EXPECT_EQ(mesh.data().rank(), c.data);
    EXPECT_EQ(mesh.lat().rank(), c.lat);
    EXPECT_EQ(mesh.lon().rank(), c.lon);
    EXPECT_EQ(mesh.spatial().rank(), c.lat * s.lon + c.lon);

    // Each group holds exactly the ranks that share the right coordinates, in the right order.
    auto expect_members = [&](const Communicator& group, auto coords_of_member) {
        const std::vector<int> got = members(mesh, group);
        for (int k = 0; k < group.size(); ++k) {
            EXPECT_EQ(got[static_cast<std::size_t>(k)], rank_of_coords(s, coords_of_member(k)));
        }
    };
    expect_members(mesh.data(), [&](int k) { return MeshCoords{k, c.lat, c.lon}; });
    expect_members(mesh.lat(), [&](int k) { return MeshCoords{c.data, k, c.lon}; });
    expect_members(mesh.lon(), [&](int k) { return MeshCoords{c.data, c.lat, k}; });
    expect_members(mesh.spatial(), [&](int k) { return MeshCoords{c.data, k / s.lon, k % s.lon}; });
}

TEST(ProcessMesh, NeighbourRanksInTheSpatialGroup) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const MeshShape s = mesh.shape();
    const MeshCoords c = mesh.coords();
    const Periodicity periodic_lon{.lat = false, .lon = true};
    EXPECT_EQ(mesh.neighbour_spatial_rank(Side::lat_prev, {}).has_value(), c.lat > 0);
    EXPECT_EQ(mesh.neighbour_spatial_rank(Side::lat_next, {}).has_value(), c.lat + 1 < s.lat);
    EXPECT_EQ(mesh.neighbour_spatial_rank(Side::lon_next, periodic_lon), c.lat * s.lon + (c.lon + 1) % s.lon);
    EXPECT_EQ(mesh.neighbour_spatial_rank(Side::lon_prev, periodic_lon), c.lat * s.lon + (c.lon + s.lon - 1) % s.lon);
}

TEST(ProcessMesh, WrongSizeIsRaisedOnEveryRankWithBothNumbers) {
    const int world = Communicator::world().size();
    const MeshShape too_big{1, world + 1, 1};
    try {
        ProcessMesh mesh(Communicator::world(), too_big);
        FAIL() << "expected ArgumentError";
    } catch (const ArgumentError& error) {
        const std::string message = error.what();
        EXPECT_NE(message.find(std::to_string(world + 1) + " ranks"), std::string::npos) << message;
        EXPECT_NE(message.find("has " + std::to_string(world)), std::string::npos) << message;
    }
}

TEST(ProcessMesh, ShapesThatDifferBetweenRanksAreRaisedOnEveryRank) {
    if (Communicator::world().size() < 2) {
        GTEST_SKIP() << "needs two ranks";
    }
    const Communicator world = Communicator::world();
    const MeshShape shape = world.rank() == 0 ? MeshShape{1, 1, world.size()} : MeshShape{1, world.size(), 1};
    EXPECT_THROW(ProcessMesh(world, shape), ArgumentError);
}

TEST(ProcessMesh, BorrowedCommunicatorIsLeftAlone) {
    MPI_Comm mine = MPI_COMM_NULL;
    GRIDSHARD_MPI(MPI_Comm_dup, MPI_COMM_WORLD, &mine);
    {
        Communicator borrowed = Communicator::borrow(mine);
        EXPECT_FALSE(borrowed.owns());
        const ProcessMesh mesh(borrowed, mpitest::mesh_shape());
        EXPECT_EQ(mesh.world().size(), borrowed.size());
        Communicator moved = std::move(borrowed);
        EXPECT_EQ(moved.native(), mine);
        EXPECT_EQ(borrowed.native(), MPI_COMM_NULL);  // NOLINT(bugprone-use-after-move): checking the move
    }
    int size = 0;
    EXPECT_EQ(MPI_Comm_size(mine, &size), MPI_SUCCESS);  // still valid: borrowed handles are never freed
    MPI_Comm_free(&mine);
}

TEST(MpiCheck, CarriesMpisMessage) {
    try {
        detail::check_mpi(MPI_ERR_COMM, "MPI_Test_call");
        FAIL() << "expected MpiError";
    } catch (const MpiError& error) {
        EXPECT_EQ(error.error_code(), MPI_ERR_COMM);
        EXPECT_NE(std::string(error.what()).find("MPI_Test_call failed: "), std::string::npos);
        EXPECT_GT(std::string(error.what()).size(), std::string("MPI_Test_call failed: ").size());
    }
    // A real failing call through the communicator layer: an invalid root returns an error, not an abort.
    const ProcessMesh mesh = mpitest::make_mesh();
    int value = 0;
    EXPECT_THROW(GRIDSHARD_MPI(MPI_Bcast, &value, 1, MPI_INT, mesh.world().size() + 5, mesh.world().native()),
                 MpiError);
}

}  // namespace
}  // namespace gridshard
