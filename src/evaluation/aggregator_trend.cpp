// ACE's trend metric (AggregatorOptions::trend): the counted pairs' fields at their times (record_time,
// aggregator_calendar.cpp) into a TrendAccumulator (metrics/trend.hpp) each, and at finish the slopes per year, their
// RMSE and maps.

#include <cmath>
#include <limits>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {
namespace {

/// ACE's year (fme's trend.py: a Julian year whatever the calendar), in seconds: the slopes are per this year.
constexpr double seconds_per_year = 365.25 * 24 * 60 * 60;

}  // namespace

template <class T>
void Aggregator::record_trend(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                              std::span<const T> members, bool with_truth) {
    const double t = time_of(initial_condition, lead, "trend").seconds;
    if (with_truth) {
        trend_truth_->add<T>(t, truth.values);
    }
    trend_prediction_->add<T>(t, members);  // the members held, at once (none: nothing)
}

void Aggregator::finish_trend(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    trend_prediction_->merge_over_data();  // collective over data: every counted pair added once
    trend_truth_->merge_over_data();
    const std::vector<double> gen = trend_prediction_->slopes(seconds_per_year);
    const std::vector<double> target = trend_truth_->slopes(seconds_per_year);
    // The area-weighted RMSE of the prediction's slopes against the truth's over the points the policy counts (the
    // library's masked_rmse; collective over spatial).
    const std::vector<double> rmse =
        masked_rmse<double>(grid_, FieldShard<double>{target, channels}, FieldShard<double>{gen, channels},
                            regions_.front().weights.view(), options_.policy, options_.summation);
    for (std::int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<std::size_t>(c);
        for (const RegisteredScore* s : scores_) {
            if (std::holds_alternative<TrendValue>(s->source)) {
                out[k].regions.front().time_means.push_back({s, rmse[k]});
            }
        }
    }
    std::vector<std::vector<double>> gen_maps = held_maps(gen);  // collective over the world
    std::vector<std::vector<double>> target_maps = held_maps(target);
    for (std::int64_t c = 0; c < channels; ++c) {
        out[static_cast<std::size_t>(c)].trend_prediction_map = std::move(gen_maps[static_cast<std::size_t>(c)]);
        out[static_cast<std::size_t>(c)].trend_truth_map = std::move(target_maps[static_cast<std::size_t>(c)]);
    }
}

template void Aggregator::record_trend<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                              bool);
template void Aggregator::record_trend<double>(std::int64_t, std::int64_t, FieldShard<double>, std::span<const double>,
                                               bool);

}  // namespace gridshard
