// Halo exchange at every mesh shape: every halo value is checked exactly against the labelled global
// field, for widths 1 and 2, open and periodic longitude (and periodic latitude), both split rules,
// one-cell shards and sizes that do not divide; plans that cannot work raise on every rank.

#include <gtest/gtest.h>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::label;
using mpitest::labelled_shard;

// Checks every element of every strip, and that exactly the sides with a neighbour have one.
template <class T>
void expect_halos(const HaloBuffers<T>& halo, const Decomposition& d, const MeshCoords& coords, int width,
                  const Periodicity& periodicity, std::int64_t channels, std::int64_t sample) {
    const Box box = d.box(coords);
    const GridShape grid = d.grid();
    for (Side side : all_sides) {
        const bool expected = neighbour_coords(d.mesh(), coords, side, periodicity).has_value();
        ASSERT_EQ(halo.has(side), expected) << to_string(side);
        if (!expected) {
            EXPECT_TRUE(halo.strip(side).empty());
            continue;
        }
        const bool along_lat = side == Side::lat_prev || side == Side::lat_next;
        ASSERT_EQ(halo.rows(side), along_lat ? width : box.lat.size());
        ASSERT_EQ(halo.cols(side), along_lat ? box.lon.size() : width);
        // Global index of strip row r / col k, wrapped for periodic axes.
        const std::int64_t row0 = side == Side::lat_prev   ? box.lat.begin - width
                                  : side == Side::lat_next ? box.lat.end
                                                           : box.lat.begin;
        const std::int64_t col0 = side == Side::lon_prev   ? box.lon.begin - width
                                  : side == Side::lon_next ? box.lon.end
                                                           : box.lon.begin;
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t r = 0; r < halo.rows(side); ++r) {
                for (std::int64_t k = 0; k < halo.cols(side); ++k) {
                    const std::int64_t i = ((row0 + r) % grid.nlat + grid.nlat) % grid.nlat;
                    const std::int64_t j = ((col0 + k) % grid.nlon + grid.nlon) % grid.nlon;
                    ASSERT_EQ(halo.at(side, c, r, k), static_cast<T>(label(sample, c, i, j)))
                        << to_string(side) << " channel " << c << " row " << r << " col " << k;
                }
            }
        }
    }
}

template <class T>
void check_exchange(const ProcessMesh& mesh) {
    const Periodicity periodicities[] = {{}, {.lat = false, .lon = true}, {.lat = true, .lon = true}};
    int exchanged = 0;
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            for (const Periodicity& periodicity : periodicities) {
                for (int width : {1, 2}) {
                    SCOPED_TRACE("grid " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) + " split " +
                                 std::string(to_string(rule)) + " width " + std::to_string(width) + " periodic " +
                                 std::to_string(periodicity.lat) + std::to_string(periodicity.lon));
                    const Decomposition d(grid, mesh.shape(), rule);
                    bool valid = true;
                    try {
                        validate_halo(d, width, periodicity);
                    } catch (const ArgumentError&) {
                        valid = false;
                    }
                    if (!valid) {
                        // Empty or too-thin shards: refused on every rank, before any message.
                        EXPECT_THROW(HaloExchange(mesh, d, width, periodicity), ArgumentError);
                        continue;
                    }
                    const HaloExchange plan(mesh, d, width, periodicity);
                    const std::int64_t channels = 3;
                    auto halo = plan.make_buffers<T>(channels);
                    // The plan and buffers are reusable: a second field with other labels.
                    for (std::int64_t sample : {0, 1}) {
                        const auto shard = labelled_shard<T>(d.box(mesh.coords()), channels, sample);
                        plan.execute<T>(shard, halo);
                        expect_halos(halo, d, mesh.coords(), width, periodicity, channels, sample);
                    }
                    ++exchanged;
                }
            }
        }
    }
    EXPECT_GT(exchanged, 0);
}

TEST(HaloExchange, EveryHaloValueExactFloat) {
    check_exchange<float>(mpitest::make_mesh());
}
TEST(HaloExchange, EveryHaloValueExactDouble) {
    check_exchange<double>(mpitest::make_mesh());
}
TEST(HaloExchange, EveryHaloValueExactInt64) {
    check_exchange<std::int64_t>(mpitest::make_mesh());
}

TEST(HaloExchange, QuarterDegreeStripsAreThePerimeter) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Decomposition d({721, 1440}, mesh.shape());
    const HaloExchange plan(mesh, d, 1, {.lat = false, .lon = true});
    const auto halo = plan.make_buffers<float>(2);
    const Box box = d.box(mesh.coords());
    std::int64_t cells = 0;
    for (Side side : all_sides) {
        cells += halo.has(side) ? static_cast<std::int64_t>(halo.strip(side).size()) : 0;
    }
    EXPECT_LE(cells, 2 * 2 * (box.lat.size() + box.lon.size()));
}

TEST(HaloExchange, WrongShardOnOneRankRaisesOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Decomposition d({13, 7}, mesh.shape(), SplitRule::div_up);
    if (d.has_empty_box()) {
        GTEST_SKIP() << "13x7 leaves shards empty on this mesh";
    }
    const HaloExchange plan(mesh, d, 1, {.lat = false, .lon = true});
    auto halo = plan.make_buffers<float>(2);
    const bool bad = mesh.spatial().rank() == mesh.spatial().size() - 1;
    const auto shard = labelled_shard<float>(d.box(mesh.coords()), bad ? 1 : 2);
    EXPECT_THROW(plan.execute<float>(shard, halo), ArgumentError);
    // Buffers for a different channel count on one rank.
    auto other = plan.make_buffers<float>(bad ? 1 : 2);
    const auto fitting = labelled_shard<float>(d.box(mesh.coords()), bad ? 1 : 2);
    if (mesh.spatial().size() > 1) {
        EXPECT_THROW(plan.execute<float>(fitting, other), ArgumentError);
    }
}

TEST(HaloExchange, PlansThatDifferBetweenRanksRaiseOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    if (mesh.spatial().size() < 2) {
        GTEST_SKIP() << "needs two spatial ranks";
    }
    const Decomposition d({13, 11}, mesh.shape(), SplitRule::div_up);
    if (d.has_empty_box()) {
        GTEST_SKIP() << "13x11 leaves shards empty on this mesh";
    }
    const int width = mesh.spatial().rank() == 0 ? 1 : 2;
    EXPECT_THROW(HaloExchange(mesh, d, width), ArgumentError);
}

}  // namespace
}  // namespace gridshard
