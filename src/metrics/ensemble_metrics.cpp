// The ensemble and anomaly scores: a per-point statistic formed in double at each point of the box (the same
// arithmetic on every rank, so the same bits for any decomposition), then the engine's exact weighted means.

#include "gridshard/metrics/ensemble.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"
#include "gridshard/comm/collectives.hpp"
#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

std::string ensemble_error(std::int64_t truth_channels, std::int64_t truth_size, std::int64_t members,
                           std::int64_t channels, std::int64_t member_size, std::int64_t area) {
    if (members < 2) {
        return "members: an ensemble needs at least 2 members, got " + std::to_string(members);
    }
    if (channels != truth_channels) {
        return "members: " + std::to_string(channels) + " channels, the truth has " + std::to_string(truth_channels);
    }
    if (member_size != members * channels * area || truth_size != channels * area) {
        return "members: " + std::to_string(member_size) + " values for (members=" + std::to_string(members) +
               ", channels=" + std::to_string(channels) + ", box of " + std::to_string(area) + " points), truth " +
               std::to_string(truth_size);
    }
    return {};
}

// The statistics of a block of `n` <= statistics_block points from their `m` member values (x, member
// slowest, `n` per member) and truth (y), in double: the squared error of the ensemble mean, the unbiased
// variance, the two CRPS and the almost-fair CRPS whose pair term is the fair one's times `almost_fair_factor`
// (1 - (1 - alpha) / 2), with the pair sum sum_{j,k} |x_j - x_k| = 2 sum_{j<k} |x_j - x_k|. Each sum
// runs over the members in order for every point, and the loops run along the points, so they vectorise and
// a point's bits depend only on its own values. Invalid points come out as whatever their values give; the
// caller masks them.
constexpr std::int64_t statistics_block = 64;

GRIDSHARD_KERNEL void block_statistics(const double* __restrict x, const double* __restrict y, std::int64_t m,
                                       std::int64_t n, bool with_pairs, double almost_fair_factor,
                                       double* __restrict squared_error, double* __restrict variance,
                                       double* __restrict crps, double* __restrict fair_crps,
                                       double* __restrict almost_fair_crps) noexcept {
    double sum[statistics_block];
    double absolute[statistics_block];
    double squares[statistics_block];
    double pairs[statistics_block];
    for (std::int64_t p = 0; p < n; ++p) {
        sum[p] = 0.0;
        absolute[p] = 0.0;
        squares[p] = 0.0;
        pairs[p] = 0.0;
    }
    for (std::int64_t j = 0; j < m; ++j) {
        const double* xj = x + j * n;
        for (std::int64_t p = 0; p < n; ++p) {
            sum[p] += xj[p];
            absolute[p] += std::abs(xj[p] - y[p]);
        }
    }
    const auto members = static_cast<double>(m);
    for (std::int64_t p = 0; p < n; ++p) {
        sum[p] = sum[p] / members;  // the ensemble mean
    }
    for (std::int64_t j = 0; j < m; ++j) {
        const double* xj = x + j * n;
        for (std::int64_t p = 0; p < n; ++p) {
            squares[p] += (xj[p] - sum[p]) * (xj[p] - sum[p]);
        }
        for (std::int64_t k = j + 1; k < m && with_pairs; ++k) {  // without: the CRPS are not kept
            const double* xk = x + k * n;
            for (std::int64_t p = 0; p < n; ++p) {
                pairs[p] += std::abs(xj[p] - xk[p]);
            }
        }
    }
    // With one member there are no pairs: the fair pair terms are 0 (ACE's get_crps with n_ens == 1), not 0 / 0.
    const double fair_pairs = m > 1 ? 2.0 * members * (members - 1.0) : std::numeric_limits<double>::infinity();
    for (std::int64_t p = 0; p < n; ++p) {
        const double skill = absolute[p] / members;
        const double both_orders = 2.0 * pairs[p];
        squared_error[p] = (sum[p] - y[p]) * (sum[p] - y[p]);
        variance[p] = squares[p] / (members - 1.0);
        crps[p] = skill - both_orders / (2.0 * members * members);
        fair_crps[p] = skill - both_orders / fair_pairs;
        almost_fair_crps[p] = skill - almost_fair_factor * (both_orders / fair_pairs);
    }
}

