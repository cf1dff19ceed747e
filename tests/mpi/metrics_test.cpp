// Every metric on shards against (a) the same metric computed by one process on the whole field, bit for
// bit, and (b) a plain-loop double-precision reference written here, to 1e-12 relative. Fields carry a
// ~30% NaN land mask, an all-NaN row and zero-weight polar rows; grids include one-cell shards, sizes
// that do not divide, nlat or nlon of 2, and (div_up) empty shards.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <optional>
#include <type_traits>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/time_mean.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::shard_of;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// A deterministic pseudo-random value in [0, 1) from integer coordinates.
double hash01(std::int64_t a, std::int64_t b, std::int64_t c) {
    std::uint64_t h = static_cast<std::uint64_t>(a) * 0x9E3779B97F4A7C15ULL ^
                      static_cast<std::uint64_t>(b) * 0xC2B2AE3D27D4EB4FULL ^
                      static_cast<std::uint64_t>(c) * 0x165667B19E3779F9ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return static_cast<double>(h >> 11) * 0x1p-53;
}

// A global test case: truth and prediction (channels, nlat, nlon), latitudes, cos-lat weights.
struct Case {
    GridShape grid;
    std::int64_t channels = 0;
    std::vector<float> truth;
    std::vector<float> prediction;
    std::vector<double> lat_deg;
    std::vector<double> weights;  // per row, normalised
    std::vector<double> region;   // per point, 0/1

    [[nodiscard]] std::int64_t index(std::int64_t c, std::int64_t i, std::int64_t j) const {
        return (c * grid.nlat + i) * grid.nlon + j;
    }
};

// Channel 0 smooth, channel 1 with a ~30% NaN land mask and an all-NaN row (in the truth), channels
// beyond mixtures. Latitudes run pole to pole, so the first and last rows have zero weight.
Case make_case(GridShape grid, std::int64_t channels) {
    Case k{grid, channels, {}, {}, {}, {}, {}};
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        // Pole to pole (zero-weight first and last rows) when there are rows enough, else cell centres.
        const auto n = static_cast<double>(grid.nlat);
        k.lat_deg.push_back(grid.nlat > 3 ? -90.0 + 180.0 * static_cast<double>(i) / (n - 1)
                                          : -90.0 + 180.0 * (static_cast<double>(i) + 0.5) / n);
    }
    k.weights = cos_lat_weights(k.lat_deg, grid.nlon, {0, grid.nlat}).values;
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < grid.nlat; ++i) {
            for (std::int64_t j = 0; j < grid.nlon; ++j) {
                const double phase =
                    0.7 * static_cast<double>(i) + 0.45 * static_cast<double>(j) + static_cast<double>(c);
                const double t = 250.0 + 30.0 * std::sin(phase) + 5.0 * hash01(c, i, j);
                const double p = t + 2.0 * (hash01(c + 7, i, j) - 0.4);
                const bool land = c % 2 == 1 && hash01(c, i, j + 1000) < 0.3;
                const bool nan_row = c % 2 == 1 && grid.nlat > 3 && i == 1;
                k.truth.push_back(land || nan_row ? std::nanf("") : static_cast<float>(t));
                k.prediction.push_back(land ? std::nanf("") : static_cast<float>(p));
            }
        }
    }
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            k.region.push_back(hash01(i, j, 99) < 0.5 ? 1.0 : 0.0);
        }
    }
    return k;
}

// ---- plain-loop references, double precision, straight from docs/design.md §3 ----

double ref_weighted_mean(const Case& k, const std::vector<float>& x, std::int64_t c,
                         const std::vector<double>* region = nullptr) {
    double s = 0.0;
    double w = 0.0;
    for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
        for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
            const double a = k.weights[static_cast<std::size_t>(i)] *
                             (region ? (*region)[static_cast<std::size_t>(i * k.grid.nlon + j)] : 1.0);
            w += a;
            if (a != 0.0) {
                s += a * x[static_cast<std::size_t>(k.index(c, i, j))];
            }
        }
    }
    return s / w;
}

double ref_nanmean(const Case& k, const std::vector<double>& x, std::int64_t c) {
    double s = 0.0;
    double w = 0.0;
    for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
        for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
            const double v = x[static_cast<std::size_t>(k.index(c, i, j))];
            const double a = k.weights[static_cast<std::size_t>(i)];
            if (!std::isnan(v) && a != 0.0) {
                s += a * v;
                w += a;
            }
        }
    }
    return w > 0 ? s / w : nan;
}

// numpy.gradient semantics on the global field, in float arithmetic as the library computes the magnitudes
// of a float field (differences, halves, squares and the square root in float; docs/design.md §3).
std::vector<double> ref_gradient_magnitude(const Case& k, const std::vector<float>& x, bool periodic_lon) {
    const auto nlat = k.grid.nlat;
    const auto nlon = k.grid.nlon;
    std::vector<double> out(x.size());
    for (std::int64_t c = 0; c < k.channels; ++c) {
        auto at = [&](std::int64_t i, std::int64_t j) { return x[static_cast<std::size_t>(k.index(c, i, j))]; };
        for (std::int64_t i = 0; i < nlat; ++i) {
            for (std::int64_t j = 0; j < nlon; ++j) {
                const float gy = i == 0          ? at(1, j) - at(0, j)
                                 : i == nlat - 1 ? at(i, j) - at(i - 1, j)
                                                 : (at(i + 1, j) - at(i - 1, j)) * 0.5F;
                float gx = 0.0F;
                if (periodic_lon) {
                    gx = (at(i, (j + 1) % nlon) - at(i, (j + nlon - 1) % nlon)) * 0.5F;
                } else {
                    gx = j == 0          ? at(i, 1) - at(i, 0)
                         : j == nlon - 1 ? at(i, j) - at(i, j - 1)
                                         : (at(i, j + 1) - at(i, j - 1)) * 0.5F;
                }
                const float gy2 = gy * gy;
                const float gx2 = gx * gx;
                out[static_cast<std::size_t>(k.index(c, i, j))] = std::sqrt(gy2 + gx2);
            }
        }
    }
    return out;
}

// The weighted means of two gradient magnitude fields over the points of non-zero weight where neither is
// NaN (`common`, the pair rule of the Evaluator's grad_mag_percent_diff) or where each field's own is not
// (`own`, ACE's rule and the library's gradient_magnitude_percent_diff), and their percent difference.
double ref_gradient_percent_diff(const Case& k, const std::vector<double>& gt, const std::vector<double>& gp,
                                 std::int64_t c, GradientPoints points = GradientPoints::common) {
    double wt = 0.0, wp = 0.0, st = 0.0, sp = 0.0;
    for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
        for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
            const auto n = static_cast<std::size_t>(k.index(c, i, j));
            const double a = k.weights[static_cast<std::size_t>(i)];
            const bool both = !std::isnan(gt[n]) && !std::isnan(gp[n]);
            const bool own = points == GradientPoints::own;
            if (a != 0.0 && (own ? !std::isnan(gt[n]) : both)) {
                wt += a;
                st += a * gt[n];
            }
            if (a != 0.0 && (own ? !std::isnan(gp[n]) : both)) {
                wp += a;
                sp += a * gp[n];
            }
        }
    }
    return 100.0 * (sp / wp - st / wt) / (st / wt);
}

void expect_close(double got, double expected, const std::string& what) {
    if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", expected NaN";
        return;
    }
    EXPECT_NEAR(got, expected, 1e-12 * std::max(1.0, std::abs(expected))) << what;
}

// Bit-identical, NaN matching NaN.
void expect_identical(const std::vector<double>& got, const std::vector<double>& expected, const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (std::size_t k = 0; k < got.size(); ++k) {
        if (std::isnan(expected[k])) {
            EXPECT_TRUE(std::isnan(got[k])) << what << "[" << k << "]";
        } else {
            EXPECT_EQ(std::memcmp(&got[k], &expected[k], sizeof(double)), 0)
                << what << "[" << k << "]: " << got[k] << " vs " << expected[k];
        }
    }
}

// Runs `metric` on this rank's shards and on the whole field in this process alone; returns both.
struct Both {
    std::vector<double> distributed;
    std::vector<double> serial;
};

using Metric = std::function<std::vector<double>(const ShardedGrid&, const Case&, const Box&)>;

Both run_both(const ProcessMesh& mesh, const ProcessMesh& alone, const Case& k, SplitRule rule, const Metric& metric) {
    const ShardedGrid distributed(mesh, k.grid, rule);
    const ShardedGrid serial(alone, k.grid, rule);
    return {metric(distributed, k, distributed.box()), metric(serial, k, serial.box())};
}

