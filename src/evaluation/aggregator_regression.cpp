// ACE's ENSO coefficient in the Aggregator (AggregatorOptions::index_regression): per counted pair its values weighted
// by the index over the sample's sum of its squares, summed exactly per cell (a TrendAccumulator's sum of t y), and at
// finish the mean over the covered samples of the per-sample coefficients and the RMSE of the maps.

#include <cmath>
#include <limits>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {

void Aggregator::start_index_regression() {
    const ForecastExtent& e = shape_.extent;
    const std::vector<double>& index = options_.index_regression->index;
    if (static_cast<std::int64_t>(index.size()) != e.initial_conditions * e.lead_times) {
        throw ArgumentError(setting_name("enso_coefficient") + ": the index has " + std::to_string(index.size()) +
                            " values, not one per (initial condition, lead time): " +
                            std::to_string(e.initial_conditions) + " x " + std::to_string(e.lead_times));
    }
    regression_prediction_.emplace(grid_, shape_.channels, TrendSums::weighted_sums);  // no slopes: no sums of y
    regression_truth_.emplace(grid_, shape_.channels, TrendSums::weighted_sums);
    // ACE's sum_t w^2 of a sample over its recorded forward steps: the counted lead times; NaN where not covered.
    index_variance_.assign(static_cast<std::size_t>(e.initial_conditions), 0.0);
    for (std::int64_t ic = 0; ic < e.initial_conditions; ++ic) {
        double& variance = index_variance_[static_cast<std::size_t>(ic)];
        for (const std::int64_t lead : options_.counted_leads) {
            const double w = index[static_cast<std::size_t>(ic * e.lead_times + lead)];
            variance += w * w;
        }
    }
}

template <class T>
void Aggregator::record_index_regression(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                         std::span<const T> members, bool with_truth) {
    const double variance = index_variance_[static_cast<std::size_t>(initial_condition)];
    const double w =
        options_.index_regression->index[static_cast<std::size_t>(initial_condition * shape_.extent.lead_times + lead)];
    if (!std::isfinite(w) || !(variance > 0.0)) {
        return;  // an initial condition the index does not cover
    }
    const double weight = w / variance;
    if (with_truth) {
        regression_truth_->add<T>(weight, truth.values);
    }
    regression_prediction_->add<T>(weight, members);  // the members held, at once
}

void Aggregator::finish_index_regression(VariableScores& out) {
    regression_prediction_->merge_over_data();  // collective over data: every counted pair added once
    regression_truth_->merge_over_data();
    // The covered initial conditions, as the ranks that hold them see their rows (collective over data).
    std::vector<std::int64_t> covered(index_variance_.size(), 0);
    for (std::int64_t ic = shape_.work.initial_conditions.begin; ic < shape_.work.initial_conditions.end; ++ic) {
        covered[static_cast<std::size_t>(ic)] = index_variance_[static_cast<std::size_t>(ic)] > 0.0 ? 1 : 0;
    }
    reduce_max<std::int64_t>(grid_.mesh(), covered);
    std::int64_t samples = 0;
    for (const std::int64_t c : covered) {
        samples += c;
    }
    std::vector<double> gen = regression_prediction_->weighted_sums();
    std::vector<double> target = regression_truth_->weighted_sums();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (double& v : gen) {
        v = samples == 0 ? nan : v / static_cast<double>(samples * shape_.extent.members);
    }
    for (double& v : target) {
        v = samples == 0 ? nan : v / static_cast<double>(samples);
    }
    // ACE's area-weighted RMSE of the prediction's coefficients against the truth's, and the maps (collective over
    // the world)
    finish_compared_maps<IndexRegressionValue>(out, gen, target, &ChannelScores::index_regression_prediction_map,
                                               &ChannelScores::index_regression_truth_map);
}

template void Aggregator::record_index_regression<float>(std::int64_t, std::int64_t, FieldShard<float>,
                                                         std::span<const float>, bool);
template void Aggregator::record_index_regression<double>(std::int64_t, std::int64_t, FieldShard<double>,
                                                          std::span<const double>, bool);

}  // namespace gridshard