// The members of a block as double, member slowest, and per point 0 when the truth and every member are
// finite, NaN otherwise (the sum of v - v, which is NaN for NaN or an infinity): branch-free, so it vectorises.
template <class T>
GRIDSHARD_KERNEL void load_block(const T* __restrict truth, const T* __restrict members, std::int64_t m,
                                 std::int64_t stride, std::int64_t n, double* __restrict x, double* __restrict y,
                                 double* __restrict invalid) noexcept {
    for (std::int64_t p = 0; p < n; ++p) {
        y[p] = static_cast<double>(truth[p]);
        invalid[p] = y[p] - y[p];
    }
    for (std::int64_t j = 0; j < m; ++j) {
        for (std::int64_t p = 0; p < n; ++p) {
            const double v = static_cast<double>(members[j * stride + p]);
            x[j * n + p] = v;
            invalid[p] += v - v;
        }
    }
}

// The statistics `kept` (indices in block_statistics' order: 0 squared error, 1 variance, 2 CRPS, 3 fair CRPS,
// 4 almost-fair CRPS) of points [begin, end) of the plane (channels x box), laid out (kept statistic, channel, rows,
// cols) in `derived`: NaN where a point is not valid (the truth or a member not finite) or outside the range, so that
// the skip_nan mean leaves it out of numerator and weight alike. `members` holds M values per point of the range,
// member slowest: members[j * stride + (k - begin)].
constexpr double fair = 1.0;  // the almost-fair factor of alpha = 1, when the almost-fair CRPS is not kept

template <class T>
void fill_statistics(std::span<const T> truth, const T* members, std::int64_t m, std::int64_t stride, Range points,
                     std::int64_t plane, std::vector<double>& derived, std::span<const std::int64_t> kept,
                     double almost_fair_factor = fair) {
    const bool with_pairs = std::any_of(kept.begin(), kept.end(), [](std::int64_t s) { return s >= 2; });
    // Blocks are independent, each point's arithmetic its own: the same bits for any thread count.
    const std::int64_t blocks = (points.size() + statistics_block - 1) / statistics_block;
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads_for(blocks, statistics_block * m))) {
        std::vector<double> x(static_cast<std::size_t>(m * statistics_block));
        double y[statistics_block];
        double invalid[statistics_block];
        double out[5][statistics_block];
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t first = points.begin + b * statistics_block;
            const std::int64_t n = std::min(statistics_block, points.end - first);
            load_block(truth.data() + first, members + (first - points.begin), m, stride, n, x.data(), y, invalid);
            block_statistics(x.data(), y, m, n, with_pairs, almost_fair_factor, out[0], out[1], out[2], out[3], out[4]);
            for (std::size_t s = 0; s < kept.size(); ++s) {
                double* to = derived.data() + static_cast<std::int64_t>(s) * plane + first;
                const double* from = out[kept[s]];
                for (std::int64_t p = 0; p < n; ++p) {
                    to[p] = invalid[p] == 0.0 ? from[p] : not_a_number;
                }
            }
        }
    }
}

// The block statistics `which` needs (indices as fill_statistics' `kept`), in order.
std::vector<std::int64_t> kept_statistics(EnsembleSelection which) {
    std::vector<std::int64_t> kept;
    const bool chosen[] = {which.ensemble_mean_rmse, which.spread, which.crps, which.fair_crps};
    for (std::int64_t s = 0; s < 4; ++s) {
        if (chosen[s]) {
            kept.push_back(s);
        }
    }
    return kept;
}

// The scores `which` selects from the derived statistics (kept_statistics(which), stacked): one allreduce of their
// exact weighted sums over `spatial` (and `also_over`), then the finalizers.
EnsembleScores finish_scores(const ShardedGrid& grid, const std::vector<double>& derived, std::int64_t channels,
                             Weights a, Summation summation, const std::string& error, EnsembleSelection which,
                             const Communicator* also_over = nullptr) {
    const std::vector<std::int64_t> kept = kept_statistics(which);
    const FieldShard<double> field{derived, static_cast<std::int64_t>(kept.size()) * channels};
    const ValidityPolicy policy = ValidityPolicy::skip_nan;
    const TermSums sums = accumulate_terms<double>(
        grid, field, nullptr, a, {weight_and(policy, {Term::truth}), policy, summation}, nullptr, error, also_over);
    // The mean of statistic `s` for channel `c`, from its place among the kept.
    const auto mean = [&](std::int64_t s, std::int64_t c) {
        const auto at = static_cast<std::int64_t>(std::find(kept.begin(), kept.end(), s) - kept.begin());
        return sums.mean(at * channels + c, Term::truth);
    };
    EnsembleScores scores;
    for (std::int64_t c = 0; c < channels; ++c) {
        if (which.ensemble_mean_rmse) {
            scores.ensemble_mean_rmse.push_back(std::sqrt(mean(0, c)));
        }
        if (which.spread) {
            scores.spread.push_back(std::sqrt(mean(1, c)));
        }
        if (which.ensemble_mean_rmse && which.spread) {
            scores.spread_skill_ratio.push_back(scores.spread.back() / scores.ensemble_mean_rmse.back());
        }
        if (which.crps) {
            scores.crps.push_back(mean(2, c));
        }
        if (which.fair_crps) {
            scores.fair_crps.push_back(mean(3, c));
        }
        if (!kept.empty()) {  // every statistic counts the same points
            scores.weight.push_back(sums.value(c, Term::weight).hi);
        }
    }
    return scores;
}

}  // namespace