std::vector<GridShape> metric_grids(const MeshShape& mesh, SplitRule rule) {
    std::vector<GridShape> grids = mpitest::test_grids(mesh, rule);
    grids.push_back({std::max<std::int64_t>(mesh.lat, 2) * 2 + 3, 2});  // nlon of 2
    grids.push_back({2, std::max<std::int64_t>(mesh.lon, 2) + 5});      // nlat of 2
    grids.push_back({29, 41});
    std::erase_if(grids, [&](const GridShape& g) {
        return g.nlat < 2 || g.nlon < 2 || (rule == SplitRule::balanced && (g.nlat < mesh.lat || g.nlon < mesh.lon));
    });
    return grids;
}

class Metrics : public ::testing::Test {
  protected:
    ProcessMesh mesh = mpitest::make_mesh();
    ProcessMesh alone{Communicator::borrow(MPI_COMM_SELF), {1, 1, 1}};

    // For every grid and split rule: distributed == serial bit for bit, and serial == reference.
    void check(
        const std::string& name, std::int64_t channels, bool needs_halo, const Metric& metric,
        const std::function<std::vector<double>(const Case&, const std::vector<double>& serial_result)>& reference) {
        int cases = 0;
        for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
            for (const GridShape& grid : metric_grids(mesh.shape(), rule)) {
                const std::string what = name + " grid " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) +
                                         " " + std::string(to_string(rule));
                if (needs_halo && Decomposition(grid, mesh.shape(), rule).has_empty_box()) {
                    EXPECT_THROW((void)run_both(mesh, alone, make_case(grid, channels), rule, metric), ArgumentError)
                        << what;
                    continue;
                }
                const Case k = make_case(grid, channels);
                const Both both = run_both(mesh, alone, k, rule, metric);
                expect_identical(both.distributed, both.serial, what + " distributed vs serial");
                const std::vector<double> expected = reference(k, both.serial);
                ASSERT_EQ(expected.size(), both.serial.size()) << what;
                for (std::size_t c = 0; c < expected.size(); ++c) {
                    expect_close(both.serial[c], expected[c], what + " [" + std::to_string(c) + "] vs reference");
                }
                ++cases;
            }
        }
        EXPECT_GT(cases, 0);
    }
};

// Every score of `s`, one after another, to compare two Scores bit for bit.
std::vector<double> all_scores(const Scores& s) {
    std::vector<double> all;
    for (std::size_t n = 0; n < s.names().size(); ++n) {
        all.insert(all.end(), s.at(n).begin(), s.at(n).end());
    }
    return all;
}

Weights row_weights(const Case& k, const Box& box, std::vector<double>& storage) {
    storage.assign(k.weights.begin() + box.lat.begin, k.weights.begin() + box.lat.end);
    return {storage, false};
}

TEST_F(Metrics, WeightedSumAndMean) {
    check(
        "weighted_sum", 3, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.truth, k.grid, box, k.channels);
            return weighted_sum<float>(g, {x, k.channels}, row_weights(k, box, w));
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                out.push_back(ref_weighted_mean(k, k.truth, c));  // sum(a) == 1
            }
            return out;
        });
    check(
        "weighted_mean", 3, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.prediction, k.grid, box, k.channels);
            return weighted_mean<float>(g, {x, k.channels}, row_weights(k, box, w));
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                out.push_back(ref_weighted_mean(k, k.prediction, c));
            }
            return out;
        });
}

TEST_F(Metrics, NanMeanStdAndRegional) {
    check(
        "weighted_nanmean", 4, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.truth, k.grid, box, k.channels);
            return weighted_nanmean<float>(g, {x, k.channels}, row_weights(k, box, w));
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            const std::vector<double> x(k.truth.begin(), k.truth.end());
            for (std::int64_t c = 0; c < k.channels; ++c) {
                out.push_back(ref_nanmean(k, x, c));
            }
            return out;
        });
    check(
        "weighted_std", 2, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.prediction, k.grid, box, k.channels);
            return weighted_std<float>(g, {x, k.channels}, row_weights(k, box, w));
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                const double mean = ref_weighted_mean(k, k.prediction, c);
                std::vector<float> squared;
                double s = 0.0;
                double w = 0.0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        const double d = k.prediction[static_cast<std::size_t>(k.index(c, i, j))] - mean;
                        w += a;
                        s += a == 0 ? 0.0 : a * d * d;
                    }
                }
                out.push_back(std::sqrt(s / w));
            }
            return out;
        });
    check(
        "regional_weighted_mean", 1, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.truth, k.grid, box, k.channels);
            const auto region = shard_of(k.region, k.grid, box, 1);
            return regional_weighted_mean<float>(g, {x, k.channels}, row_weights(k, box, w), region);
        },
        [](const Case& k, const std::vector<double>&) {
            return std::vector<double>{ref_weighted_mean(k, k.truth, 0, &k.region)};
        });
}

TEST_F(Metrics, BiasAndRmse) {
    auto pair_reference = [](bool root_mean_square) {
        return [root_mean_square](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                double s = 0.0;
                double w = 0.0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        const auto n = static_cast<std::size_t>(k.index(c, i, j));
                        const double d = static_cast<double>(k.prediction[n]) - static_cast<double>(k.truth[n]);
                        w += a;
                        s += a == 0 ? 0.0 : a * (root_mean_square ? d * d : d);
                    }
                }
                out.push_back(root_mean_square ? std::sqrt(s / w) : s / w);
            }
            return out;
        };
    };
    check(
        "bias", 2, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            return bias<float>(g, {t, k.channels}, {p, k.channels}, row_weights(k, box, w));
        },
        pair_reference(false));
    check(
        "rmse", 2, false,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            return rmse<float>(g, {t, k.channels}, {p, k.channels}, row_weights(k, box, w));
        },
        pair_reference(true));
}

TEST_F(Metrics, ZonalMeanOverTheLonGroup) {
    // The distributed result holds this rank's rows; compare it with the serial rows of this box.
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : metric_grids(mesh.shape(), rule)) {
            const Case k = make_case(grid, 2);
            const ShardedGrid distributed(mesh, grid, rule);
            const ShardedGrid serial(alone, grid, rule);
            const Box& box = distributed.box();
            const auto x = shard_of(k.truth, grid, box, 2);
            const auto got = zonal_mean<float>(distributed, {x, 2});
            const auto whole = zonal_mean<float>(serial, {std::span<const float>(k.truth), 2});
            std::vector<double> expected;
            std::vector<double> reference;
            for (std::int64_t c = 0; c < 2; ++c) {
                for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                    expected.push_back(whole[static_cast<std::size_t>(c * grid.nlat + i)]);
                    double s = 0.0;
                    std::int64_t n = 0;
                    for (std::int64_t j = 0; j < grid.nlon; ++j) {
                        const double v = k.truth[static_cast<std::size_t>(k.index(c, i, j))];
                        s += std::isnan(v) ? 0.0 : v;
                        n += std::isnan(v) ? 0 : 1;
                    }
                    reference.push_back(n > 0 ? s / static_cast<double>(n) : nan);
                }
            }
            expect_identical(got, expected, "zonal_mean distributed vs serial");
            for (std::size_t r = 0; r < reference.size(); ++r) {
                expect_close(got[r], reference[r], "zonal_mean vs reference");
            }
            // Several fields in one call (one allreduce): each the same bits as its own zonal_mean.
            const auto p = shard_of(k.prediction, grid, box, 2);
            const FieldShard<float> both[] = {{x, 2}, {p, 2}};
            const auto pair = zonal_means<float>(distributed, both);
            ASSERT_EQ(pair.size(), 2U);
            expect_identical(pair[0], got, "zonal_means[truth]");
            expect_identical(pair[1], zonal_mean<float>(distributed, {p, 2}), "zonal_means[prediction]");
        }
    }
}

