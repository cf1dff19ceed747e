// The ensemble and anomaly scores on every mesh and split rule: bit for bit the serial answer (a 1x1x1 mesh
// over MPI_COMM_SELF on the global field), and the serial answer against a brute-force double reference of
// the formulas in metrics/ensemble.hpp (every pair of members, no sorting), on grids with uneven shards and a
// NaN mask.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/ensemble.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

using mpitest::shard_of;

struct EnsembleCase {
    GridShape grid;
    std::int64_t members = 0;
    std::int64_t channels = 0;
    std::vector<float> truth;        // (channels, nlat, nlon)
    std::vector<float> members_all;  // (members, channels, nlat, nlon)
    std::vector<float> climatology;  // (channels, nlat, nlon)
    std::vector<double> weights;     // per point (nlat, nlon), a zero row included
};

EnsembleCase make_case(GridShape grid, std::int64_t members, std::int64_t channels) {
    EnsembleCase k{grid, members, channels, {}, {}, {}, {}};
    std::mt19937_64 random(42);
    std::normal_distribution<double> normal(0.0, 1.0);
    const std::int64_t plane = channels * grid.nlat * grid.nlon;
    for (std::int64_t p = 0; p < plane; ++p) {
        const double base = 280.0 + 5.0 * std::sin(0.3 * static_cast<double>(p));
        k.truth.push_back(static_cast<float>(base + normal(random)));
        k.climatology.push_back(static_cast<float>(base + 0.5 * normal(random)));
    }
    for (std::int64_t m = 0; m < members; ++m) {
        for (std::int64_t p = 0; p < plane; ++p) {
            k.members_all.push_back(static_cast<float>(k.truth[static_cast<std::size_t>(p)] + 1.5 * normal(random)));
        }
    }
    k.truth[3] = std::nanf("");                                          // a NaN in the truth
    k.members_all[static_cast<std::size_t>(plane + 7)] = std::nanf("");  // one member NaN at a point
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            k.weights.push_back(i == 0 ? 0.0 : 1.0 + 0.1 * static_cast<double>((i * 7 + j) % 5));
        }
    }
    return k;
}

struct Results {
    EnsembleScores ensemble;
    std::vector<double> acc;
};

Results compute(const ProcessMesh& mesh, const EnsembleCase& k, SplitRule rule) {
    const ShardedGrid g(mesh, k.grid, rule);
    const auto t = shard_of(k.truth, k.grid, g.box(), k.channels);
    const auto c = shard_of(k.climatology, k.grid, g.box(), k.channels);
    const auto x = shard_of(k.members_all, k.grid, g.box(), k.members * k.channels);
    const auto w = shard_of(k.weights, k.grid, g.box(), 1);
    const Weights a{w, true};
    Results r;
    r.ensemble = ensemble_scores<float>(g, {t, k.channels}, {x, k.members, k.channels}, a);
    std::vector<float> mean(t.size(), 0.0F);  // the first member as "the prediction" of the ACC
    std::copy_n(x.begin(), t.size(), mean.begin());
    r.acc = anomaly_correlation<float>(g, {t, k.channels}, {mean, k.channels}, {c, k.channels}, a);
    return r;
}

// The formulas as written, in double, every pair of members.
Results reference(const EnsembleCase& k) {
    Results r;
    const std::int64_t area = k.grid.nlat * k.grid.nlon;
    const auto m = static_cast<double>(k.members);
    for (std::int64_t c = 0; c < k.channels; ++c) {
        double w_sum = 0, sq = 0, var = 0, crps = 0, fair = 0, xy = 0, xx = 0, yy = 0, w_acc = 0;
        for (std::int64_t p = 0; p < area; ++p) {
            const double a = k.weights[static_cast<std::size_t>(p)];
            const double y = k.truth[static_cast<std::size_t>(c * area + p)];
            std::vector<double> x;
            bool finite = std::isfinite(y);
            for (std::int64_t e = 0; e < k.members; ++e) {
                x.push_back(k.members_all[static_cast<std::size_t>((e * k.channels + c) * area + p)]);
                finite = finite && std::isfinite(x.back());
            }
            const double clim = k.climatology[static_cast<std::size_t>(c * area + p)];
            if (a != 0.0 && std::isfinite(y) && std::isfinite(x[0])) {
                xy += a * (x[0] - clim) * (y - clim);
                xx += a * (x[0] - clim) * (x[0] - clim);
                yy += a * (y - clim) * (y - clim);
                w_acc += a;
            }
            if (a == 0.0 || !finite) {
                continue;
            }
            double mean = 0, absolute = 0, pairs = 0;
            for (double v : x) {
                mean += v / m;
                absolute += std::abs(v - y) / m;
            }
            double s2 = 0;
            for (double v : x) {
                s2 += (v - mean) * (v - mean);
                for (double u : x) {
                    pairs += std::abs(v - u);
                }
            }
            w_sum += a;
            sq += a * (mean - y) * (mean - y);
            var += a * s2 / (m - 1);
            crps += a * (absolute - pairs / (2 * m * m));
            fair += a * (absolute - pairs / (2 * m * (m - 1)));
        }
        r.ensemble.ensemble_mean_rmse.push_back(std::sqrt(sq / w_sum));
        r.ensemble.spread.push_back(std::sqrt(var / w_sum));
        r.ensemble.spread_skill_ratio.push_back(std::sqrt(var / w_sum) / std::sqrt(sq / w_sum));
        r.ensemble.crps.push_back(crps / w_sum);
        r.ensemble.fair_crps.push_back(fair / w_sum);
        r.acc.push_back(xy / std::sqrt(xx * yy));
        (void)w_acc;
    }
    return r;
}