template <class T>
EnsembleScores ensemble_scores(const ShardedGrid& grid, FieldShard<T> truth, EnsembleShard<T> members, Weights a,
                               Summation summation, EnsembleSelection which) {
    const std::int64_t area = grid.box().area();
    const std::int64_t channels = std::max<std::int64_t>(truth.channels, 0);
    const std::string error =
        ensemble_error(truth.channels, static_cast<std::int64_t>(truth.values.size()), members.members,
                       members.channels, static_cast<std::int64_t>(members.values.size()), area);
    const std::int64_t plane = channels * area;
    const std::vector<std::int64_t> kept = kept_statistics(which);
    std::vector<double> derived(kept.size() * static_cast<std::size_t>(plane), not_a_number);
    if (error.empty()) {
        fill_statistics(truth.values, members.values.data(), members.members, plane, {0, plane}, plane, derived, kept);
    }
    return finish_scores(grid, derived, channels, a, summation, error, which);
}

template <class T>
EnsembleScores ensemble_scores_over_data(const ShardedGrid& grid, FieldShard<T> truth, EnsembleShard<T> members,
                                         Weights a, Summation summation) {
    const ProcessMesh& mesh = grid.mesh();
    const std::int64_t area = grid.box().area();
    const std::int64_t channels = std::max<std::int64_t>(truth.channels, 0);
    const std::int64_t plane = channels * area;
    // This rank's members may be none; the ensemble is every data rank's together.
    std::string error;
    if (members.members < 0 || members.channels != truth.channels ||
        static_cast<std::int64_t>(truth.values.size()) != plane ||
        static_cast<std::int64_t>(members.values.size()) != members.members * plane) {
        error = "members: " + std::to_string(members.values.size()) +
                " values for (members=" + std::to_string(members.members) +
                ", channels=" + std::to_string(members.channels) + ", box of " + std::to_string(area) +
                " points), truth " + std::to_string(truth.values.size()) + " in " + std::to_string(truth.channels) +
                " channels";
    }
    agree_or_throw(mesh.world(), error, {channels}, "channels");
    std::int64_t total = 0;
    const std::vector<T> points = transpose_over_data<T>(mesh, members.values, members.members, plane, total);
    if (total < 2) {
        throw ArgumentError("members: an ensemble needs at least 2 members over the data group, got " +
                            std::to_string(total));
    }
    const Range mine = data_block(plane, mesh.shape().data, mesh.coords().data, true);
    const EnsembleSelection every{};
    const std::vector<std::int64_t> kept = kept_statistics(every);
    std::vector<double> derived(kept.size() * static_cast<std::size_t>(plane), not_a_number);
    fill_statistics(truth.values, points.data(), total, mine.size(), mine, plane, derived, kept);
    return finish_scores(grid, derived, channels, a, summation, "", every, &mesh.data());
}

template <class T>
EnsemblePointStatistics ensemble_point_statistics(const ShardedGrid& grid, FieldShard<T> truth,
                                                  EnsembleShard<T> members, double alpha) {
    const std::int64_t area = grid.box().area();
    const std::string error =
        ensemble_error(truth.channels, static_cast<std::int64_t>(truth.values.size()), members.members,
                       members.channels, static_cast<std::int64_t>(members.values.size()), area);
    if (!error.empty() || !(alpha >= 0.0 && alpha <= 1.0)) {
        throw ArgumentError(
            error.empty() ? "alpha: the almost-fair CRPS needs 0 <= alpha <= 1, got " + std::to_string(alpha) : error);
    }
    const std::int64_t plane = truth.channels * area;
    const std::int64_t kept[] = {0, 1, 4};  // the squared error, the variance, the almost-fair CRPS
    std::vector<double> derived(static_cast<std::size_t>(3 * plane), not_a_number);
    fill_statistics(truth.values, members.values.data(), members.members, plane, {0, plane}, plane, derived, kept,
                    1.0 - (1.0 - alpha) / 2.0);
    const auto statistic = [&](std::int64_t s) {
        const auto first = derived.begin() + static_cast<std::ptrdiff_t>(s * plane);
        return std::vector<double>(first, first + static_cast<std::ptrdiff_t>(plane));
    };
    return {statistic(0), statistic(1), statistic(2)};
}