// The zonal means of `x` (channels 2) on `grid`, distributed against serial. A row of 2100 columns takes the per-row
// path where longitude is not split and the fixed-point path on each lon rank's shard where it is, so the meshes that
// split longitude compare the two paths' merges; the special rows (a NaN row, an infinity, a tiny and a huge value
// that force the per-row path on the rank holding them) mix the paths across lon ranks.
template <class T>
void expect_zonal_paths_agree(const ProcessMesh& mesh, const ProcessMesh& alone, const GridShape& grid,
                              const std::vector<T>& x) {
    const std::int64_t channels = 2;
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        const ShardedGrid distributed(mesh, grid, rule);
        const ShardedGrid serial(alone, grid, rule);
        const Box& box = distributed.box();
        const auto shard = shard_of(x, grid, box, channels);
        const auto got = zonal_mean_and_count<T>(distributed, {shard, channels});
        const auto whole = zonal_mean_and_count<T>(serial, {std::span<const T>(x), channels});
        std::vector<double> means;
        std::vector<double> counts;
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                means.push_back(whole.means[static_cast<std::size_t>(c * grid.nlat + i)]);
                counts.push_back(whole.counts[static_cast<std::size_t>(c * grid.nlat + i)]);
            }
        }
        expect_identical(got.means, means, "zonal means, distributed vs serial");
        expect_identical(got.counts, counts, "zonal counts, distributed vs serial");
        if (box.lat.contains(0)) {
            EXPECT_TRUE(std::isnan(got.means[static_cast<std::size_t>(box.lat.size())]));  // channel 1, row 0
            EXPECT_EQ(got.counts[static_cast<std::size_t>(box.lat.size())], 0.0);
        }
        if (box.lat.contains(2)) {
            EXPECT_EQ(got.means[static_cast<std::size_t>(2 - box.lat.begin)], std::numeric_limits<double>::infinity());
        }
        if constexpr (std::is_same_v<T, float>) {
            // The float rows against the double rows of the same values.
            const std::vector<double> x64(x.begin(), x.end());
            const auto shard64 = shard_of(x64, grid, box, channels);
            const auto wide = zonal_mean_and_count<double>(distributed, {shard64, channels});
            expect_identical(got.means, wide.means, "zonal means, float vs double");
            expect_identical(got.counts, wide.counts, "zonal counts, float vs double");
        }
    }
}

// A row's zonal sum takes the fixed-point path where its range allows and the per-row path elsewhere, rank by rank:
// here, in float and in double, a value far below the row's others in the last column (so only the last lon rank
// takes the per-row path for it), an infinity in the first column, a huge negative value mid-row, a row of NaN only,
// a subnormal in a double row, and rows longer than one fixed-point block. Every mean and count is the serial one bit
// for bit, and the float rows' are the double rows' of the same values.
TEST_F(Metrics, ZonalMeanMixesTheFixedPointAndPerRowPaths) {
    const std::int64_t channels = 2;
    for (const GridShape& grid : {GridShape{8, 24}, GridShape{4, 2100}}) {
        const auto at = [&](auto& x, std::int64_t c, std::int64_t i, std::int64_t j) -> auto& {
            return x[static_cast<std::size_t>((c * grid.nlat + i) * grid.nlon + j)];
        };
        const auto size = static_cast<std::size_t>(channels * grid.nlat * grid.nlon);
        std::vector<float> x(size);
        // Doubles of 53 significant bits, which no float holds, that cancel down to their last bits: each row's
        // mean rests on them.
        std::vector<double> y(size);
        for (std::size_t n = 0; n < size; ++n) {
            x[n] = 250.0F + static_cast<float>(n % 97) * 0.37F;
            y[n] = n % 2 == 0 ? 4096.0 + static_cast<double>(2 * (n % 89) + 1) * 0x1p-40 : -4096.0 - 0.5;
        }
        at(x, 0, 1, grid.nlon - 1) = 1e-37F;
        at(y, 0, 1, grid.nlon - 1) = 1e-300;
        at(x, 0, 2, 0) = std::numeric_limits<float>::infinity();
        at(y, 0, 2, 0) = std::numeric_limits<double>::infinity();
        at(x, 1, 1, grid.nlon / 2) = -3e35F;
        at(y, 1, 1, grid.nlon / 2) = -3e300;
        at(y, 1, 2, grid.nlon / 3) = std::numeric_limits<double>::denorm_min();
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            at(x, 1, 0, j) = std::numeric_limits<float>::quiet_NaN();
            at(y, 1, 0, j) = std::numeric_limits<double>::quiet_NaN();
        }
        expect_zonal_paths_agree<float>(mesh, alone, grid, x);
        expect_zonal_paths_agree<double>(mesh, alone, grid, y);
    }
}

TEST_F(Metrics, GradientMagnitudePointwise) {
    for (bool periodic : {false, true}) {
        for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
            for (const GridShape& grid : metric_grids(mesh.shape(), rule)) {
                if (Decomposition(grid, mesh.shape(), rule).has_empty_box()) {
                    continue;
                }
                const Case k = make_case(grid, 2);
                const ShardedGrid distributed(mesh, grid, rule);
                const Box& box = distributed.box();
                const auto x = shard_of(k.truth, grid, box, 2);
                const auto got = gradient_magnitude<float>(distributed, {x, 2}, {.periodic_lon = periodic});
                const auto reference = ref_gradient_magnitude(k, k.truth, periodic);
                const auto expected = shard_of(reference, grid, box, 2);
                // Each value is one IEEE expression of the same inputs: identical, not merely close.
                expect_identical(got, expected,
                                 "gradient_magnitude " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon) +
                                     (periodic ? " periodic" : ""));
            }
        }
    }
}

// Subnormal and tiny float fields: every magnitude within the documented bound of the exact one (computed in
// double from the same float values, exactly but for the square root), 2^-22 relative plus 2^-150 absolute,
// the rounding of a result in float's subnormal range; the same bits on every mesh. Without the scaling of
// tiny terms the squares underflow (a 6e-42 magnitude came out 0, a 1e-39 spike 4e-5 off).
TEST_F(Metrics, SubnormalGradientMagnitudesStayWithinTheBound) {
    const GridShape grid{9, 14};
    const std::int64_t channels = 3;
    const std::int64_t area = grid.nlat * grid.nlon;
    std::vector<float> field(static_cast<std::size_t>(channels * area));
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < grid.nlat; ++i) {
            for (std::int64_t j = 0; j < grid.nlon; ++j) {
                const double noise = hash01(c, i, j);
                const double value =
                    c == 0   ? std::ldexp(1.0 + 5000.0 * noise, -149)  // subnormal, a few bits
                    : c == 1 ? (i == 4 && j == 6 ? 1e-39 : 0.0)        // one subnormal spike
                             : std::ldexp(1.0 + noise, -120) * (1.0 + 0.01 * static_cast<double>(i));  // tiny normal
                field[static_cast<std::size_t>((c * grid.nlat + i) * grid.nlon + j)] = static_cast<float>(value);
            }
        }
    }
    auto at = [&](std::int64_t c, std::int64_t i, std::int64_t j) {
        return static_cast<double>(field[static_cast<std::size_t>((c * grid.nlat + i) * grid.nlon + j)]);
    };
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        if (Decomposition(grid, mesh.shape(), rule).has_empty_box()) {
            continue;
        }
        const ShardedGrid distributed(mesh, grid, rule);
        const ShardedGrid serial(alone, grid, rule);
        const Box& box = distributed.box();
        const auto x = shard_of(field, grid, box, channels);
        const auto got = gradient_magnitude<float>(distributed, {x, channels});
        const auto whole = gradient_magnitude<float>(serial, {field, channels});
        expect_identical(got, shard_of(whole, grid, box, channels), "subnormal gradient_magnitude vs serial");
        std::int64_t nonzero = 0;
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t i = 0; i < grid.nlat; ++i) {
                for (std::int64_t j = 0; j < grid.nlon; ++j) {
                    const double gy = i == 0               ? at(c, 1, j) - at(c, 0, j)
                                      : i == grid.nlat - 1 ? at(c, i, j) - at(c, i - 1, j)
                                                           : (at(c, i + 1, j) - at(c, i - 1, j)) / 2;
                    const double gx = j == 0               ? at(c, i, 1) - at(c, i, 0)
                                      : j == grid.nlon - 1 ? at(c, i, j) - at(c, i, j - 1)
                                                           : (at(c, i, j + 1) - at(c, i, j - 1)) / 2;
                    const double exact = std::sqrt(gy * gy + gx * gx);
                    const double value = whole[static_cast<std::size_t>((c * grid.nlat + i) * grid.nlon + j)];
                    EXPECT_LE(std::abs(value - exact), 0x1p-22 * exact + 0x1p-150)
                        << "channel " << c << " (" << i << ", " << j << "): " << value << " vs " << exact;
                    nonzero += value > 0.0 ? 1 : 0;
                }
            }
        }
        EXPECT_GT(nonzero, area);  // the subnormal channels did not flush to zero
        // The spike's neighbour along latitude: half of 1e-39 (as float), within half a subnormal step.
        EXPECT_NEAR(whole[static_cast<std::size_t>((grid.nlat + 3) * grid.nlon + 6)], at(1, 4, 6) / 2, 0x1p-150);
    }
}

