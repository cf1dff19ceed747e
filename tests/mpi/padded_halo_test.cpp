// The padded halo exchange at every mesh shape: every cell of every padded shard is checked exactly against the
// labelled global field, for widths 0 up to the grid's size (wider than neighbours' shards: halos from several
// ranks), periodic or open longitude, every pole rule, both split rules (one-row and empty shards under div_up);
// the plan is reusable; arguments that are wrong on one rank raise on every rank.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::label;
using mpitest::labelled_shard;

// The label a padded cell must show (0 where nothing applies), from the definitions of PaddedHaloSpec and PoleRule.
std::int64_t expected_label(const GridShape& g, const PaddedHaloSpec& spec, std::int64_t sample, std::int64_t channel,
                            std::int64_t row, std::int64_t col) {
    if (!spec.periodic_lon && (col < 0 || col >= g.nlon)) {
        return 0;
    }
    col = ((col % g.nlon) + g.nlon) % g.nlon;
    if (row < 0 || row >= g.nlat) {
        if (spec.pole == PoleRule::zero) {
            return 0;
        }
        if (spec.pole == PoleRule::replicate) {
            row = row < 0 ? 0 : g.nlat - 1;
        } else {
            row = row < 0 ? -row - 1 : 2 * g.nlat - row - 1;
            col = (col + g.nlon / 2) % g.nlon;
        }
    }
    return label(sample, channel, row, col);
}

template <class T>
void check_every_cell(const ProcessMesh& mesh) {
    int exchanged = 0;
    for (const SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            const Decomposition d(grid, mesh.shape(), rule);
            const Box box = d.box(mesh.coords());
            for (const PoleRule pole : {PoleRule::zero, PoleRule::replicate, PoleRule::across_pole}) {
                for (const bool periodic : {true, false}) {
                    const int widest = static_cast<int>(std::min(grid.nlat, grid.nlon));
                    for (int width = 0; width <= widest; ++width) {
                        const PaddedHaloSpec spec{width, periodic, pole};
                        SCOPED_TRACE("grid " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) + " " +
                                     std::string(to_string(rule)) + " width " + std::to_string(width) + " pole " +
                                     std::string(to_string(pole)) + " periodic " + std::to_string(periodic));
                        if (pole == PoleRule::across_pole && grid.nlon % 2 != 0) {
                            EXPECT_THROW(PaddedHaloExchange(mesh, d, spec), ArgumentError);
                            continue;
                        }
                        const PaddedHaloExchange plan(mesh, d, spec);
                        const std::int64_t channels = 2;
                        std::vector<T> padded(
                            static_cast<std::size_t>(channels * plan.padded_rows() * plan.padded_cols()), T{-1});
                        for (const std::int64_t sample : {0, 1}) {  // reusable, and every cell rewritten
                            const auto shard = labelled_shard<T>(box, channels, sample);
                            plan.execute<T>(shard, channels, padded);
                            for (std::int64_t c = 0; c < channels; ++c) {
                                for (std::int64_t i = 0; i < plan.padded_rows(); ++i) {
                                    for (std::int64_t j = 0; j < plan.padded_cols(); ++j) {
                                        const T got = padded[static_cast<std::size_t>(
                                            (c * plan.padded_rows() + i) * plan.padded_cols() + j)];
                                        const auto want = static_cast<T>(expected_label(grid, spec, sample, c,
                                                                                        box.lat.begin - width + i,
                                                                                        box.lon.begin - width + j));
                                        ASSERT_EQ(got, want) << "channel " << c << " padded cell " << i << "," << j;
                                    }
                                }
                            }
                        }
                        ++exchanged;
                    }
                }
            }
        }
    }
    EXPECT_GT(exchanged, 0);
}

TEST(PaddedHaloExchange, EveryCellExactFloat) {
    check_every_cell<float>(mpitest::make_mesh());
}
TEST(PaddedHaloExchange, EveryCellExactInt64) {
    check_every_cell<std::int64_t>(mpitest::make_mesh());
}