std::vector<double> almost_fair_crps_of(std::span<const double> truth, std::span<const double> members, std::int64_t m,
                                        double alpha) {
    const auto n = static_cast<std::int64_t>(truth.size());
    if (m < 1 || static_cast<std::int64_t>(members.size()) != m * n || !(alpha >= 0.0 && alpha <= 1.0)) {
        throw ArgumentError("almost_fair_crps_of: " + std::to_string(members.size()) + " member values for " +
                            std::to_string(m) + " members of " + std::to_string(n) + " cases, alpha " +
                            std::to_string(alpha) + " (needs m >= 1, m * cases values, 0 <= alpha <= 1)");
    }
    const std::int64_t kept[] = {4};  // the almost-fair CRPS
    std::vector<double> derived(truth.size(), not_a_number);
    fill_statistics<double>(truth, members.data(), m, n, {0, n}, n, derived, kept, 1.0 - (1.0 - alpha) / 2.0);
    return derived;
}

template <class T>
std::vector<double> anomaly_correlation(const ShardedGrid& grid, FieldShard<T> truth, FieldShard<T> prediction,
                                        FieldShard<T> climatology, Weights a, Summation summation) {
    std::string error = pair_error(truth, prediction, grid.box());
    if (error.empty() && (climatology.channels != truth.channels || climatology.values.size() != truth.values.size())) {
        error = "climatology: " + std::to_string(climatology.values.size()) + " values in " +
                std::to_string(climatology.channels) + " channels, the truth has " +
                std::to_string(truth.values.size()) + " in " + std::to_string(truth.channels);
    }
    // The anomalies in double (exact for float fields), NaN where any of the three is not finite.
    const std::size_t n = error.empty() ? truth.values.size() : 0;
    std::vector<double> truth_anomaly(n);
    std::vector<double> prediction_anomaly(n);
    for (std::size_t k = 0; k < n; ++k) {
        const auto c = static_cast<double>(climatology.values[k]);
        const auto y = static_cast<double>(truth.values[k]);
        const auto x = static_cast<double>(prediction.values[k]);
        const bool finite = std::isfinite(c) && std::isfinite(y) && std::isfinite(x);
        truth_anomaly[k] = finite ? y - c : not_a_number;
        prediction_anomaly[k] = finite ? x - c : not_a_number;
    }
    const std::int64_t channels = error.empty() ? truth.channels : 0;
    const FieldShard<double> y_anomaly{truth_anomaly, channels};
    const FieldShard<double> x_anomaly{prediction_anomaly, channels};
    const ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    const TermSums sums = accumulate_terms<double>(
        grid, y_anomaly, &x_anomaly, a,
        {weight_and(policy, {Term::cross, Term::truth_square, Term::prediction_square}), policy, summation}, nullptr,
        error);
    return per_channel(sums, [&](std::int64_t c) {
        const double denominator =
            std::sqrt(sums.value(c, Term::truth_square).hi * sums.value(c, Term::prediction_square).hi);
        return denominator > 0.0 ? sums.value(c, Term::cross).hi / denominator : not_a_number;
    });
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                       \
    template EnsembleScores ensemble_scores<T>(const ShardedGrid&, FieldShard<T>, EnsembleShard<T>, Weights,           \
                                               Summation, EnsembleSelection);                                          \
    template EnsembleScores ensemble_scores_over_data<T>(const ShardedGrid&, FieldShard<T>, EnsembleShard<T>, Weights, \
                                                         Summation);                                                   \
    template EnsemblePointStatistics ensemble_point_statistics<T>(const ShardedGrid&, FieldShard<T>, EnsembleShard<T>, \
                                                                  double);                                             \
    template std::vector<double> anomaly_correlation<T>(const ShardedGrid&, FieldShard<T>, FieldShard<T>,              \
                                                        FieldShard<T>, Weights, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