TEST_F(Metrics, GradientInMetresOnTheSphere) {
    const GridShape grid{29, 41};
    const Case k = make_case(grid, 1);
    const ShardedGrid g(mesh, grid);
    const Box& box = g.box();
    const double dlat = 180.0 / 28.0;  // make_case spaces its latitudes pole to pole
    const double dlon = 360.0 / 41.0;
    const std::vector<double> rows_lat(k.lat_deg.begin() + box.lat.begin, k.lat_deg.begin() + box.lat.end);
    const GradientOptions metres{.periodic_lon = true,
                                 .metres = true,
                                 .radius_m = 6.371e6,
                                 .dlat_deg = dlat,
                                 .dlon_deg = dlon,
                                 .lat_deg = rows_lat};
    const auto x = shard_of(k.truth, grid, box, 1);
    const auto got = gradient_magnitude<float>(g, {x, 1}, metres);
    const double to_rad = std::numbers::pi / 180.0;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
            auto at = [&](std::int64_t a, std::int64_t b) {
                return static_cast<double>(k.truth[static_cast<std::size_t>(k.index(0, a, (b + 41) % 41))]);
            };
            const double gy = i == 0    ? at(1, j) - at(0, j)
                              : i == 28 ? at(28, j) - at(27, j)
                                        : (at(i + 1, j) - at(i - 1, j)) / 2;
            const double gx = (at(i, j + 1) - at(i, j - 1)) / 2;
            const double lat = k.lat_deg[static_cast<std::size_t>(i)];
            const double dy = 6.371e6 * dlat * to_rad;
            const double dx = std::abs(lat) == 90.0 ? 0.0 : 6.371e6 * std::cos(lat * to_rad) * dlon * to_rad;
            const double expected = std::sqrt(std::pow(gy / dy, 2) + (dx == 0.0 ? 0.0 : std::pow(gx / dx, 2)));
            const auto n = static_cast<std::size_t>((i - box.lat.begin) * box.lon.size() + j - box.lon.begin);
            // A float field's magnitude is float arithmetic: within a few float roundings (2^-22) of double.
            EXPECT_NEAR(got[n], expected, 0x1p-22 * expected) << "metres gradient";
        }
    }
    // The latitudes of this rank's rows are required.
    GradientOptions missing = metres;
    missing.lat_deg = {};
    EXPECT_THROW((void)gradient_magnitude<float>(g, {x, 1}, missing), ArgumentError);
}

TEST_F(Metrics, GradientMeansAndPercentDiff) {
    check(
        "weighted_mean_gradient_magnitude", 2, true,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto x = shard_of(k.truth, k.grid, box, k.channels);
            return weighted_mean_gradient_magnitude<float>(g, {x, k.channels}, row_weights(k, box, w));
        },
        [](const Case& k, const std::vector<double>&) {
            const auto g = ref_gradient_magnitude(k, k.truth, false);
            return std::vector<double>{ref_nanmean(k, g, 0), ref_nanmean(k, g, 1)};
        });
    check(
        "gradient_magnitude_percent_diff", 2, true,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            return gradient_magnitude_percent_diff<float>(g, {t, k.channels}, {p, k.channels}, row_weights(k, box, w),
                                                          {.periodic_lon = true});
        },
        [](const Case& k, const std::vector<double>&) {
            const auto gt = ref_gradient_magnitude(k, k.truth, true);
            const auto gp = ref_gradient_magnitude(k, k.prediction, true);
            std::vector<double> out;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                out.push_back(ref_gradient_percent_diff(k, gt, gp, c, GradientPoints::own));
            }
            return out;
        });
}

TEST_F(Metrics, TimeMeanMetrics) {
    // 3 steps of 2 channels: planes (time, channel); channel 1 has NaN, so its results are NaN.
    constexpr std::int64_t ntime = 3;
    constexpr std::int64_t channels = 2;
    auto reference = [](bool root_mean_square) {
        return [root_mean_square](const Case& k, const std::vector<double>&) {
            std::vector<double> out;
            for (std::int64_t c = 0; c < channels; ++c) {
                double s = 0.0;
                double w = 0.0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        double tm = 0.0;
                        double pm = 0.0;
                        for (std::int64_t step = 0; step < ntime; ++step) {
                            const auto n = static_cast<std::size_t>(k.index(step * channels + c, i, j));
                            tm += k.truth[n];
                            pm += k.prediction[n];
                        }
                        const double d = pm / ntime - tm / ntime;
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        w += a;
                        s += a == 0 ? 0.0 : a * (root_mean_square ? d * d : d);
                    }
                }
                out.push_back(root_mean_square ? std::sqrt(s / w) : s / w);
            }
            return out;
        };
    };
    auto metric = [](bool root_mean_square) {
        return [root_mean_square](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            return root_mean_square
                       ? rmse_of_time_mean<float>(g, {t, k.channels}, {p, k.channels}, ntime, row_weights(k, box, w))
                       : time_and_global_mean_bias<float>(g, {t, k.channels}, {p, k.channels}, ntime,
                                                          row_weights(k, box, w));
        };
    };
    check("rmse_of_time_mean", ntime * channels, false, metric(true), reference(true));
    check("time_and_global_mean_bias", ntime * channels, false, metric(false), reference(false));
}

TEST_F(Metrics, FusedEvaluationMatchesItsDefinitions) {
    check(
        "evaluate", 2, true,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            Evaluator evaluator(g, k.channels, row_weights(k, box, w));
            const Scores s = evaluator.evaluate<float>({t, k.channels}, {p, k.channels});
            const Scores again = evaluator.evaluate<float>({t, k.channels}, {p, k.channels});
            EXPECT_EQ(s["rmse"], again["rmse"]);  // reusable
            std::vector<double> all;
            for (const char* name :
                 {"mean_truth", "mean_pred", "bias", "rmse", "std_truth", "std_pred", "grad_mag_percent_diff"}) {
                all.insert(all.end(), s[name].begin(), s[name].end());
            }
            return all;
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<std::vector<double>> scores(7);
            const auto gt = ref_gradient_magnitude(k, k.truth, false);
            const auto gp = ref_gradient_magnitude(k, k.prediction, false);
            for (std::int64_t c = 0; c < k.channels; ++c) {
                double w = 0, st = 0, sp = 0, sd = 0, sdd = 0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        const auto n = static_cast<std::size_t>(k.index(c, i, j));
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        const double t = k.truth[n];
                        const double p = k.prediction[n];
                        if (a == 0 || !std::isfinite(t) || !std::isfinite(p)) {
                            continue;
                        }
                        w += a;
                        st += a * t;
                        sp += a * p;
                        sd += a * (p - t);
                        sdd += a * (p - t) * (p - t);
                    }
                }
                const double mt = st / w;
                const double mp = sp / w;
                double vt = 0, vp = 0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        const auto n = static_cast<std::size_t>(k.index(c, i, j));
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        const double t = k.truth[n];
                        const double p = k.prediction[n];
                        if (a == 0 || !std::isfinite(t) || !std::isfinite(p)) {
                            continue;
                        }
                        vt += a * (t - mt) * (t - mt);
                        vp += a * (p - mp) * (p - mp);
                    }
                }
                scores[0].push_back(mt);
                scores[1].push_back(mp);
                scores[2].push_back(sd / w);
                scores[3].push_back(std::sqrt(sdd / w));
                scores[4].push_back(std::sqrt(vt / w));
                scores[5].push_back(std::sqrt(vp / w));
                scores[6].push_back(ref_gradient_percent_diff(k, gt, gp, c));
            }
            std::vector<double> all;
            for (const auto& v : scores) {
                all.insert(all.end(), v.begin(), v.end());
            }
            return all;
        });
}

// Channel 0 of make_case with an infinity of each sign added (+inf in the truth, -inf in the prediction,
// and +inf in both at one point), beside channel 1's NaNs and the zero-weight pole rows.
Case case_with_infinities(GridShape grid) {
    Case k = make_case(grid, 2);
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            const auto n = static_cast<std::size_t>(k.index(0, i, j));
            const double h = hash01(i, j, 55);
            if (h < 0.04) {
                k.truth[n] = std::numeric_limits<float>::infinity();
            } else if (h < 0.08) {
                k.prediction[n] = -std::numeric_limits<float>::infinity();
            } else if (h < 0.10) {
                k.truth[n] = k.prediction[n] = std::numeric_limits<float>::infinity();
            }
        }
    }
    return k;
}

