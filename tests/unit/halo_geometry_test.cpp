// Halo sides, validation and byte counts. No MPI.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

// The global cell a padded cell shows, straight from the definitions (or none: a zero), for every padded cell of
// the rank at `spatial_rank`.
struct Shown {
    bool zero = true;
    std::int64_t row = 0;
    std::int64_t col = 0;
};

Shown shown(const GridShape& g, const PaddedHaloSpec& spec, std::int64_t global_row, std::int64_t global_col) {
    if (!spec.periodic_lon && (global_col < 0 || global_col >= g.nlon)) {
        return {};
    }
    std::int64_t col = ((global_col % g.nlon) + g.nlon) % g.nlon;
    std::int64_t row = global_row;
    if (row < 0 || row >= g.nlat) {
        switch (spec.pole) {
            case PoleRule::zero:
                return {};
            case PoleRule::replicate:
                row = row < 0 ? 0 : g.nlat - 1;
                break;
            case PoleRule::across_pole:
                row = row < 0 ? -row - 1 : 2 * g.nlat - row - 1;
                col = (col + g.nlon / 2) % g.nlon;
                break;
        }
    }
    return {false, row, col};
}

// Every padded cell of every rank is covered once by its pieces (or by its own box) and shows what the
// definition says, from the rank that owns that cell; over many grids, meshes, widths and rules.
TEST(PaddedHaloGeometry, PiecesShowTheDefinitionOfEveryCell) {
    int checked = 0;
    for (const GridShape grid :
         {GridShape{7, 6}, GridShape{5, 9}, GridShape{12, 10}, GridShape{3, 4}, GridShape{2, 2}}) {
        for (const MeshShape mesh : {MeshShape{1, 1, 1}, MeshShape{1, 2, 3}, MeshShape{1, 3, 2}, MeshShape{2, 4, 1},
                                     MeshShape{1, 1, 4}, MeshShape{1, 3, 3}}) {
            for (const SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
                if (rule == SplitRule::balanced && (grid.nlat < mesh.lat || grid.nlon < mesh.lon)) {
                    continue;
                }
                const Decomposition d(grid, mesh, rule);
                for (const PoleRule pole : {PoleRule::zero, PoleRule::replicate, PoleRule::across_pole}) {
                    for (const bool periodic : {true, false}) {
                        for (int width = 0; width <= std::min<std::int64_t>(grid.nlat, grid.nlon); ++width) {
                            const PaddedHaloSpec spec{width, periodic, pole};
                            if (pole == PoleRule::across_pole && grid.nlon % 2 != 0) {
                                EXPECT_THROW(validate_padded_halo(d, spec), ArgumentError);
                                continue;
                            }
                            for (int r = 0; r < mesh.spatial_size(); ++r) {
                                const Box box = d.box_of_spatial_rank(r);
                                const std::int64_t rows = box.lat.size() + 2 * width;
                                const std::int64_t cols = box.lon.size() + 2 * width;
                                std::vector<int> covered(static_cast<std::size_t>(rows * cols), 0);
                                for (const HaloPiece& p : padded_halo_pieces(d, r, spec)) {
                                    const Box source = d.box_of_spatial_rank(p.source);
                                    for (std::int64_t k = 0; k < p.cols; ++k) {
                                        ASSERT_GE(p.row, 0);
                                        ASSERT_LT(p.row, rows);
                                        ASSERT_GE(p.col + k, 0);
                                        ASSERT_LT(p.col + k, cols);
                                        ++covered[static_cast<std::size_t>(p.row * cols + p.col + k)];
                                        const Shown want = shown(grid, spec, box.lat.begin - width + p.row,
                                                                 box.lon.begin - width + p.col + k);
                                        ASSERT_FALSE(want.zero);
                                        ASSERT_EQ(p.source_row, want.row);
                                        ASSERT_EQ(p.source_col + k, want.col);
                                        ASSERT_TRUE(p.source_row >= source.lat.begin && p.source_row < source.lat.end);
                                        ASSERT_TRUE(p.source_col + k >= source.lon.begin &&
                                                    p.source_col + k < source.lon.end);
                                    }
                                }
                                for (std::int64_t i = 0; i < rows; ++i) {
                                    for (std::int64_t j = 0; j < cols; ++j) {
                                        const bool own = i >= width && i < width + box.lat.size() && j >= width &&
                                                         j < width + box.lon.size();
                                        const Shown want =
                                            shown(grid, spec, box.lat.begin - width + i, box.lon.begin - width + j);
                                        const int expected = own || want.zero ? 0 : 1;
                                        ASSERT_EQ(covered[static_cast<std::size_t>(i * cols + j)], expected)
                                            << "rank " << r << " cell " << i << "," << j << " width " << width;
                                    }
                                }
                                ++checked;
                            }
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(checked, 1000);
}

TEST(PaddedHaloGeometry, RefusesWidthsBeyondTheGrid) {
    const Decomposition d({5, 8}, {1, 2, 2});
    EXPECT_THROW(validate_padded_halo(d, {.width = -1}), ArgumentError);
    EXPECT_THROW(validate_padded_halo(d, {.width = 6}), ArgumentError);
    EXPECT_THROW(validate_padded_halo(Decomposition({9, 4}, {1, 1, 1}), {.width = 5}), ArgumentError);
    EXPECT_NO_THROW(validate_padded_halo(d, {.width = 5}));
    EXPECT_THROW(validate_padded_halo(Decomposition({5, 7}, {1, 1, 1}), {.width = 1, .pole = PoleRule::across_pole}),
                 ArgumentError);
    try {
        validate_padded_halo(d, {.width = 6});
    } catch (const ArgumentError& e) {
        EXPECT_STREQ(e.what(), "halo width=6 exceeds the grid's nlat=5");
    }
    EXPECT_EQ(parse_pole_rule("across_pole"), PoleRule::across_pole);
    EXPECT_THROW((void)parse_pole_rule("north"), ArgumentError);
}

}  // namespace
}  // namespace gridshard
