// ACE's smooth flood fill on shards at every mesh shape: bit-identical to one rank's answer for both split rules,
// float and double, fields with land masks, interior regions, NaN across the longitude seam and at the poles, an
// all-NaN channel and a channel without NaN; the same bits for any thread count; against a reference written here
// from the definition (whole fields, ACE's three phases); bad arguments raise on every rank. The spectrum of the
// filled field is the serial one too.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/flood_fill.hpp"
#include "gridshard/metrics/spectrum.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// Channel 0: a "continent" large enough for an interior, a strip across the longitude seam, the first rows (a polar
// cap), scattered points; channel 1: no NaN; channel 2: an infinity beside a NaN; channel 3 (with `all_nan`) NaN
// everywhere.
template <class T>
std::vector<T> masked_field(GridShape g, std::int64_t channels, unsigned seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<T> x(static_cast<std::size_t>(channels * g.nlat * g.nlon));
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < g.nlat; ++i) {
            for (std::int64_t j = 0; j < g.nlon; ++j) {
                double v = 280.0 + 0.5 * static_cast<double>(i) + 10.0 * normal(generator);
                const bool continent =
                    i >= g.nlat / 4 && i < g.nlat / 4 + g.nlat / 2 && j >= g.nlon / 5 && j < g.nlon / 5 + g.nlon / 2;
                const bool seam = (j == 0 || j == g.nlon - 1) && i % 3 == 1;
                const bool cap = i == 0;
                const bool scattered = (i * 7 + j * 3) % 11 == 0;
                if (c == 0 && (continent || seam || cap || scattered)) {
                    v = nan;
                }
                if (c == 2 && i == g.nlat / 2 && j == g.nlon / 2) {
                    v = nan;
                }
                if (c == 2 && i == g.nlat / 2 && j == g.nlon / 2 + 1 && g.nlon > 1) {
                    v = std::numeric_limits<double>::infinity();
                }
                if (c == 3) {
                    v = nan;
                }
                x[static_cast<std::size_t>((c * g.nlat + i) * g.nlon + j)] = static_cast<T>(v);
            }
        }
    }
    return x;
}

// ACE's three phases on a whole field of one channel, written from the definition with explicit padding: the
// reference the library is compared with (to 1e-12; the library's mean is exact).
template <class T>
std::vector<double> reference_fill(const std::vector<T>& field, GridShape g, const FloodFillOptions& o) {
    const std::int64_t h = g.nlat;
    const std::int64_t w = g.nlon;
    const auto at = [w](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>(i * w + j); };
    std::vector<double> x(field.begin(), field.end());
    std::vector<bool> valid0(x.size());
    bool any_nan = false;
    long double sum = 0.0L;
    double count = 0.0;
    for (std::size_t n = 0; n < x.size(); ++n) {
        valid0[n] = !std::isnan(x[n]);
        any_nan = any_nan || !valid0[n];
        if (valid0[n]) {
            sum += static_cast<long double>(x[n]);
            count += 1.0;
        }
    }
    if (!any_nan) {
        return x;
    }
    const double mean = static_cast<double>(sum / static_cast<long double>(count));
    // Sums over the 3x3 neighbours: rows beyond the poles are zero, columns wrap.
    const auto neighbours = [&](const std::vector<double>& v, std::int64_t i, std::int64_t j) {
        double s = 0.0;
        for (std::int64_t di = -1; di <= 1; ++di) {
            for (std::int64_t dj = -1; dj <= 1; ++dj) {
                const std::int64_t r = i + di;
                if (r >= 0 && r < h) {
                    s += v[at(r, ((j + dj) % w + w) % w)];
                } else {
                    s += 0.0;
                }
            }
        }
        return s;
    };
    std::vector<double> reach(x.size());
    for (std::size_t n = 0; n < x.size(); ++n) {
        reach[n] = valid0[n] ? 1.0 : 0.0;
    }
    for (int s = 0; s < o.num_steps; ++s) {
        std::vector<double> next = reach;
        for (std::int64_t i = 0; i < h; ++i) {
            for (std::int64_t j = 0; j < w; ++j) {
                if (reach[at(i, j)] == 0.0 && neighbours(reach, i, j) > 0.0) {
                    next[at(i, j)] = 1.0;
                }
            }
        }
        reach = next;
    }
    std::vector<double> valid(x.size());
    for (std::size_t n = 0; n < x.size(); ++n) {
        if (!valid0[n]) {
            x[n] = reach[n] == 0.0 ? mean : 0.0;
        } else if (std::isinf(x[n])) {
            x[n] = std::copysign(static_cast<double>(std::numeric_limits<T>::max()), x[n]);
        }
        valid[n] = valid0[n] || reach[n] == 0.0 ? 1.0 : 0.0;
    }
    for (int s = 0; s < o.num_steps; ++s) {
        std::vector<double> next_x = x;
        std::vector<double> next_valid = valid;
        for (std::int64_t i = 0; i < h; ++i) {
            for (std::int64_t j = 0; j < w; ++j) {
                const double k = neighbours(valid, i, j);
                if (valid[at(i, j)] == 0.0 && k > 0.0) {
                    next_x[at(i, j)] = neighbours(x, i, j) / k;
                    next_valid[at(i, j)] = 1.0;
                }
            }
        }
        x = next_x;
        valid = next_valid;
    }
    const int half = o.blur_kernel_size / 2;
    std::vector<double> taps;
    double total = 0.0;
    for (int d = -half; d <= half; ++d) {
        taps.push_back(std::exp(-d * d / (2.0 * o.blur_sigma * o.blur_sigma)));
        total += taps.back();
    }
    for (double& t : taps) {
        t /= total;
    }
    const auto blur = [&](const std::vector<double>& v) {
        std::vector<double> by(v.size());
        for (std::int64_t i = 0; i < h; ++i) {
            for (std::int64_t j = 0; j < w; ++j) {
                double s = 0.0;
                for (int d = -half; d <= half; ++d) {
                    s += taps[static_cast<std::size_t>(d + half)] * v[at(std::clamp<std::int64_t>(i + d, 0, h - 1), j)];
                }
                by[at(i, j)] = s;
            }
        }
        std::vector<double> bx(v.size());
        for (std::int64_t i = 0; i < h; ++i) {
            for (std::int64_t j = 0; j < w; ++j) {
                double s = 0.0;
                for (int d = -half; d <= half; ++d) {
                    s += taps[static_cast<std::size_t>(d + half)] * by[at(i, ((j + d) % w + w) % w)];
                }
                bx[at(i, j)] = s;
            }
        }
        return bx;
    };
    std::vector<double> indicator(x.size());
    for (std::size_t n = 0; n < x.size(); ++n) {
        indicator[n] = valid0[n] ? 1.0 : 0.0;
    }
    const std::vector<double> b = blur(indicator);
    const std::vector<double> blurred = blur(x);
    for (std::size_t n = 0; n < x.size(); ++n) {
        x[n] = x[n] * b[n] + blurred[n] * (1.0 - b[n]);
    }
    return x;
}