// The plain-loop bias and rmse under `policy`, from docs/design.md §3: a point counts when its weight is
// non-zero and both values count (skip_nan: not NaN; skip_invalid_pairs: finite); under propagate every
// point of non-zero weight counts and non-finite values propagate.
std::vector<double> ref_masked_bias_rmse(const Case& k, ValidityPolicy policy) {
    auto counts = [&](double v) {
        return policy == ValidityPolicy::propagate  ? true
               : policy == ValidityPolicy::skip_nan ? !std::isnan(v)
                                                    : std::isfinite(v);
    };
    std::vector<double> out;
    for (bool root_mean_square : {false, true}) {
        for (std::int64_t c = 0; c < k.channels; ++c) {
            double w = 0.0, st = 0.0, sp = 0.0, sdd = 0.0;
            for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                    const auto n = static_cast<std::size_t>(k.index(c, i, j));
                    const double a = k.weights[static_cast<std::size_t>(i)];
                    const double t = k.truth[n];
                    const double p = k.prediction[n];
                    if (a == 0.0 || !counts(t) || !counts(p)) {
                        continue;
                    }
                    w += a;
                    st += a * t;
                    sp += a * p;
                    sdd += a * (p - t) * (p - t);
                }
            }
            out.push_back(root_mean_square ? std::sqrt(sdd / w) : (sp - st) / w);
        }
    }
    return out;
}

// One policy, three front doors: masked_bias and masked_rmse of the library and the Evaluator's bias and
// rmse under the same policy are the same bits, on fields with NaN, +inf, -inf and zero-weight rows, on
// every layout (and equal to one rank); they match the plain-loop definition, infinities included.
TEST_F(Metrics, EveryPolicyGivesTheSameBitsInTheLibraryAndTheEvaluator) {
    for (ValidityPolicy policy :
         {ValidityPolicy::propagate, ValidityPolicy::skip_nan, ValidityPolicy::skip_invalid_pairs}) {
        for (const GridShape& grid : metric_grids(mesh.shape(), SplitRule::balanced)) {
            const Case k = case_with_infinities(grid);
            auto run = [&](const ProcessMesh& m) {
                const ShardedGrid g(m, grid);
                const Box& box = g.box();
                std::vector<double> w;
                const Weights a = row_weights(k, box, w);
                const auto t = shard_of(k.truth, grid, box, 2);
                const auto p = shard_of(k.prediction, grid, box, 2);
                std::vector<double> library = masked_bias<float>(g, {t, 2}, {p, 2}, a, policy);
                const std::vector<double> rmse_values = masked_rmse<float>(g, {t, 2}, {p, 2}, a, policy);
                library.insert(library.end(), rmse_values.begin(), rmse_values.end());
                EvaluationOptions options;
                options.policy = policy;
                options.gradient = false;
                Evaluator evaluator(g, 2, a, options);
                const Scores s = evaluator.evaluate<float>({t, 2}, {p, 2});
                std::vector<double> fused = s["bias"];
                fused.insert(fused.end(), s["rmse"].begin(), s["rmse"].end());
                expect_identical(fused, library, "Evaluator vs library");
                return library;
            };
            const std::vector<double> distributed = run(mesh);
            const std::vector<double> serial = run(alone);
            const std::string what = "policy " + std::to_string(static_cast<int>(policy)) + " grid " +
                                     std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon);
            expect_identical(distributed, serial, what + " distributed vs serial");
            const std::vector<double> expected = ref_masked_bias_rmse(k, policy);
            for (std::size_t n = 0; n < expected.size(); ++n) {
                if (std::isfinite(expected[n])) {
                    expect_close(serial[n], expected[n], what + " vs reference");
                } else {
                    EXPECT_TRUE(std::isnan(expected[n]) ? std::isnan(serial[n]) : serial[n] == expected[n])
                        << what << " [" << n << "]: " << serial[n] << " vs " << expected[n];
                }
            }
            if (grid.nlat == 29 && grid.nlon == 41) {  // where the infinities certainly fall on weighted points
                const double bias0 = serial[0];
                const double rmse0 = serial[2];
                if (policy == ValidityPolicy::propagate) {
                    EXPECT_FALSE(std::isfinite(bias0)) << what << ": an infinity under non-zero weight propagates";
                } else if (policy == ValidityPolicy::skip_nan) {
                    EXPECT_FALSE(std::isfinite(rmse0)) << what << ": skip_nan counts an infinity as a value";
                } else {
                    EXPECT_TRUE(std::isfinite(bias0) && std::isfinite(rmse0)) << what << ": infinities are left out";
                }
            }
        }
    }
}

// A score is one registry entry: an extra finalizer over the same sums is computed by the Evaluator on every
// layout, bit-identical to one rank, and an unknown name is an ArgumentError.
TEST_F(Metrics, ARegisteredScoreIsComputedByTheEvaluator) {
    check(
        "registered score", 2, true,
        [](const ShardedGrid& g, const Case& k, const Box& box) {
            std::vector<double> w;
            const auto t = shard_of(k.truth, k.grid, box, k.channels);
            const auto p = shard_of(k.prediction, k.grid, box, k.channels);
            EvaluationOptions options;
            options.scores.push_back(  // the weighted mean of truth^2
                {"mean_square_truth",
                 "msq_truth",
                 12,
                 4,
                 {Term::truth_square},
                 [](const TermSums& sums, std::int64_t c) { return sums.mean(c, Term::truth_square); }});
            Evaluator evaluator(g, k.channels, row_weights(k, box, w), options);
            const Scores s = evaluator.evaluate<float>({t, k.channels}, {p, k.channels});
            EXPECT_EQ(s.names().size(), evaluation_scores().size() + 1);
            EXPECT_THROW((void)s["no_such_score"], ArgumentError);
            // A finalizer that reads a term its score did not declare is refused, not given another slot.
            EvaluationOptions undeclared;
            undeclared.scores = {{"cross_mean",  // reads an undeclared term
                                  "cross",
                                  12,
                                  4,
                                  {Term::truth},
                                  [](const TermSums& sums, std::int64_t c) { return sums.mean(c, Term::cross); }}};
            Evaluator wrong(g, k.channels, row_weights(k, box, w), undeclared);
            EXPECT_THROW((void)wrong.evaluate<float>({t, k.channels}, {p, k.channels}), ArgumentError);
            return s["mean_square_truth"];
        },
        [](const Case& k, const std::vector<double>&) {
            std::vector<double> expected;
            for (std::int64_t c = 0; c < k.channels; ++c) {
                double w = 0, stt = 0;
                for (std::int64_t i = 0; i < k.grid.nlat; ++i) {
                    for (std::int64_t j = 0; j < k.grid.nlon; ++j) {
                        const auto n = static_cast<std::size_t>(k.index(c, i, j));
                        const double a = k.weights[static_cast<std::size_t>(i)];
                        if (a == 0 || !std::isfinite(k.truth[n]) || !std::isfinite(k.prediction[n])) {
                            continue;
                        }
                        w += a;
                        stt += a * k.truth[n] * k.truth[n];
                    }
                }
                expected.push_back(stt / w);
            }
            return expected;
        });
}

// The time means of `gridshard eval` and of the library are one TimeMeanAccumulator: streamed over this
// data rank's block of steps (uneven when D does not divide T) and merged, it gives the library's
// rmse_of_time_mean on every step bit for bit; skip_invalid_pairs leaves out points not finite at a step.
TEST_F(Metrics, StreamedTimeMeansMatchTheLibraryOnEveryDataSplit) {
    const GridShape grid{13, 17};
    const std::int64_t channels = 2;
    const std::int64_t ntime = 5;
    const Case k = make_case(grid, channels * ntime);
    const ShardedGrid g(mesh, grid);
    const Box& box = g.box();
    std::vector<double> w;
    const Weights weights = row_weights(k, box, w);
    const auto t = shard_of(k.truth, grid, box, channels * ntime);
    const auto p = shard_of(k.prediction, grid, box, channels * ntime);
    const auto library_rmse = rmse_of_time_mean<float>(g, {t, channels * ntime}, {p, channels * ntime}, ntime, weights);
    const auto library_bias =
        time_and_global_mean_bias<float>(g, {t, channels * ntime}, {p, channels * ntime}, ntime, weights);

    TimeMeanAccumulator sums(g, channels);
    const Range steps = data_block(ntime, mesh.shape().data, mesh.coords().data, true);
    const auto step_values = static_cast<std::size_t>(channels * box.area());
    for (std::int64_t s = steps.begin; s < steps.end; ++s) {
        const auto offset = static_cast<std::size_t>(s) * step_values;
        sums.add<float>({std::span<const float>(t).subspan(offset, step_values), channels},
                        {std::span<const float>(p).subspan(offset, step_values), channels});
    }
    sums.merge_over_data();
    EXPECT_EQ(sums.steps(), ntime);
    expect_identical(sums.rmse_of_time_mean(weights, ValidityPolicy::propagate), library_rmse, "streamed rmse");
    expect_identical(sums.time_and_global_mean_bias(weights, ValidityPolicy::propagate), library_bias, "streamed bias");
    EXPECT_TRUE(std::isnan(library_rmse[1]));  // channel 1 has NaN points, which propagate

    const auto skipped = sums.rmse_of_time_mean(weights, ValidityPolicy::skip_invalid_pairs);
    for (std::int64_t c = 0; c < channels; ++c) {
        double total = 0;
        double sum = 0;
        for (std::int64_t i = 0; i < grid.nlat; ++i) {
            for (std::int64_t j = 0; j < grid.nlon; ++j) {
                double d = 0;
                bool valid = true;
                for (std::int64_t s = 0; s < ntime; ++s) {
                    const auto n = static_cast<std::size_t>(k.index(s * channels + c, i, j));
                    valid = valid && std::isfinite(k.truth[n]) && std::isfinite(k.prediction[n]);
                    d += static_cast<double>(k.prediction[n]) - static_cast<double>(k.truth[n]);
                }
                const double a = k.weights[static_cast<std::size_t>(i)];
                if (valid && a != 0) {
                    d /= static_cast<double>(ntime);
                    total += a;
                    sum += a * d * d;
                }
            }
        }
        expect_close(skipped[static_cast<std::size_t>(c)], std::sqrt(sum / total), "skip_invalid_pairs rmse");
    }
}

