#pragma once
/// @file
/// The fused evaluation: every score of a prediction against the truth in one pass over memory, one
/// halo exchange and one allreduce. The command-line tool's `eval` uses it.
///
/// @code
///   gridshard::Scores score(const gridshard::ShardedGrid& grid, std::int64_t channels,
///                           const gridshard::AreaWeights& weights, const std::vector<float>& truth,
///                           const std::vector<float>& prediction) {
///       gridshard::Evaluator evaluator(grid, channels, weights.view());
///       return evaluator.evaluate(gridshard::FieldShard<float>{truth, channels},
///                                 gridshard::FieldShard<float>{prediction, channels});
///   }
/// @endcode

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/scores.hpp"
#include "gridshard/metrics/terms.hpp"

namespace gridshard {

struct EvaluationOptions {
    Summation summation = Summation::reproducible;
    /// Which points count: by default those finite in both truth and prediction, of non-zero weight.
    ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    /// Compute grad_mag_percent_diff (needs a one-cell halo exchange).
    bool gradient = true;
    GradientOptions gradient_options{};
    /// The scores to finalize, in order (see metrics/scores.hpp); each is a finalizer over the same sums.
    std::vector<ScoreDefinition> scores = evaluation_scores();
};

/// Seconds one Evaluator spent on this rank, added up over its calls, by phase (MPI_Wtime): the argument
/// agreement (a 24-byte allreduce, which also waits for the slowest rank of the group), the halo exchange,
/// forming the terms (the one pass over memory), and the allreduce of the sums with the finalizers.
struct EvaluationTimings {
    double agreement_s = 0.0;
    double halo_s = 0.0;
    double compute_s = 0.0;
    double allreduce_s = 0.0;
    double zonal_s = 0.0;  ///< evaluate_with_zonal_means's zonal means
    std::int64_t calls = 0;
};

namespace detail {
struct RowValueSums;  // a pair of rows' sums, handed from the scores' pass to the zonal means (src/metrics)
}

/// evaluate_with_zonal_means's result.
struct ScoresAndZonalMeans {
    Scores scores;
    std::vector<double> truth_zonal_means;       ///< zonal_mean(truth)'s, bit for bit
    std::vector<double> prediction_zonal_means;  ///< zonal_mean(prediction)'s, bit for bit
};

/// Computes the registered scores (EvaluationOptions::scores, by default evaluation_scores(), under
/// EvaluationOptions::policy: by default a point counts when truth and prediction are both finite and its
/// weight non-zero, and a gradient term when both magnitudes are; NaN where a channel has no such point) for
/// fields of `channels` channels on `grid`; reusable for any number of fields (it keeps its halo buffers
/// between calls, so one Evaluator serves one caller at a time). Keeps its own copies of the grid and the
/// weights, so it may outlive both. Move-only.
class Evaluator {
  public:
    /// No MPI calls. A bad channel count is raised by evaluate(), alike on every rank.
    Evaluator(const ShardedGrid& grid, std::int64_t channels, Weights weights, EvaluationOptions options = {});
    Evaluator(Evaluator&&) noexcept = default;
    Evaluator& operator=(Evaluator&&) noexcept = default;
    Evaluator(const Evaluator&) = delete;
    Evaluator& operator=(const Evaluator&) = delete;

    /// Collective over `spatial`: one 24-byte argument check (the halo exchange's folded in), one halo
    /// exchange carrying both fields (2 x channels x perimeter values, when the gradient is on), then one
    /// allreduce of the scores' terms: with the default scores and policy 9 exact sums per channel plus
    /// one (1,144 bytes each, so about 10.3 KB per channel; with Summation::fast 72 bytes per channel
    /// plus 8). Every spatial rank holds the scores.
    template <class T>
    [[nodiscard]] Scores evaluate(FieldShard<T> truth, FieldShard<T> prediction);

    /// evaluate() and the zonal means of both fields (zonal_means of {truth, prediction}, with the `summation` of
    /// the options), the same bits as the two calls. With exact sums, each pair of rows the scores' pass sums on
    /// its fixed-point path with every point valid hands its sums over, so the zonal means do not read those rows
    /// again. Collective over `spatial` as evaluate(), then over `lon` as zonal_means.
    template <class T>
    [[nodiscard]] ScoresAndZonalMeans evaluate_with_zonal_means(FieldShard<T> truth, FieldShard<T> prediction);

    /// The time this Evaluator's calls took on this rank, by phase. No MPI calls.
    [[nodiscard]] const EvaluationTimings& timings() const noexcept { return timings_; }

  private:
    template <class T>
    HaloBuffers<T>& halo_buffers();
    // evaluate(), the rows' value sums handed over to `row_sums` (one per (channel, row)) when it is not null.
    template <class T>
    Scores evaluate_rows(FieldShard<T> truth, FieldShard<T> prediction, detail::RowValueSums* row_sums);

    ShardedGrid grid_;
    std::int64_t channels_;
    std::vector<double> weight_values_;  // the caller's weights, copied; weights_ views them
    Weights weights_;
    EvaluationOptions options_;
    TermSet terms_;  // what the scores need, under the policy
    std::optional<HaloBuffers<float>> float_halo_;
    std::optional<HaloBuffers<double>> double_halo_;
    std::string construction_error_;  // raised by evaluate() on every rank alike
    EvaluationTimings timings_;
};

}  // namespace gridshard
