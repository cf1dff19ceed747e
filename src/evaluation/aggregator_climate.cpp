// ACE's climate families in the Aggregator: their sums made, a counted pair recorded and the results finished, each
// family's own work in its file (aggregator_near_zero.cpp, aggregator_trend.cpp, aggregator_video.cpp,
// aggregator_calendar.cpp, ...).

#include <algorithm>
#include <limits>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard {

void check_variable_names(const std::string& setting, const std::string& field, const std::vector<std::string>& names,
                          const std::vector<std::string>& scored) {
    std::string known;
    for (const std::string& name : scored) {
        known += (known.empty() ? "" : ", ") + name;
    }
    for (auto it = names.begin(); it != names.end(); ++it) {
        if (std::find(scored.begin(), scored.end(), *it) == scored.end()) {
            throw ArgumentError(setting_name(setting) + ": " + field + " names '" + *it +
                                "', which is not a scored variable (" + known + ")");
        }
        if (std::find(names.begin(), it, *it) != it) {
            throw ArgumentError(setting_name(setting) + ": " + field + " names '" + *it + "' twice");
        }
    }
}

void Aggregator::start_climate_families() {
    const ForecastExtent& e = shape_.extent;
    const std::int64_t channels = shape_.channels;
    if (options_.near_zero_fraction) {
        near_zero_prediction_.emplace(grid_, channels);
        near_zero_truth_.emplace(grid_, channels);
    }
    if (needs_times()) {
        pair_times_.assign(static_cast<std::size_t>(e.initial_conditions * e.lead_times), ValidTime{});
    }
    if (options_.trend) {
        trend_prediction_.emplace(grid_, channels);
        trend_truth_.emplace(grid_, channels);
    }
    if (options_.video) {
        video_prediction_.resize(static_cast<std::size_t>(e.lead_times));
        video_truth_.resize(static_cast<std::size_t>(e.lead_times));
        for (const std::int64_t row : options_.counted_leads) {
            video_prediction_[static_cast<std::size_t>(row)].emplace(grid_, channels);
            video_truth_[static_cast<std::size_t>(row)].emplace(grid_, channels);
        }
    }
    if (options_.extended_video) {
        extended_video_.resize(static_cast<std::size_t>(e.lead_times));
        const auto plane = static_cast<std::size_t>(channels * grid_.box().area());
        for (const std::int64_t row : options_.counted_leads) {
            extended_video_[static_cast<std::size_t>(row)].emplace(
                ExtendedVideoSums{.squared_error = TimeMeanAccumulator(grid_, channels),
                                  .prediction_squares = TimeMeanAccumulator(grid_, channels),
                                  .truth_squares = TimeMeanAccumulator(grid_, channels),
                                  .min_error = std::vector<double>(plane, std::numeric_limits<double>::infinity()),
                                  .max_error = std::vector<double>(plane, -std::numeric_limits<double>::infinity())});
        }
    }
    if (options_.regional_index) {
        index_prediction_values_.assign(
            static_cast<std::size_t>(e.initial_conditions * e.members * e.lead_times * channels), 0.0);
        index_truth_values_.assign(static_cast<std::size_t>(e.initial_conditions * e.lead_times * channels), 0.0);
    }
    if (options_.index_regression) {
        start_index_regression();
    }
    if (options_.tripole_index) {
        tripole_prediction_values_.assign(
            static_cast<std::size_t>(e.initial_conditions * e.members * e.lead_times * channels * 3), 0.0);
        tripole_truth_values_.assign(static_cast<std::size_t>(e.initial_conditions * e.lead_times * channels * 3), 0.0);
    }
    if (options_.histogram) {
        const auto bins = static_cast<std::size_t>(options_.histogram->bins);
        for (std::int64_t k = 0; k < 2 * channels; ++k) {
            WindowHistogram& h =
                histograms_.emplace_back(WindowHistogram{.committed = DynamicHistogram(options_.histogram->bins)});
            h.window_counts.assign(bins, 0);
        }
        histogram_mask_.assign(static_cast<std::size_t>(channels * grid_.box().area()), 0);
    }
    for (std::size_t season = 0; season < season_names.size() && options_.seasonal; ++season) {
        seasonal_prediction_.emplace_back(grid_, channels);
        seasonal_truth_.emplace_back(grid_, channels);
    }
}

template <class T>
void Aggregator::record_climate_families(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                         std::span<const T> members) {
    const bool with_truth = shape_.work.members.begin == 0;
    if (options_.near_zero_fraction) {
        record_near_zero<T>(truth, members, with_truth);
    }
    if (options_.trend) {
        record_trend<T>(initial_condition, lead, truth, members, with_truth);
    }
    // ACE's video and seasonal means: the members' exact sum formed once for both (add_fields_to), and the truth's
    // sums. ACE's video averages the target over its samples, which repeat it per member: the truth counts once per
    // initial condition, so its mean is ACE's (its seasonal means alike).
    TimeMeanAccumulator* prediction_sums[2];
    TimeMeanAccumulator* truth_sums[2];
    std::size_t held = 0;
    if (options_.video) {
        prediction_sums[held] = &*video_prediction_[static_cast<std::size_t>(lead)];
        truth_sums[held++] = &*video_truth_[static_cast<std::size_t>(lead)];
    }
    if (options_.seasonal) {
        const auto season = static_cast<std::size_t>(season_of(time_of(initial_condition, lead, "seasonal").month));
        prediction_sums[held] = &seasonal_prediction_[season];
        truth_sums[held++] = &seasonal_truth_[season];
    }
    add_fields_to<T>(std::span(prediction_sums, held), members);  // every member held at once
    if (with_truth) {
        add_fields_to<T>(std::span(truth_sums, held), truth.values);
    }
    if (options_.extended_video) {
        record_extended_video<T>(lead, truth, members, with_truth);
    }
    if (options_.regional_index) {
        record_index<T>(initial_condition, lead, truth, members, with_truth);  // collective over spatial
    }
    if (options_.histogram) {
        ++histogram_window_pairs_;  // a replay of the pair is not counted again
        record_histogram<T>(initial_condition, lead, truth, members, with_truth);
    }
    if (options_.index_regression) {
        record_index_regression<T>(initial_condition, lead, truth, members, with_truth);
    }
    if (options_.tripole_index) {
        record_tripole<T>(initial_condition, lead, truth, members, with_truth);  // collective over spatial
    }
}

void Aggregator::finish_climate_families(VariableScores& out) {
    if (options_.near_zero_fraction) {
        finish_near_zero(out);
    }
    if (options_.trend) {
        finish_trend(out);
    }
    if (options_.video) {
        finish_video(out);
    }
    if (options_.annual || options_.regional_index || options_.tripole_index) {
        merge_times_over_data();
    }
    if (options_.annual) {
        finish_annual(out);  // from the per-sample global means, summed over the world already
    }
    if (options_.regional_index) {
        finish_index(out);
    }
    if (options_.seasonal) {
        finish_seasonal(out);
    }
    if (options_.histogram) {
        finish_histogram(out);
    }
    if (options_.index_regression) {
        finish_index_regression(out);
    }
    if (options_.tripole_index) {
        finish_tripole(out);
    }
}

template void Aggregator::record_climate_families<float>(std::int64_t, std::int64_t, FieldShard<float>,
                                                         std::span<const float>);
template void Aggregator::record_climate_families<double>(std::int64_t, std::int64_t, FieldShard<double>,
                                                          std::span<const double>);

}  // namespace gridshard
