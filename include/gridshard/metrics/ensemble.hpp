#pragma once
/// @file
/// Ensemble and anomaly scores on shards (docs/design.md §3), each the serial answer bit for bit whatever the
/// decomposition. The ensemble's members are held together on each rank, or split over the data group
/// (ensemble_scores_over_data); a per-point statistic over the
/// members is formed in double at every point of the rank's box, then averaged over the grid by the one
/// metrics engine, so one allreduce carries every score of a call.

#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// A rank's shard of an ensemble: `members` fields of `channels` planes of the rank's box, laid out
/// `(members, channels, rows, cols)`, member slowest. Non-owning.
template <FieldValue T>
struct EnsembleShard {
    std::span<const T> values;
    std::int64_t members = 1;
    std::int64_t channels = 1;
};

/// The ensemble scores of a set of channels, one value per channel each. With truth y, members x_1..x_M,
/// ensemble mean xbar and area weights a normalised over the valid points:
///   ensemble_mean_rmse = sqrt(wmean((xbar - y)^2));
///   spread = sqrt(wmean(var_m(x))), var_m the unbiased variance over members (M - 1);
///   spread_skill_ratio = spread / ensemble_mean_rmse;
///   crps = wmean(mean_m |x_m - y| - sum_{m,k} |x_m - x_k| / (2 M^2));
///   fair_crps = wmean(mean_m |x_m - y| - sum_{m,k} |x_m - x_k| / (2 M (M - 1))).
/// A point is valid when its weight is non-zero and the truth and every member are finite.
struct EnsembleScores {
    std::vector<double> ensemble_mean_rmse;
    std::vector<double> spread;
    std::vector<double> spread_skill_ratio;
    std::vector<double> crps;
    std::vector<double> fair_crps;
    /// The weight of the points every score counts (the truth and every member finite), per channel: what a gradient
    /// of a score needs beside it.
    std::vector<double> weight;
};

/// Which scores of EnsembleScores a call forms; those left out stay empty and cost nothing: each per-point statistic
/// (the squared error of the ensemble mean; the variance; the CRPS, whose pair sum over the members, M (M - 1) / 2
/// differences per point, is the costly part, shared by both CRPS) and its sums in the allreduce. The spread-skill
/// ratio is formed when both of its parts are.
struct EnsembleSelection {
    bool ensemble_mean_rmse = true;
    bool spread = true;
    bool crps = true;
    bool fair_crps = true;
};

/// The scores of EnsembleScores `which` selects for `members` (M >= 2) against `truth`, each the same bits whatever
/// else is selected. Collective over `spatial`: one argument check, then one allreduce of 2 S C + 1 sums (S the
/// statistics selected, at most 4).
template <class T>
[[nodiscard]] EnsembleScores ensemble_scores(const ShardedGrid& grid, FieldShard<T> truth, EnsembleShard<T> members,
                                             Weights a, Summation summation = Summation::reproducible,
                                             EnsembleSelection which = {});

/// ensemble_scores of an ensemble whose members are split over the data group: each data rank holds the same
/// truth and its own block of members (data ranks in member order; a rank may hold none), and every rank gets
/// the scores of all members together, the same bits as ensemble_scores of all on one rank. Collective over
/// the spatial and data groups: one agreement over the world, then transpose_over_data of the members (each
/// data rank takes every member over 1/D of the box's points, (D - 1)/D of the members' values moving), then
/// one allreduce of 8C + 1 sums over `spatial` and one over `data`.
template <class T>
[[nodiscard]] EnsembleScores ensemble_scores_over_data(const ShardedGrid& grid, FieldShard<T> truth,
                                                       EnsembleShard<T> members, Weights a,
                                                       Summation summation = Summation::reproducible);

/// Per point of the rank's box and channel (laid out as the truth), in double: the squared error of the ensemble
/// mean (xbar - y)^2, the unbiased variance over the members var_m(x), and ACE's almost-fair CRPS
/// (fme.core.ensemble.get_crps) mean_m |x_m - y| - (1 - eps) sum_{m<k} |x_m - x_k| / (M (M - 1)) with
/// eps = (1 - alpha) / 2 (alpha = 1 is fair_crps), each NaN where the truth or a member is not finite: the
/// per-cell statistics that ACE's ensemble scores average over initial conditions before their area mean.
struct EnsemblePointStatistics {
    std::vector<double> squared_error;
    std::vector<double> variance;
    std::vector<double> almost_fair_crps;
};

/// EnsemblePointStatistics of `members` (M >= 2, held on this rank) against `truth`. No MPI calls; throws
/// ArgumentError for shapes that do not fit or alpha outside [0, 1].
template <class T>
[[nodiscard]] EnsemblePointStatistics ensemble_point_statistics(const ShardedGrid& grid, FieldShard<T> truth,
                                                                EnsembleShard<T> members, double alpha);

/// ACE's almost-fair CRPS (as EnsemblePointStatistics') of `truth.size()` cases from their `m` member values each
/// (member slowest: `members[j * cases + p]`), in double: NaN where the truth or a member is not finite; with one
/// member the pair term is 0 (fme's get_crps with n_ens == 1). No MPI calls; throws ArgumentError for sizes that do not
/// fit or alpha outside [0, 1].
[[nodiscard]] std::vector<double> almost_fair_crps_of(std::span<const double> truth, std::span<const double> members,
                                                      std::int64_t m, double alpha);

/// The uncentred anomaly correlation per channel, as WeatherBench 2 computes it:
/// `sum a x' y' / sqrt(sum a x'^2 * sum a y'^2)` with x' = prediction - climatology and y' = truth - climatology,
/// over the points where all three are finite and the weight is non-zero. Collective over `spatial`: one
/// argument check, then one allreduce of 3C + 1 sums.
template <class T>
[[nodiscard]] std::vector<double> anomaly_correlation(const ShardedGrid& grid, FieldShard<T> truth,
                                                      FieldShard<T> prediction, FieldShard<T> climatology, Weights a,
                                                      Summation summation = Summation::reproducible);

}  // namespace gridshard