// The adjoint: <E x, y> = <x, E^T y> summed over the ranks, exactly (int64), for random x and y, every pole rule and
// widths up to the grid's size, both split rules; and the plan's adjoint is reusable.
TEST(PaddedHaloExchange, TheAdjointIsTheTransposeExactly) {
    const ProcessMesh mesh = mpitest::make_mesh();
    int checked = 0;
    for (const SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            const Decomposition d(grid, mesh.shape(), rule);
            for (const PoleRule pole : {PoleRule::zero, PoleRule::replicate, PoleRule::across_pole}) {
                if (pole == PoleRule::across_pole && grid.nlon % 2 != 0) {
                    continue;
                }
                for (const bool periodic : {true, false}) {
                    for (int width = 0; width <= static_cast<int>(std::min(grid.nlat, grid.nlon)); ++width) {
                        const PaddedHaloExchange plan(mesh, d, {width, periodic, pole});
                        const std::int64_t channels = 2;
                        const auto shard_size = static_cast<std::size_t>(channels * plan.box().area());
                        const auto padded_size =
                            static_cast<std::size_t>(channels * plan.padded_rows() * plan.padded_cols());
                        std::mt19937_64 random(static_cast<std::uint64_t>(mesh.world().rank() * 7919 + width));
                        std::uniform_int_distribution<std::int64_t> value(-1000, 1000);
                        std::vector<std::int64_t> x(shard_size);
                        std::vector<std::int64_t> y(padded_size);
                        for (auto& v : x) {
                            v = value(random);
                        }
                        for (auto& v : y) {
                            v = value(random);
                        }
                        std::vector<std::int64_t> ex(padded_size);
                        std::vector<std::int64_t> ety(shard_size);
                        plan.execute<std::int64_t>(x, channels, ex);
                        plan.adjoint<std::int64_t>(y, channels, ety);
                        std::vector<std::int64_t> dots(2, 0);
                        for (std::size_t k = 0; k < padded_size; ++k) {
                            dots[0] += ex[k] * y[k];
                        }
                        for (std::size_t k = 0; k < shard_size; ++k) {
                            dots[1] += x[k] * ety[k];
                        }
                        spatial_reduce_sum<std::int64_t>(mesh, dots);
                        ASSERT_EQ(dots[0], dots[1]) << "grid " << grid.nlat << "x" << grid.nlon << " width " << width
                                                    << " pole " << to_string(pole) << " periodic " << periodic;
                        ++checked;
                    }
                }
            }
        }
    }
    EXPECT_GT(checked, 0);
}

TEST(PaddedHaloExchange, SendsOnlyTheRingNotTheField) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Decomposition d({721, 1440}, mesh.shape());
    const PaddedHaloExchange plan(mesh, d, {.width = 2, .periodic_lon = true, .pole = PoleRule::replicate});
    const Box box = d.box(mesh.coords());
    // At most the ring of width 2 around the box (fewer where the ring is this rank's own or beyond a pole).
    EXPECT_LE(plan.sent_cells_per_channel(), 2 * 2 * (box.lat.size() + box.lon.size() + 4));
}

TEST(PaddedHaloExchange, WrongArgumentsOnOneRankRaiseOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Decomposition d({13, 8}, mesh.shape(), SplitRule::div_up);
    const PaddedHaloExchange plan(mesh, d, {.width = 3});
    const bool bad = mesh.spatial().rank() == mesh.spatial().size() - 1;
    const auto shard = labelled_shard<double>(d.box(mesh.coords()), bad ? 1 : 2);
    std::vector<double> padded(static_cast<std::size_t>(2 * plan.padded_rows() * plan.padded_cols()));
    EXPECT_THROW(plan.execute<double>(shard, 2, padded), ArgumentError);
    // A width beyond the grid, on every rank.
    EXPECT_THROW(PaddedHaloExchange(mesh, d, {.width = 14}), ArgumentError);
    // Plans that differ between ranks.
    if (mesh.spatial().size() > 1) {
        EXPECT_THROW(PaddedHaloExchange(mesh, d, {.width = bad ? 2 : 1}), ArgumentError);
    }
}

}  // namespace
}  // namespace gridshard