std::vector<std::vector<double>> rows(const Results& r) {
    return {r.ensemble.ensemble_mean_rmse, r.ensemble.spread,
            r.ensemble.spread_skill_ratio, r.ensemble.crps,
            r.ensemble.fair_crps,          r.acc};
}

TEST(Ensemble, ScoresAreTheSerialBitsAndTheFormulas) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const char* names[] = {"ensemble_mean_rmse", "spread", "spread_skill_ratio", "crps", "fair_crps", "acc"};
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape grid : {GridShape{9, 14}, GridShape{11, 8}}) {
            for (std::int64_t members : {2, 5}) {
                const EnsembleCase k = make_case(grid, members, 2);
                const auto distributed = rows(compute(mesh, k, rule));
                const auto serial = rows(compute(alone, k, rule));
                const auto want = rows(reference(k));
                for (std::size_t s = 0; s < distributed.size(); ++s) {
                    for (std::size_t c = 0; c < distributed[s].size(); ++c) {
                        const std::string what = std::string(names[s]) + " channel " + std::to_string(c) + " members " +
                                                 std::to_string(members) + " grid " + std::to_string(grid.nlat) + "x" +
                                                 std::to_string(grid.nlon);
                        EXPECT_EQ(std::bit_cast<std::uint64_t>(distributed[s][c]),
                                  std::bit_cast<std::uint64_t>(serial[s][c]))
                            << what << ": " << distributed[s][c] << " vs serial " << serial[s][c];
                        EXPECT_NEAR(serial[s][c], want[s][c], 1e-12 * std::abs(want[s][c]) + 1e-14) << what;
                    }
                }
            }
        }
    }
}

// The members split over the data group (each data rank its block, some none when there are more data ranks
// than members) give the bits of the ensemble held on one rank.
TEST(Ensemble, MembersSplitOverTheDataGroupGiveTheSameBits) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (std::int64_t members : {2, 3, 7}) {
            const EnsembleCase k = make_case({9, 14}, members, 2);
            const ShardedGrid g(mesh, k.grid, rule);
            const auto t = shard_of(k.truth, k.grid, g.box(), k.channels);
            const auto x = shard_of(k.members_all, k.grid, g.box(), k.members * k.channels);
            const auto w = shard_of(k.weights, k.grid, g.box(), 1);
            const Range mine = data_block(members, mesh.shape().data, mesh.coords().data, true);
            const auto plane = static_cast<std::ptrdiff_t>(t.size());
            const std::vector<float> my_members(x.begin() + mine.begin * plane, x.begin() + mine.end * plane);
            const EnsembleScores split =
                ensemble_scores_over_data<float>(g, {t, k.channels}, {my_members, mine.size(), k.channels}, {w, true});
            const EnsembleScores whole = compute(alone, k, rule).ensemble;
            const std::vector<double>* got[] = {&split.ensemble_mean_rmse, &split.spread, &split.spread_skill_ratio,
                                                &split.crps, &split.fair_crps};
            const std::vector<double>* want[] = {&whole.ensemble_mean_rmse, &whole.spread, &whole.spread_skill_ratio,
                                                 &whole.crps, &whole.fair_crps};
            for (std::size_t s = 0; s < 5; ++s) {
                ASSERT_EQ(got[s]->size(), want[s]->size());
                for (std::size_t c = 0; c < got[s]->size(); ++c) {
                    EXPECT_EQ(std::bit_cast<std::uint64_t>((*got[s])[c]), std::bit_cast<std::uint64_t>((*want[s])[c]))
                        << "score " << s << " channel " << c << " members " << members;
                }
            }
        }
    }
}

TEST(Ensemble, TransposeOverDataMovesEveryRowToItsColumns) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const int d = mesh.coords().data;
    const std::int64_t columns = 11;
    const std::int64_t rows = d % 3;  // 0, 1 or 2 rows: some ranks hold none
    std::vector<std::int64_t> local;
    std::int64_t before = 0;  // the rows of the lower data ranks
    for (int k = 0; k < d; ++k) {
        before += k % 3;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < columns; ++c) {
            local.push_back(1000 * (before + r) + c);
        }
    }
    std::int64_t total = 0;
    const std::vector<std::int64_t> out = transpose_over_data<std::int64_t>(mesh, local, rows, columns, total);
    std::int64_t expected_total = 0;
    for (int k = 0; k < mesh.shape().data; ++k) {
        expected_total += k % 3;
    }
    EXPECT_EQ(total, expected_total);
    const Range block = data_block(columns, mesh.shape().data, d, true);
    ASSERT_EQ(out.size(), static_cast<std::size_t>(total * block.size()));
    for (std::int64_t r = 0; r < total; ++r) {
        for (std::int64_t c = 0; c < block.size(); ++c) {
            EXPECT_EQ(out[static_cast<std::size_t>(r * block.size() + c)], 1000 * r + block.begin + c);
        }
    }
}

TEST(Ensemble, OneMemberIsAnArgumentErrorOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const ShardedGrid g(mesh, {9, 14});
    const std::vector<float> t(static_cast<std::size_t>(g.box().area()), 1.0F);
    const std::vector<double> w(static_cast<std::size_t>(g.box().lat.size()), 1.0);
    EXPECT_THROW((void)ensemble_scores<float>(g, {t, 1}, {t, 1, 1}, {w, false}), ArgumentError);
}

}  // namespace
}  // namespace gridshard