// The time sums of `ntime` steps of one channel on `grid`, the truth `truth` everywhere and the prediction
// `prediction_at(step, i, j)`: each data rank adds its block of steps, then the sums are merged over the data group.
template <class Prediction>
TimeMeanAccumulator streamed_differences(const ProcessMesh& mesh, GridShape grid, std::int64_t ntime, double truth,
                                         Prediction prediction_at) {
    const ShardedGrid g(mesh, grid);
    const Box& box = g.box();
    TimeMeanAccumulator sums(g, 1);
    const Range steps = data_block(ntime, mesh.shape().data, mesh.coords().data, true);
    for (std::int64_t s = steps.begin; s < steps.end; ++s) {
        const std::vector<double> t(static_cast<std::size_t>(box.area()), truth);
        std::vector<double> p;
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                p.push_back(prediction_at(s, i, j));
            }
        }
        sums.add<double>({t, 1}, {p, 1});
    }
    sums.merge_over_data();
    return sums;
}

// Each point's non-finite differences keep their own IEEE sum, whichever data rank added them and whether or not the
// rest of its block was finite: an infinity stays an infinity, +inf and -inf make NaN, a NaN stays NaN, and the finite
// points' means are exact.
TEST_F(Metrics, TimeMeanAccumulatorKeepsEachPointsNonFiniteSum) {
    const GridShape grid{6, 7};
    const std::int64_t ntime = 3;
    const double inf = std::numeric_limits<double>::infinity();
    const double quiet_nan = std::numeric_limits<double>::quiet_NaN();
    // (step, i, j) -> the prediction; the truth is 1 everywhere.
    const auto prediction_at = [&](std::int64_t step, std::int64_t i, std::int64_t j) {
        if (i == 0 && j == 0 && step == 0) {
            return inf;
        }
        if (i == 0 && j == 1) {
            return step == 0 ? inf : step == 1 ? -inf : 2.0;
        }
        if (i == 1 && j == 2 && step == 2) {
            return quiet_nan;
        }
        return 1.0 + static_cast<double>(step * 7 + i * 3 + j) * 0x1p-30;
    };
    const TimeMeanAccumulator sums = streamed_differences(mesh, grid, ntime, 1.0, prediction_at);
    const Box& box = sums.grid().box();
    const std::vector<double> skip_nan = sums.mean_difference(ValidityPolicy::skip_nan);
    const std::vector<double> skip_pairs = sums.mean_difference(ValidityPolicy::skip_invalid_pairs);
    std::size_t n = 0;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j, ++n) {
            const std::string where = "point (" + std::to_string(i) + ", " + std::to_string(j) + ")";
            if (i == 0 && j == 0) {
                EXPECT_EQ(skip_nan[n], inf) << where;
            } else if ((i == 0 && j == 1) || (i == 1 && j == 2)) {
                EXPECT_TRUE(std::isnan(skip_nan[n])) << where;
            } else {
                double exact = 0.0;  // exact: multiples of 2^-30 well inside double's range
                for (std::int64_t s = 0; s < ntime; ++s) {
                    exact += prediction_at(s, i, j) - 1.0;
                }
                EXPECT_EQ(skip_nan[n], exact / static_cast<double>(ntime)) << where;
                EXPECT_EQ(skip_pairs[n], skip_nan[n]) << where;
                continue;
            }
            EXPECT_TRUE(std::isnan(skip_pairs[n])) << where;
        }
    }
}

// A step streams only the running sums through a chunk of points whose additions are all exact and finite; a chunk
// with an inexact addition keeps its error terms, one with a non-finite difference its non-finite sums. Points of both
// kinds side by side over a grid of several chunks a rank, whichever data rank added which step: 1 then 2^-53 twice is
// 1 + 2^-52 exactly, which plain sums round to 1.
TEST_F(Metrics, TimeMeanAccumulatorKeepsErrorTermsChunkByChunk) {
    const GridShape grid{40, 70};
    const std::int64_t ntime = 3;
    const auto inexact = [](std::int64_t i, std::int64_t j) { return i >= 20 && j % 3 == 0; };
    const auto prediction_at = [&](std::int64_t step, std::int64_t i, std::int64_t j) {
        if (i == 2 && j == 5 && step == 1) {
            return std::numeric_limits<double>::quiet_NaN();
        }
        if (inexact(i, j)) {
            return step == 0 ? 1.0 : 0x1p-53;
        }
        return 1.0 + static_cast<double>(step * 7 + i * 3 + j) * 0x1p-30;
    };
    const TimeMeanAccumulator sums = streamed_differences(mesh, grid, ntime, 0.0, prediction_at);
    const Box& box = sums.grid().box();
    const std::vector<double> mean = sums.mean_difference(ValidityPolicy::skip_nan);
    std::size_t n = 0;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j, ++n) {
            const std::string where = "point (" + std::to_string(i) + ", " + std::to_string(j) + ")";
            if (i == 2 && j == 5) {
                EXPECT_TRUE(std::isnan(mean[n])) << where;
                continue;
            }
            double exact = 1.0 + 0x1p-52;  // the inexact points' sum
            if (!inexact(i, j)) {
                exact = 0.0;  // exact: multiples of 2^-30 well inside double's range
                for (std::int64_t s = 0; s < ntime; ++s) {
                    exact += prediction_at(s, i, j);
                }
            }
            EXPECT_EQ(mean[n], exact / static_cast<double>(ntime)) << where;
        }
    }
}

