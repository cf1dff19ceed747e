// Reductions, broadcasts, gathers and scatters at every mesh shape, under both split rules, on grids
// with one-cell shards, sizes that do not divide, and (div_up) empty shards. Values are integer
// labels of global indices, so every gathered value is checked exactly.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::label;
using mpitest::labelled_shard;

template <class T>
std::vector<T> labelled_global(const GridShape& grid, std::int64_t channels, std::int64_t first_sample = 0,
                               std::int64_t samples = 1) {
    return labelled_shard<T>(Box{{0, grid.nlat}, {0, grid.nlon}}, channels, first_sample, samples);
}

std::string describe(const GridShape& grid, SplitRule rule, std::int64_t channels) {
    return "grid " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) + " split " +
           std::string(to_string(rule)) + " channels " + std::to_string(channels);
}

template <class T>
void check_gather_spatial(const ProcessMesh& mesh) {
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            for (std::int64_t channels : {1, 3}) {
                SCOPED_TRACE(describe(grid, rule, channels));
                const Decomposition d(grid, mesh.shape(), rule);
                const std::vector<T> shard = labelled_shard<T>(d.box(mesh.coords()), channels);
                const std::vector<T> global = gather_spatial<T>(mesh, d, shard, channels);
                EXPECT_EQ(global, labelled_global<T>(grid, channels));
            }
        }
    }
}

TEST(GatherSpatial, EveryValueExactFloat) {
    check_gather_spatial<float>(mpitest::make_mesh());
}
TEST(GatherSpatial, EveryValueExactDouble) {
    check_gather_spatial<double>(mpitest::make_mesh());
}
TEST(GatherSpatial, EveryValueExactInt64) {
    check_gather_spatial<std::int64_t>(mpitest::make_mesh());
}
TEST(GatherSpatial, EveryValueExactInt32) {
    check_gather_spatial<std::int32_t>(mpitest::make_mesh());
}

TEST(GatherSpatial, WrongShardOnOneRankRaisesOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Decomposition d({13, 7}, mesh.shape(), SplitRule::div_up);
    std::vector<float> shard = labelled_shard<float>(d.box(mesh.coords()), 2);
    if (mesh.world().rank() == mesh.world().size() - 1) {
        shard.push_back(0.0F);
    }
    try {
        (void)gather_spatial<float>(mesh, d, shard, 2);
        // Ranks in other spatial groups than the last rank's have correct shards and finish.
        EXPECT_NE(mesh.coords().data, mesh.shape().data - 1);
    } catch (const ArgumentError& error) {
        EXPECT_EQ(mesh.coords().data, mesh.shape().data - 1);
        EXPECT_NE(std::string(error.what()).find("shard has"), std::string::npos) << error.what();
    }
    // Channels that differ between ranks.
    const std::int64_t channels = mesh.spatial().rank() == 0 ? 1 : 2;
    const std::vector<float> sized = labelled_shard<float>(d.box(mesh.coords()), channels);
    if (mesh.spatial().size() > 1) {
        EXPECT_THROW((void)gather_spatial<float>(mesh, d, sized, channels), ArgumentError);
    }
    // A decomposition over another mesh shape.
    const Decomposition other({13, 7}, {mesh.shape().data, 1, mesh.shape().spatial_size() + 1}, SplitRule::div_up);
    EXPECT_THROW((void)gather_spatial<float>(mesh, other, shard, 2), ArgumentError);
}

TEST(GatherGlobal, SamplesChannelsAndBoxesLandInPlace) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const MeshCoords c = mesh.coords();
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            for (bool uneven : {false, true}) {
                SCOPED_TRACE(describe(grid, rule, 2) + (uneven ? " uneven samples" : " equal samples"));
                const Decomposition d(grid, mesh.shape(), rule);
                // Equal blocks of 2, or data rank d holding d+1 samples (possibly none would also work).
                const std::int64_t local = uneven ? c.data + 1 : 2;
                const std::int64_t first = uneven ? c.data * (c.data + 1) / 2 : 2 * c.data;
                const std::int64_t total =
                    uneven ? mesh.shape().data * (mesh.shape().data + 1) / 2 : 2 * mesh.shape().data;
                const auto shard = labelled_shard<std::int64_t>(d.box(c), 2, first, local);
                const auto global = gather_global<std::int64_t>(mesh, d, shard, local, 2);
                if (mesh.world().rank() == 0) {
                    EXPECT_EQ(global, labelled_global<std::int64_t>(grid, 2, 0, total));
                } else {
                    EXPECT_TRUE(global.empty());
                }
            }
        }
    }
}