void expect_same_bits(std::span<const double> got, std::span<const double> want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t n = 0; n < got.size(); ++n) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(got[n]), std::bit_cast<std::uint64_t>(want[n]))
            << what << " value " << n << ": " << got[n] << " vs " << want[n];
    }
}

std::vector<GridShape> fill_grids(const MeshShape& mesh, SplitRule rule) {
    std::vector<GridShape> grids = mpitest::test_grids(mesh, rule);
    grids.push_back({19, 28});  // a continent with an interior beyond 4 steps
    grids.push_back({40, 36});
    return grids;
}

template <class T>
void expect_same_as_serial(const ProcessMesh& mesh) {
    int compared = 0;
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : fill_grids(mesh.shape(), rule)) {
            const ShardedGrid sharded(mesh, grid, rule);
            const ShardedGrid serial(mpitest::serial_mesh(), grid);
            const std::int64_t channels = 4;
            const auto global = masked_field<T>(grid, channels, 5U);
            const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
            for (const FloodFillOptions options :
                 {FloodFillOptions{}, FloodFillOptions{.num_steps = 1, .blur_kernel_size = 3, .blur_sigma = 0.7},
                  FloodFillOptions{.num_steps = 0}}) {
                if (options.blur_kernel_size / 2 > std::min(grid.nlat, grid.nlon)) {
                    EXPECT_THROW((void)smooth_flood_fill(sharded, FieldShard<T>{shard, channels}, options),
                                 ArgumentError);
                    continue;
                }
                const auto expected = smooth_flood_fill(serial, FieldShard<T>{global, channels}, options);
                const auto got = smooth_flood_fill(sharded, FieldShard<T>{shard, channels}, options);
                const std::string where = "grid " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) + " " +
                                          std::string(to_string(rule)) + " steps " + std::to_string(options.num_steps);
                expect_same_bits(got, mpitest::shard_of(expected, grid, sharded.box(), channels), where);
                // A kept plan: the same bits at every call, its halo plans made by the first.
                FloodFillPlan plan(sharded, options);
                for (int call = 0; call < 2; ++call) {
                    expect_same_bits(plan(FieldShard<T>{shard, channels}), got, where + " (kept plan)");
                }
                ++compared;
            }
        }
    }
    EXPECT_GT(compared, 0);
}

TEST(FloodFill, BitIdenticalToSerialFloat) {
    expect_same_as_serial<float>(mpitest::make_mesh());
}
TEST(FloodFill, BitIdenticalToSerialDouble) {
    expect_same_as_serial<double>(mpitest::make_mesh());
}