// Float rows with a row weight take the exact sums' fixed-point path (numerics/fixed_point.hpp) when their range
// proves one grid, and the per-row path otherwise; both are exact, so nothing may move. A channel of each kind of
// row, and one of them all side by side: smooth, a range just inside the grid's limit and beyond it,
// subnormals, cancellation, an infinity, NaN, zeros, the largest floats, squares one bit too wide for one
// digit. Checked two ways, each against inputs the
// fixed-point path does not take: float fields against the same values as doubles (no gradient; any row weights), and
// row weights against the same weights per point (powers of two, so a per-point product is exact; gradient on).
TEST_F(Metrics, TheFixedPointPathGivesThePerRowPathsBits) {
    const GridShape grid{23, 37};
    constexpr std::int64_t kinds = 10;
    constexpr std::int64_t channels = kinds + 1;  // a channel of each kind (so no kind hides another's bits), a mix
    std::vector<float> truth;
    std::vector<float> prediction;
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < grid.nlat; ++i) {
            for (std::int64_t j = 0; j < grid.nlon; ++j) {
                const double u = hash01(c, i, j) - 0.5;
                const double v = hash01(c + 5, i, j) - 0.5;
                const bool odd = j % 2 == 1;
                double t = 0.0;
                double p = 0.0;
                switch (c < kinds ? c : i % kinds) {
                    case 0:  // smooth, temperature-like
                        t = 250.0 + 30.0 * u;
                        p = t + v;
                        break;
                    case 1:  // non-zero magnitudes 2^27 apart at most: the widest range one grid holds
                        t = odd ? std::ldexp(1.0 + u, 9) : std::ldexp(1.0 + u, -17);
                        p = odd ? std::ldexp(1.0 + v, -17) : std::ldexp(1.0 + v, 9);
                        break;
                    case 2:  // wider ranges (2^33, 2^60): the per-row path
                        t = odd ? std::ldexp(1.0 + u, 10) : std::ldexp(1.0 + u, i % 2 == 0 ? -23 : -50);
                        p = t * (1.0 + 1e-3 * v);
                        break;
                    case 3:  // subnormal and tiny normal floats
                        t = std::ldexp(1.0 + u, odd ? -140 : -127);
                        p = std::ldexp(1.0 + v, -135);
                        break;
                    case 4:  // cancellation: large values of both signs around small ones
                        t = odd ? std::ldexp(1.0 + u, 20) * (j % 4 == 1 ? 1.0 : -1.0) : 1.0 + u;
                        p = -t + v;
                        break;
                    case 5:  // an infinity in the prediction
                        t = 10.0 * u;
                        p = j == 3 ? -std::numeric_limits<double>::infinity() : t + v;
                        break;
                    case 6:  // NaN in both, at different points
                        t = j % 5 == 0 ? std::numeric_limits<double>::quiet_NaN() : 1e4 * u;
                        p = j % 7 == 0 ? std::numeric_limits<double>::quiet_NaN() : 1e4 * v;
                        break;
                    case 7:  // zeros, some rows of nothing else
                        t = odd ? 0.0 : (i % 2 == 0 ? 0.0 : u);
                        p = 0.0;
                        break;
                    case 9:  // magnitudes in [2^5, 2^8): squares span 52 bits, one beyond one digit's
                        t = 32.0 + 223.0 * (u + 0.5);
                        p = 255.0 - 223.0 * (v + 0.5);
                        break;
                    default:  // the largest floats: squares far beyond float's range, differences that overflow it
                        t = std::ldexp(1.0 + u, 127);
                        p = std::ldexp(1.0 + v, 126) * (odd ? -1.0 : 1.0);
                        break;
                }
                truth.push_back(static_cast<float>(t));
                prediction.push_back(static_cast<float>(p));
            }
        }
    }
    const std::vector<double> truth64(truth.begin(), truth.end());
    const std::vector<double> prediction64(prediction.begin(), prediction.end());
    const ShardedGrid g(mesh, grid);
    const Box box = g.box();
    const auto t = shard_of(truth, grid, box, channels);
    const auto p = shard_of(prediction, grid, box, channels);
    const auto t64 = shard_of(truth64, grid, box, channels);
    const auto p64 = shard_of(prediction64, grid, box, channels);
    std::vector<double> truth53(truth64);  // the same values with 53 significant bits, which no float holds
    std::vector<double> prediction53(prediction64);
    for (std::size_t n = 0; n < truth53.size(); ++n) {
        truth53[n] *= 1.0 + 0x1p-45 * static_cast<double>(n % 7);
        prediction53[n] *= 1.0 - 0x1p-47 * static_cast<double>(n % 5);
    }
    const auto t53 = shard_of(truth53, grid, box, channels);
    const auto p53 = shard_of(prediction53, grid, box, channels);
    std::vector<double> weights;       // per row: some zero, some not powers of two
    std::vector<double> powers;        // per row, powers of two
    std::vector<double> point_powers;  // the same per point
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        weights.push_back(i == 0 ? 0.0 : 0.3 + 0.1 * static_cast<double>(i % 4));
        powers.push_back(std::ldexp(1.0, static_cast<int>(i % 5) - 2));
        point_powers.insert(point_powers.end(), static_cast<std::size_t>(box.lon.size()), powers.back());
    }
    for (const ValidityPolicy policy :
         {ValidityPolicy::propagate, ValidityPolicy::skip_nan, ValidityPolicy::skip_invalid_pairs}) {
        const std::string what = "policy " + std::to_string(static_cast<int>(policy));
        EvaluationOptions options;
        options.policy = policy;
        options.gradient = false;
        Evaluator plain(g, channels, {weights, false}, options);
        expect_identical(all_scores(plain.evaluate<float>({t, channels}, {p, channels})),
                         all_scores(plain.evaluate<double>({t64, channels}, {p64, channels})),
                         what + ", float vs double");
        options.gradient = true;
        Evaluator per_row(g, channels, {powers, false}, options);
        Evaluator per_point(g, channels, {point_powers, true}, options);
        expect_identical(all_scores(per_row.evaluate<float>({t, channels}, {p, channels})),
                         all_scores(per_point.evaluate<float>({t, channels}, {p, channels})),
                         what + ", row vs point weights");
        // ACE's own-points gradient score alone: the fused pass takes its rule (own_gradient_policy), which under
        // propagate is not the request's.
        options.scores = {score_definition(EvaluatorScore::grad_mag_percent_diff_own_points)};
        Evaluator own_per_row(g, channels, {powers, false}, options);
        Evaluator own_per_point(g, channels, {point_powers, true}, options);
        expect_identical(all_scores(own_per_row.evaluate<float>({t, channels}, {p, channels})),
                         all_scores(own_per_point.evaluate<float>({t, channels}, {p, channels})),
                         what + ", own-points gradient, row vs point weights");
        // Doubles of 53 significant bits: the double rows' fixed-point path (row weights) against the per-row path
        // (point weights).
        expect_identical(all_scores(per_row.evaluate<double>({t53, channels}, {p53, channels})),
                         all_scores(per_point.evaluate<double>({t53, channels}, {p53, channels})),
                         what + ", 53-bit doubles, row vs point weights");
    }
    // The fused gradient pass's own-points terms (ACE's definition; the Evaluator's above are the common ones).
    for (const bool periodic : {false, true}) {
        const GradientOptions gradient{.periodic_lon = periodic};
        expect_identical(
            gradient_magnitude_percent_diff<float>(g, {t, channels}, {p, channels}, {powers, false}, gradient),
            gradient_magnitude_percent_diff<float>(g, {t, channels}, {p, channels}, {point_powers, true}, gradient),
            "gradient_magnitude_percent_diff, row vs point weights");
    }
    expect_identical(zonal_mean<float>(g, {t, channels}), zonal_mean<double>(g, {t64, channels}),
                     "zonal_mean, float vs double");
}

// evaluate_with_zonal_means is evaluate() and zonal_means of the pair, bit for bit, whichever rows the scores' pass
// hands over (smooth rows) and whichever it does not (rows with NaN or an infinity, zero-weight rows, rows longer
// than one block, every row under point weights), float and double of 53 significant bits, under every policy.
TEST_F(Metrics, EvaluateWithZonalMeansIsBothCalls) {
    const std::int64_t channels = 3;
    for (const GridShape& grid : {GridShape{9, 24}, GridShape{5, 2100}}) {
        Case k = make_case(grid, channels);
        k.prediction[static_cast<std::size_t>(k.index(2, 2, 0))] = std::numeric_limits<float>::infinity();
        std::vector<double> truth53(k.truth.begin(), k.truth.end());
        std::vector<double> prediction53(k.prediction.begin(), k.prediction.end());
        for (std::size_t n = 0; n < truth53.size(); ++n) {
            truth53[n] *= 1.0 + 0x1p-45 * static_cast<double>(n % 7);
            prediction53[n] *= 1.0 - 0x1p-47 * static_cast<double>(n % 5);
        }
        const ShardedGrid g(mesh, grid);
        const Box& box = g.box();
        const auto t = shard_of(k.truth, grid, box, channels);
        const auto p = shard_of(k.prediction, grid, box, channels);
        const auto t53 = shard_of(truth53, grid, box, channels);
        const auto p53 = shard_of(prediction53, grid, box, channels);
        std::vector<double> w;
        const Weights per_row = row_weights(k, box, w);
        std::vector<double> point_weights;
        for (std::int64_t i = 0; i < box.lat.size(); ++i) {
            point_weights.insert(point_weights.end(), static_cast<std::size_t>(box.lon.size()),
                                 w[static_cast<std::size_t>(i)]);
        }
        const auto expect_both_calls = [&](Evaluator& e, const auto& truth, const auto& prediction,
                                           const std::string& what) {
            using T = typename std::decay_t<decltype(truth)>::value_type;
            const FieldShard<T> fields[] = {{truth, channels}, {prediction, channels}};
            const ScoresAndZonalMeans both = e.evaluate_with_zonal_means<T>(fields[0], fields[1]);
            expect_identical(all_scores(both.scores), all_scores(e.evaluate<T>(fields[0], fields[1])),
                             what + ": scores");
            const std::vector<std::vector<double>> zonal = zonal_means<T>(g, fields);
            expect_identical(both.truth_zonal_means, zonal[0], what + ": truth's zonal means");
            expect_identical(both.prediction_zonal_means, zonal[1], what + ": prediction's zonal means");
        };
        for (const ValidityPolicy policy :
             {ValidityPolicy::propagate, ValidityPolicy::skip_nan, ValidityPolicy::skip_invalid_pairs}) {
            EvaluationOptions options;
            options.policy = policy;
            const std::string what =
                std::to_string(grid.nlon) + " columns, policy " + std::to_string(static_cast<int>(policy));
            Evaluator rows(g, channels, per_row, options);
            Evaluator points(g, channels, {point_weights, true}, options);
            expect_both_calls(rows, t, p, what + ", float");
            expect_both_calls(rows, t53, p53, what + ", double");
            expect_both_calls(points, t, p, what + ", float, point weights");
        }
    }
}