TEST(GatherGlobal, SpatialRanksMustAgreeOnSampleCount) {
    const ProcessMesh mesh = mpitest::make_mesh();
    if (mesh.spatial().size() < 2) {
        GTEST_SKIP() << "needs two spatial ranks";
    }
    const Decomposition d({13, 7}, mesh.shape(), SplitRule::div_up);
    const std::int64_t local = mesh.spatial().rank() == 0 ? 1 : 2;
    const auto shard = labelled_shard<float>(d.box(mesh.coords()), 1, 0, local);
    EXPECT_THROW((void)gather_global<float>(mesh, d, shard, local, 1), ArgumentError);
}

TEST(Scatter, SliceAndRootScatterGiveTheShard) {
    const ProcessMesh mesh = mpitest::make_mesh();
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            SCOPED_TRACE(describe(grid, rule, 3));
            const Decomposition d(grid, mesh.shape(), rule);
            const auto global = labelled_global<double>(grid, 3);
            const auto expected = labelled_shard<double>(d.box(mesh.coords()), 3);
            EXPECT_EQ(scatter_spatial<double>(d, mesh.coords(), global, 3), expected);
            const bool root = mesh.spatial().rank() == 0;
            const std::span<const double> source = root ? std::span<const double>(global) : std::span<const double>();
            EXPECT_EQ(scatter_spatial_from_root<double>(mesh, d, source, 3), expected);
        }
    }
    const Decomposition d({13, 7}, mesh.shape(), SplitRule::div_up);
    const std::vector<double> short_global(10);
    EXPECT_THROW((void)scatter_spatial<double>(d, mesh.coords(), short_global, 1), ArgumentError);
    const bool root = mesh.spatial().rank() == 0;
    EXPECT_THROW((void)scatter_spatial_from_root<double>(
                     mesh, d, root ? std::span<const double>(short_global) : std::span<const double>(), 1),
                 ArgumentError);
}

TEST(Reductions, OverTheDataGroup) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const MeshCoords c = mesh.coords();
    const int n = mesh.shape().data;
    const std::int64_t spatial_id = mesh.spatial().rank();
    // Value k on data rank d: 1000*spatial + 10*d + k.
    auto local = [&](std::int64_t k) { return 1000 * spatial_id + 10 * c.data + k; };
    std::vector<std::int64_t> sums{local(0), local(1), local(2)};
    reduce_sum<std::int64_t>(mesh, sums);
    for (std::int64_t k = 0; k < 3; ++k) {
        EXPECT_EQ(sums[static_cast<std::size_t>(k)], n * (1000 * spatial_id + k) + 10 * n * (n - 1) / 2);
    }
    std::vector<double> means{static_cast<double>(local(0)), static_cast<double>(local(1))};
    reduce_mean<double>(mesh, means);
    EXPECT_DOUBLE_EQ(means[1], 1000.0 * static_cast<double>(spatial_id) + 1 + 10.0 * (n - 1) / 2);
    std::vector<std::int32_t> mins{static_cast<std::int32_t>(local(5))};
    std::vector<std::int32_t> maxs{static_cast<std::int32_t>(local(5))};
    reduce_min<std::int32_t>(mesh, mins);
    reduce_max<std::int32_t>(mesh, maxs);
    EXPECT_EQ(mins[0], 1000 * spatial_id + 5);
    EXPECT_EQ(maxs[0], 1000 * spatial_id + 10 * (n - 1) + 5);
}

