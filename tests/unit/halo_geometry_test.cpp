// Halo sides, validation and byte counts. No MPI.

#include <gtest/gtest.h>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/halo_geometry.hpp"

namespace gridshard {
namespace {

TEST(HaloGeometry, SidesAndStripShapes) {
    const Decomposition d({7, 5}, {1, 2, 2});
    const auto sides = halo_sides(d, {0, 0, 0}, 1, {});
    ASSERT_EQ(sides.size(), 2u);
    EXPECT_EQ(sides[0].side, Side::lat_next);
    EXPECT_EQ(sides[0].rows, 1);
    EXPECT_EQ(sides[0].cols, 3);
    EXPECT_EQ(sides[1].side, Side::lon_next);
    EXPECT_EQ(sides[1].rows, 4);
    EXPECT_EQ(sides[1].cols, 1);
    EXPECT_EQ(halo_bytes_per_channel(d, {0, 0, 0}, 1, {}, 4), (3 + 4) * 4);
    EXPECT_EQ(gather_bytes_per_channel(d, {0, 0, 0}, 4), 4 * 3 * 3 * 4);
    const auto periodic = halo_sides(d, {0, 1, 1}, 2, {.lat = false, .lon = true});
    ASSERT_EQ(periodic.size(), 3u);
    EXPECT_EQ(periodic[1].side, Side::lon_prev);
    EXPECT_EQ(periodic[2].neighbour, (MeshCoords{0, 1, 0}));
    EXPECT_EQ(periodic[2].cols, 2);
}

TEST(HaloGeometry, SelfNeighbourSendsNothing) {
    const Decomposition d({6, 8}, {1, 2, 1});
    const auto sides = halo_sides(d, {0, 0, 0}, 1, {.lat = false, .lon = true});
    ASSERT_EQ(sides.size(), 3u);
    EXPECT_TRUE(sides[1].is_self);
    EXPECT_TRUE(sides[2].is_self);
    EXPECT_EQ(halo_bytes_per_channel(d, {0, 0, 0}, 1, {.lat = false, .lon = true}, 4), 8 * 4);
}

TEST(HaloGeometry, BytesAreAPerimeterNotAnArea) {
    const Decomposition d({721, 1440}, {1, 2, 2});
    for (int rank = 0; rank < 4; ++rank) {
        const MeshCoords c = coords_of_rank(d.mesh(), rank);
        EXPECT_LT(halo_bytes_per_channel(d, c, 1, {}, 4) * 100, gather_bytes_per_channel(d, c, 4));
    }
}

TEST(HaloGeometry, ValidateRefusesEmptyAndThinShards) {
    EXPECT_THROW(validate_halo(Decomposition({3, 8}, {1, 4, 1}, SplitRule::div_up), 1, {}), ArgumentError);
    EXPECT_THROW(validate_halo(Decomposition({8, 8}, {1, 2, 2}), 0, {}), ArgumentError);
    EXPECT_THROW(validate_halo(Decomposition({8, 5}, {1, 2, 2}), 3, {}), ArgumentError);
    EXPECT_NO_THROW(validate_halo(Decomposition({8, 5}, {1, 2, 2}), 2, {}));
    // One rank along a non-periodic axis exchanges nothing there, so any thickness will do.
    EXPECT_NO_THROW(validate_halo(Decomposition({1, 8}, {1, 1, 2}), 3, {}));
    EXPECT_THROW(validate_halo(Decomposition({8, 2}, {1, 1, 1}), 3, {.lat = false, .lon = true}), ArgumentError);
}

}  // namespace
}  // namespace gridshard
