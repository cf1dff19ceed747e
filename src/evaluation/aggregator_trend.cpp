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
    trend_prediction_->merge_over_data();  // collective over data: every counted pair added once
    trend_truth_->merge_over_data();
    const std::vector<double> gen = trend_prediction_->slopes(seconds_per_year);
    const std::vector<double> target = trend_truth_->slopes(seconds_per_year);
    finish_compared_maps<TrendValue>(out, gen, target, &ChannelScores::trend_prediction_map,
                                     &ChannelScores::trend_truth_map);  // collective over the world
}

template void Aggregator::record_trend<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                              bool);
template void Aggregator::record_trend<double>(std::int64_t, std::int64_t, FieldShard<double>, std::span<const double>,
                                               bool);

}  // namespace gridshard