// Every data rank builds the same table of values (element k, data rank r) from one seed: magnitudes from 2^-1074
// to 2^1000 (elements within the grid's span and far beyond it, the gathered path), cancellation, subnormals and the
// specials; each rank reduces its own column. The reference is every rank's values added to an ExactSum in rank
// order: the sum rounded once, which the grid's digits must give too.
TEST(Reductions, ExactSumIsTheSumRoundedOnce) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const int ranks = mesh.shape().data;
    const int d = mesh.coords().data;
    constexpr std::size_t elements = 64;
    std::vector<double> table(elements * static_cast<std::size_t>(ranks));
    std::uint64_t state = 12345;
    const auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return state >> 11;
    };
    for (std::size_t k = 0; k < elements; ++k) {
        const int spread = k % 4 == 0 ? 2000 : (k % 4 == 1 ? 80 : 8);  // beyond the grid, within it, narrow
        for (int r = 0; r < ranks; ++r) {
            const double mantissa = static_cast<double>(next() % (1ULL << 53)) * (next() % 2 ? 1 : -1);
            const int exponent = static_cast<int>(next() % static_cast<std::uint64_t>(spread)) - spread / 2 - 53;
            table[k * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(r)] =
                std::ldexp(mantissa, std::clamp(exponent, -1074, 960));
        }
    }
    const double inf = std::numeric_limits<double>::infinity();
    const auto at = [&](std::size_t k, int r) -> double& {
        return table[k * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(r)];
    };
    at(60, 0) = 1e300, at(60, ranks - 1) += -1e300;        // cancellation (or a lone 1e300)
    at(61, 0) = std::numeric_limits<double>::quiet_NaN();  // NaN
    at(62, ranks - 1) = -inf;                              // one infinity
    for (int r = 0; r < ranks; ++r) {
        at(63, r) = -0.0;  // every value -0: -0
    }
    std::vector<double> mine(elements);
    for (std::size_t k = 0; k < elements; ++k) {
        mine[k] = at(k, d);
    }
    reduce_sum_exact<double>(mesh, mine);
    EXPECT_TRUE(mine[63] == 0 && std::signbit(mine[63])) << "every value -0 sums to -0, as IEEE addition";
    for (std::size_t k = 0; k < elements - 1; ++k) {  // ExactSum keeps no sign of zero: element 63 above
        ExactSum sum;
        for (int r = 0; r < ranks; ++r) {
            sum.add(at(k, r));
        }
        const double want = sum.to_double();
        EXPECT_TRUE((std::isnan(want) && std::isnan(mine[k])) ||
                    std::bit_cast<std::uint64_t>(want) == std::bit_cast<std::uint64_t>(mine[k]))
            << "element " << k << ": " << mine[k] << " against " << want;
    }
    std::vector<float> midpoint{d == 0 ? 1.0F : (d == 1 ? 0x1p-24F : 0x1p-80F)};  // 1 + 2^-24 lies between floats
    reduce_sum_exact<float>(mesh, midpoint);
    EXPECT_EQ(midpoint[0], ranks == 1 ? 1.0F : (ranks == 2 ? 1.0F : 1.0F + 0x1p-23F));  // ties to even, or above
}

TEST(Reductions, WeightedMeanBySampleCount) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const int d = mesh.coords().data;
    const int n = mesh.shape().data;
    // Data rank d holds d+1 samples whose values are the first d+1 integers after d(d+1)/2: its mean
    // is (first + last)/2, and the weighted mean over all ranks is the mean of 0..total-1.
    const double first = d * (d + 1) / 2.0;
    std::vector<double> value{first + d / 2.0};
    reduce_weighted_mean<double>(mesh, value, d + 1);
    const double total = n * (n + 1) / 2.0;
    EXPECT_DOUBLE_EQ(value[0], (total - 1) / 2.0);
    std::vector<float> bad{1.0F};
    EXPECT_THROW(reduce_weighted_mean<float>(mesh, bad, d == n - 1 ? -1.0 : 1.0), ArgumentError);
    EXPECT_THROW(reduce_weighted_mean<float>(mesh, bad, 0.0), ArgumentError);
}

TEST(Reductions, SpatialSumAndBroadcast) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const std::int64_t s = mesh.spatial().rank();
    const std::int64_t p = mesh.spatial().size();
    std::vector<std::int64_t> values{s, 2 * s + mesh.coords().data};
    spatial_reduce_sum<std::int64_t>(mesh, values);
    EXPECT_EQ(values[0], p * (p - 1) / 2);
    EXPECT_EQ(values[1], p * (p - 1) + p * mesh.coords().data);
    std::vector<float> broadcast{static_cast<float>(100 * mesh.coords().data + s), 7.0F};
    broadcast_spatial<float>(mesh, broadcast);
    EXPECT_EQ(broadcast[0], static_cast<float>(100 * mesh.coords().data));
}

TEST(Reductions, LengthsThatDifferRaiseOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    if (mesh.world().size() < 2) {
        GTEST_SKIP() << "needs two ranks";
    }
    // Only world rank 0 passes a different length: exactly the groups that contain it raise, on all members.
    std::vector<double> values(mesh.world().rank() == 0 ? 2 : 3, 1.0);
    if (mesh.data().size() > 1) {
        if (mesh.spatial().rank() == 0) {
            EXPECT_THROW(reduce_sum<double>(mesh, values), ArgumentError);
        } else {
            EXPECT_NO_THROW(reduce_sum<double>(mesh, values));
        }
    }
    if (mesh.spatial().size() > 1) {
        if (mesh.coords().data == 0) {
            EXPECT_THROW(spatial_reduce_sum<double>(mesh, values), ArgumentError);
            EXPECT_THROW(broadcast_spatial<double>(mesh, values), ArgumentError);
        } else {
            EXPECT_NO_THROW(spatial_reduce_sum<double>(mesh, values));
        }
    }
}

}  // namespace
}  // namespace gridshard
