// Mesh shapes, coordinates, boxes, neighbours and local slices, over thousands of shapes. No MPI.

#include <gtest/gtest.h>

#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {
namespace {

TEST(MeshShape, ParsesAndRejects) {
    EXPECT_EQ(parse_mesh_shape("1x2x3"), (MeshShape{1, 2, 3}));
    EXPECT_EQ(parse_mesh_shape("4X1x12"), (MeshShape{4, 1, 12}));
    EXPECT_EQ(to_string(MeshShape{2, 3, 4}), "2x3x4");
    for (const char* bad :
         {"", "1x2", "1x2x", "x1x2", "0x1x1", "1x-1x2", "1x2x3x4", "axbxc", "1 x2x3", "1x2x3 ", "100000x100000x1"}) {
        EXPECT_THROW((void)parse_mesh_shape(bad), ArgumentError) << "'" << bad << "'";
    }
}

TEST(MeshCoords, RoundTripAndOrder) {
    for (MeshShape shape : {MeshShape{1, 1, 1}, MeshShape{2, 3, 4}, MeshShape{3, 1, 2}, MeshShape{1, 5, 1}}) {
        for (int rank = 0; rank < shape.size(); ++rank) {
            const MeshCoords c = coords_of_rank(shape, rank);
            EXPECT_EQ(rank, c.data * shape.lat * shape.lon + c.lat * shape.lon + c.lon);
            EXPECT_EQ(rank_of_coords(shape, c), rank);
        }
        EXPECT_THROW((void)coords_of_rank(shape, shape.size()), ArgumentError);
        EXPECT_THROW((void)rank_of_coords(shape, {0, shape.lat, 0}), ArgumentError);
    }
}

TEST(Decomposition, BoxesTileTheGridExactlyOnce) {
    for (std::int64_t nlat = 1; nlat <= 24; ++nlat) {
        for (std::int64_t nlon = 1; nlon <= 24; nlon += 3) {
            for (int lat = 1; lat <= 5; ++lat) {
                for (int lon = 1; lon <= 5; ++lon) {
                    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
                        const MeshShape shape{2, lat, lon};
                        if (rule == SplitRule::balanced && (nlat < lat || nlon < lon)) {
                            EXPECT_THROW(Decomposition({nlat, nlon}, shape, rule), ArgumentError);
                            continue;
                        }
                        const Decomposition d({nlat, nlon}, shape, rule);
                        std::vector<int> owners(static_cast<std::size_t>(nlat * nlon), 0);
                        bool any_empty = false;
                        for (int s = 0; s < shape.spatial_size(); ++s) {
                            const Box b = d.box_of_spatial_rank(s);
                            EXPECT_EQ(b, d.box({1, s / lon, s % lon}));
                            any_empty = any_empty || b.empty();
                            for (std::int64_t i = b.lat.begin; i < b.lat.end; ++i) {
                                for (std::int64_t j = b.lon.begin; j < b.lon.end; ++j) {
                                    ++owners[static_cast<std::size_t>(i * nlon + j)];
                                }
                            }
                        }
                        for (int count : owners) {
                            ASSERT_EQ(count, 1) << nlat << "x" << nlon << " over " << to_string(shape);
                        }
                        EXPECT_EQ(any_empty, d.has_empty_box());
                    }
                }
            }
        }
    }
}

TEST(Decomposition, QuarterDegreeGrid) {
    const Decomposition d({721, 1440}, {1, 2, 2});
    EXPECT_EQ(d.box({0, 0, 0}), (Box{{0, 361}, {0, 720}}));
    EXPECT_EQ(d.box({0, 1, 1}), (Box{{361, 721}, {720, 1440}}));
    const Decomposition ace({721, 1440}, {1, 4, 1}, SplitRule::div_up);
    EXPECT_EQ(ace.lat_range(3), (Range{543, 721}));
}