TEST(FloodFill, IsTheDefinition) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{40, 36};
    const std::int64_t channels = 4;
    const auto global = masked_field<float>(grid, channels, 9U);
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
    for (const FloodFillOptions options : {FloodFillOptions{}, FloodFillOptions{.num_steps = 2, .blur_sigma = 1.5}}) {
        const auto got = smooth_flood_fill(sharded, FieldShard<float>{shard, channels}, options);
        const auto plane = static_cast<std::size_t>(grid.nlat * grid.nlon);
        std::vector<double> expected;
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::vector<float> one(
                global.begin() + static_cast<std::ptrdiff_t>(c) * static_cast<std::ptrdiff_t>(plane),
                global.begin() + static_cast<std::ptrdiff_t>(c + 1) * static_cast<std::ptrdiff_t>(plane));
            const auto filled = reference_fill(one, grid, options);
            expected.insert(expected.end(), filled.begin(), filled.end());
        }
        const auto want = mpitest::shard_of(expected, grid, sharded.box(), channels);
        ASSERT_EQ(got.size(), want.size());
        const std::size_t area = static_cast<std::size_t>(sharded.box().area());
        for (std::size_t n = 0; n < got.size(); ++n) {
            const std::size_t c = area == 0 ? 0 : n / area;
            if (c == 3) {
                EXPECT_TRUE(std::isnan(got[n])) << "an all-NaN channel stays NaN";
                continue;
            }
            if (c == 1) {
                ASSERT_EQ(got[n], want[n]) << "a channel without NaN is returned as it is";
                continue;
            }
            EXPECT_TRUE(std::isfinite(got[n])) << n;
            EXPECT_NEAR(got[n], want[n], 1e-12 * std::max(1.0, std::abs(want[n]))) << "value " << n;
        }
    }
}

TEST(FloodFill, BitIdenticalForAnyThreadCount) {
#if defined(_OPENMP)
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{40, 36};
    const auto global = masked_field<double>(grid, 4, 3U);
    const ShardedGrid sharded(mesh, grid);
    const auto shard = mpitest::shard_of(global, grid, sharded.box(), 4);
    const int before = omp_get_max_threads();
    const std::int64_t fewest_before = min_points_per_thread();
    set_min_points_per_thread(1);
    std::vector<std::vector<double>> results;
    for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        results.push_back(smooth_flood_fill(sharded, FieldShard<double>{shard, 4}));
        results.push_back(spherical_power_spectrum(sharded, FieldShard<double>{results.back(), 4}));
    }
    omp_set_num_threads(before);
    set_min_points_per_thread(fewest_before);
    for (std::size_t k = 2; k < results.size(); ++k) {
        expect_same_bits(results[k], results[k % 2], "threads");
    }
#else
    GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(FloodFill, TheFilledSpectrumIsTheSerialOne) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{40, 36};
    const auto global = masked_field<float>(grid, 3, 21U);
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const ShardedGrid serial(mpitest::serial_mesh(), grid);
    const auto shard = mpitest::shard_of(global, grid, sharded.box(), 3);
    const auto filled = smooth_flood_fill(sharded, FieldShard<float>{shard, 3});
    const auto filled_serial = smooth_flood_fill(serial, FieldShard<float>{global, 3});
    const auto spectrum = spherical_power_spectrum(sharded, FieldShard<double>{filled, 3});
    expect_same_bits(spectrum, spherical_power_spectrum(serial, FieldShard<double>{filled_serial, 3}), "spectrum");
    for (const double p : spectrum) {
        EXPECT_TRUE(std::isfinite(p));
    }
}

TEST(FloodFill, BadArgumentsRaiseOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{13, 16};
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const auto shard = mpitest::labelled_shard<float>(sharded.box(), 2);
    const FieldShard<float> field{shard, 2};
    EXPECT_THROW((void)smooth_flood_fill(sharded, field, {.num_steps = -1}), ArgumentError);
    EXPECT_THROW((void)smooth_flood_fill(sharded, field, {.blur_kernel_size = 4}), ArgumentError);
    EXPECT_THROW((void)smooth_flood_fill(sharded, field, {.blur_sigma = 0.0}), ArgumentError);
    EXPECT_THROW((void)smooth_flood_fill(sharded, field, {.blur_kernel_size = 29}), ArgumentError);
    try {
        (void)smooth_flood_fill(sharded, field, {.num_steps = -1});
    } catch (const ArgumentError& e) {
        EXPECT_STREQ(e.what(), "num_steps=-1 must be >= 0");
    }
    FloodFillPlan plan(sharded, {.blur_kernel_size = 4});  // kept, and raised by each call on every rank
    for (int call = 0; call < 2; ++call) {
        EXPECT_THROW((void)plan(field), ArgumentError);
    }
    if (mesh.spatial().size() > 1) {  // a shard of the wrong size on one rank only
        const bool bad = mesh.spatial().rank() == mesh.spatial().size() - 1;
        const auto other = mpitest::labelled_shard<float>(sharded.box(), bad ? 1 : 2);
        EXPECT_THROW((void)smooth_flood_fill(sharded, FieldShard<float>{other, 2}), ArgumentError);
    }
}

}  // namespace
}  // namespace gridshard
