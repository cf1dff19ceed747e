// ACE's trend metric (AggregatorOptions::trend): the counted pairs' times, their fields into a TrendAccumulator
// (metrics/trend.hpp) each, and at finish the slopes per year, their RMSE and maps.

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

void Aggregator::record_time(std::int64_t initial_condition, std::int64_t lead, double seconds) {
    const ForecastExtent& e = shape_.extent;
    if (!options_.trend) {
        throw ArgumentError("record_time: the aggregator forms no trend (" + setting_name("trend") + ")");
    }
    if (initial_condition < 0 || initial_condition >= e.initial_conditions || lead < 0 || lead >= e.lead_times) {
        throw ArgumentError("record_time: (initial condition " + std::to_string(initial_condition) + ", lead " +
                            std::to_string(lead) + ") is outside " + std::to_string(e.initial_conditions) + " x " +
                            std::to_string(e.lead_times));
    }
    if (!std::isfinite(seconds)) {
        throw ArgumentError(setting_name("trend") + ": the time of initial condition " +
                            std::to_string(initial_condition) + ", lead " + std::to_string(lead) +
                            " is not finite: " + std::to_string(seconds));
    }
    pair_times_[static_cast<std::size_t>(initial_condition * e.lead_times + lead)] = seconds;
}

template <class T>
void Aggregator::record_trend(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                              std::span<const T> members, bool with_truth) {
    const double t = pair_times_[static_cast<std::size_t>(initial_condition * shape_.extent.lead_times + lead)];
    if (std::isnan(t)) {
        throw ArgumentError(setting_name("trend") + ": no time was given for initial condition " +
                            std::to_string(initial_condition) + ", lead " + std::to_string(lead) +
                            " (record_time, before the pair)");
    }
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