TEST(Neighbours, LatitudeNeverWrapsLongitudeOnRequest) {
    const MeshShape shape{2, 3, 4};
    const Periodicity open{};
    const Periodicity lon_periodic{.lat = false, .lon = true};
    EXPECT_FALSE(neighbour_coords(shape, {1, 0, 2}, Side::lat_prev, open));
    EXPECT_EQ(neighbour_coords(shape, {1, 0, 2}, Side::lat_next, open), (MeshCoords{1, 1, 2}));
    EXPECT_FALSE(neighbour_coords(shape, {1, 2, 2}, Side::lat_next, lon_periodic));
    EXPECT_FALSE(neighbour_coords(shape, {1, 1, 0}, Side::lon_prev, open));
    EXPECT_EQ(neighbour_coords(shape, {1, 1, 0}, Side::lon_prev, lon_periodic), (MeshCoords{1, 1, 3}));
    EXPECT_EQ(neighbour_coords(shape, {1, 1, 3}, Side::lon_next, lon_periodic), (MeshCoords{1, 1, 0}));
    EXPECT_EQ(neighbour_coords(shape, {0, 2, 1}, Side::lat_next, {.lat = true, .lon = false}), (MeshCoords{0, 0, 1}));
    // One rank along a periodic axis is its own neighbour.
    EXPECT_EQ(neighbour_coords({1, 1, 1}, {0, 0, 0}, Side::lon_next, lon_periodic), (MeshCoords{0, 0, 0}));
    for (Side side : all_sides) {
        EXPECT_EQ(opposite(opposite(side)), side);
        // The neighbour's neighbour across the opposite side is the rank itself.
        for (int rank = 0; rank < shape.size(); ++rank) {
            const MeshCoords c = coords_of_rank(shape, rank);
            if (const auto n = neighbour_coords(shape, c, side, lon_periodic)) {
                EXPECT_EQ(neighbour_coords(shape, *n, opposite(side), lon_periodic), c);
            }
        }
    }
}

TEST(LocalSlices, FollowsAceGetLocalSlices) {
    const Decomposition d({9, 10}, {3, 2, 2}, SplitRule::balanced);
    const std::vector<std::int64_t> shape{6, 4, 9, 10};
    const auto slices = d.local_slices(shape, {2, 1, 0}, 0);
    ASSERT_EQ(slices.size(), 4u);
    EXPECT_EQ(slices[0], (Range{4, 6}));
    EXPECT_EQ(slices[1], (Range{0, 4}));
    EXPECT_EQ(slices[2], (Range{5, 9}));
    EXPECT_EQ(slices[3], (Range{0, 5}));
    const auto no_data = d.local_slices(shape, {2, 1, 1});
    EXPECT_EQ(no_data[0], (Range{0, 6}));
    EXPECT_EQ(no_data[3], (Range{5, 10}));
    const std::vector<std::int64_t> two_d{9, 10};
    EXPECT_EQ(d.local_slices(two_d, {0, 0, 1}).size(), 2u);
    // Not divisible by the data group, wrong trailing dims, data_dim not a leading dim.
    const std::vector<std::int64_t> odd{5, 9, 10};
    EXPECT_THROW((void)d.local_slices(odd, {0, 0, 0}, 0), ArgumentError);
    EXPECT_EQ(d.local_slices(odd, {2, 0, 0}, 0, true)[0], (Range{4, 5}));
    const std::vector<std::int64_t> wrong{6, 10, 9};
    EXPECT_THROW((void)d.local_slices(wrong, {0, 0, 0}), ArgumentError);
    EXPECT_THROW((void)d.local_slices(shape, {0, 0, 0}, 2), ArgumentError);
}

TEST(Decomposition, RejectsBadGrids) {
    EXPECT_THROW(Decomposition({0, 10}, {1, 1, 1}), ArgumentError);
    EXPECT_THROW(Decomposition({10, 10}, {1, 0, 1}), ArgumentError);
    EXPECT_THROW(Decomposition({3, 10}, {1, 4, 1}), ArgumentError);
    EXPECT_NO_THROW(Decomposition({3, 10}, {1, 4, 1}, SplitRule::div_up));
}

}  // namespace
}  // namespace gridshard