// The Evaluator shares its rows between threads, each with exact partial sums merged exactly, and the zonal
// mean its (channel, row) sums: the same bits for 1, 2 and 3 threads (per-row and per-point weights).
TEST_F(Metrics, EvaluationIsBitIdenticalForAnyThreadCount) {
#if defined(_OPENMP)
    const GridShape grid{31, 23};
    const Case k = make_case(grid, 3);
    const ShardedGrid g(mesh, grid);
    const auto t = shard_of(k.truth, grid, g.box(), 3);
    const auto p = shard_of(k.prediction, grid, g.box(), 3);
    std::vector<double> w;
    const Weights per_row = row_weights(k, g.box(), w);
    std::vector<double> point_weights;
    for (std::int64_t i = 0; i < g.box().lat.size(); ++i) {
        for (std::int64_t j = 0; j < g.box().lon.size(); ++j) {
            point_weights.push_back(w[static_cast<std::size_t>(i)] * (1.0 + 0.01 * static_cast<double>(j)));
        }
    }
    const int before = omp_get_max_threads();
    const std::int64_t fewest_before = min_points_per_thread();
    set_min_points_per_thread(1);  // share even this small field between the threads
    for (const Weights weights : {per_row, Weights{point_weights, true}}) {
        std::vector<std::vector<double>> results;
        for (const int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            Evaluator evaluator(g, 3, weights);
            const Scores s = evaluator.evaluate<float>({t, 3}, {p, 3});
            std::vector<double> all;
            for (std::size_t n = 0; n < s.names().size(); ++n) {
                all.insert(all.end(), s.at(n).begin(), s.at(n).end());
            }
            const auto zonal = zonal_mean<float>(g, {t, 3});  // threaded over (channel, row) too
            all.insert(all.end(), zonal.begin(), zonal.end());
            results.push_back(all);
        }
        expect_identical(results[1], results[0], "2 threads vs 1");
        expect_identical(results[2], results[0], "3 threads vs 1");
    }
    omp_set_num_threads(before);
    set_min_points_per_thread(fewest_before);
#else
    GTEST_SKIP() << "built without OpenMP";
#endif
}

// A binding holds an Evaluator without the mesh, grid and weights it was made from: it keeps its own
// copies (the mesh's communicators shared), so it still works, with the same bits, once they are gone.
TEST_F(Metrics, AnEvaluatorOutlivesTheMeshGridAndWeightsItWasMadeFrom) {
    const GridShape grid{17, 19};
    const Case k = make_case(grid, 2);
    const ShardedGrid g(mesh, grid);
    std::vector<double> w;
    const auto t = shard_of(k.truth, grid, g.box(), 2);
    const auto p = shard_of(k.prediction, grid, g.box(), 2);
    const Scores expected = Evaluator(g, 2, row_weights(k, g.box(), w)).evaluate<float>({t, 2}, {p, 2});

    std::optional<Evaluator> kept;
    {
        const ProcessMesh own_mesh(mesh.world(), mesh.shape());
        const ShardedGrid own_grid(own_mesh, grid);
        std::vector<double> own_weights;
        kept.emplace(own_grid, 2, row_weights(k, own_grid.box(), own_weights));
        std::fill(own_weights.begin(), own_weights.end(), -1.0);  // the caller's buffer changes, then goes
    }
    const Scores s = kept->evaluate<float>({t, 2}, {p, 2});
    for (std::size_t n = 0; n < s.names().size(); ++n) {
        expect_identical(s.at(n), expected.at(n), s.names()[n]);
    }
}

TEST_F(Metrics, FastSummationIsCloseButNotPromisedIdentical) {
    const GridShape grid{29, 41};
    const Case k = make_case(grid, 2);
    const ShardedGrid g(mesh, grid);
    std::vector<double> w;
    const auto x = shard_of(k.prediction, grid, g.box(), 2);
    const auto fast = weighted_std<float>(g, {x, 2}, row_weights(k, g.box(), w), Summation::fast);
    const auto exact = weighted_std<float>(g, {x, 2}, row_weights(k, g.box(), w), Summation::reproducible);
    expect_close(fast[0], exact[0], "fast vs reproducible");
}

TEST_F(Metrics, BadArgumentsRaiseOnEveryRank) {
    const GridShape grid{13, 11};
    const Case k = make_case(grid, 2);
    const ShardedGrid g(mesh, grid, SplitRule::div_up);
    const Box& box = g.box();
    const bool last = mesh.world().rank() == mesh.world().size() - 1;
    const bool last_group = mesh.coords().data == mesh.shape().data - 1;  // the spatial group of the last rank
    std::vector<double> w;
    const Weights weights = row_weights(k, box, w);
    const auto t = shard_of(k.truth, grid, box, 2);
    const auto p = shard_of(k.prediction, grid, box, 2);
    auto expect_raised_in_last_group = [&](const std::function<void()>& call, const std::string& what) {
        if (last_group) {
            EXPECT_THROW(call(), ArgumentError) << what;
        } else {
            EXPECT_NO_THROW(call()) << what;
        }
    };
    // Mismatched shapes on one rank only.
    const std::vector<float> short_p(p.begin(), p.end() - (last && !p.empty() ? 1 : 0));
    expect_raised_in_last_group([&] { (void)rmse<float>(g, {t, 2}, {short_p, 2}, weights); }, "rmse shapes");
    // Negative or non-finite weights on one rank only.
    std::vector<double> bad = w;
    if (last && !bad.empty()) {
        bad[0] = -1.0;
    }
    expect_raised_in_last_group([&] { (void)weighted_mean<float>(g, {t, 2}, {bad, false}); }, "negative weight");
    if (last && !bad.empty()) {
        bad[0] = std::numeric_limits<double>::infinity();
    }
    expect_raised_in_last_group([&] { (void)weighted_nanmean<float>(g, {t, 2}, {bad, false}); }, "infinite weight");
    // Zero total weight: every rank sees the same total.
    const std::vector<double> zeros(w.size(), 0.0);
    EXPECT_THROW((void)weighted_mean<float>(g, {t, 2}, {zeros, false}), ArgumentError);
    // A gradient dim of size 1.
    const ShardedGrid flat(alone, {1, 8});
    const std::vector<float> row(8, 1.0F);
    EXPECT_THROW((void)gradient_magnitude<float>(flat, {row, 1}), ArgumentError);
    // A grid that differs on one rank, or that one rank cannot split: every rank of the group raises.
    if (mesh.spatial().size() > 1) {
        const GridShape odd = mesh.spatial().rank() == 0 ? GridShape{1, 8} : GridShape{13, 11};
        EXPECT_THROW(ShardedGrid(mesh, odd), ArgumentError);
        // An Evaluator with a bad channel count on one rank raises in evaluate(), on every rank.
        Evaluator evaluator(g, mesh.spatial().rank() == 0 ? 0 : 2, weights);
        EXPECT_THROW((void)evaluator.evaluate<float>({t, 2}, {p, 2}), ArgumentError);
    }
    // A region of the wrong size or with negative values is named as such.
    try {
        (void)regional_weighted_mean<float>(g, {t, 2}, weights, std::vector<double>(3, 1.0));
        FAIL() << "expected ArgumentError";
    } catch (const ArgumentError& error) {
        EXPECT_NE(std::string(error.what()).find("region"), std::string::npos) << error.what();
    }
    std::vector<double> negative_region(static_cast<std::size_t>(box.area()), 1.0);
    if (!negative_region.empty() && last) {
        negative_region[0] = -1.0;
    }
    expect_raised_in_last_group(
        [&] {
            (void)regional_weighted_mean<float>(g, {t, 2}, weights, negative_region);
        },
        "negative region");
    // Gradient in metres without spacings.
    const std::vector<double> rows_lat(static_cast<std::size_t>(box.lat.size()), 10.0);
    GradientOptions no_spacing{};
    no_spacing.metres = true;
    no_spacing.lat_deg = rows_lat;
    EXPECT_THROW((void)gradient_magnitude<float>(g, {t, 2}, no_spacing), ArgumentError);
    // Different channel counts for truth and prediction.
    EXPECT_THROW((void)bias<float>(g, {t, 2}, {std::span<const float>(p).first(p.size() / 2), 1}, weights),
                 ArgumentError);
}

}  // namespace
}  // namespace gridshard
