// ACE's video in the Aggregator (fme's VideoAggregator): per counted lead time the exact sums over samples of the
// prediction and of the truth and, with its extended videos, of the squared errors and the squares, and the least and
// greatest errors; at finish their maps, gathered one lead time and map at a time.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/square_sums.hpp"

namespace gridshard {

template <class T>
void Aggregator::record_extended_video(std::int64_t lead, FieldShard<T> truth, std::span<const T> members,
                                       bool with_truth) {
    ExtendedVideoSums& sums = *extended_video_[static_cast<std::size_t>(lead)];
    add_error_squares<T>(truth.values, members, sums.squared_error, sums.prediction_squares, sums.min_error,
                         sums.max_error);
    if (with_truth) {  // the truth once per initial condition
        add_squares<T>(truth.values, sums.truth_squares);
    }
}

void Aggregator::finish_video(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    const auto plane = static_cast<std::size_t>(channels * grid_.box().area());
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> missing(plane, nan);  // a lead time not counted
    for (ChannelScores& channel : out) {
        channel.has_video = true;
        channel.has_extended_video = options_.extended_video;
    }
    // One gather over the world per lead time and map: the writer holds one global map more at a time. Each video
    // is sized for every lead time at its first, so the maps are copied once.
    const std::size_t leads = video_prediction_.size();
    const auto hold = [&](const std::vector<double>& part, std::vector<double> ChannelScores::*field) {
        std::vector<std::vector<double>> maps = held_maps(part);
        for (std::int64_t c = 0; c < channels; ++c) {
            std::vector<double>& video = out[static_cast<std::size_t>(c)].*field;
            const std::vector<double>& map = maps[static_cast<std::size_t>(c)];
            if (video.empty()) {
                video.reserve(leads * map.size());
            }
            video.insert(video.end(), map.begin(), map.end());
        }
    };
    // Merged over data (collective over data: every counted pair added once), the mean of `sums` per point.
    const auto mean_of = [](TimeMeanAccumulator& sums) {
        sums.merge_over_data();
        return sums.mean_difference(ValidityPolicy::propagate);
    };
    for (std::size_t lead = 0; lead < video_prediction_.size(); ++lead) {
        const bool counted = video_prediction_[lead].has_value();
        const std::vector<double> prediction = counted ? mean_of(*video_prediction_[lead]) : missing;
        const std::vector<double> truth = counted ? mean_of(*video_truth_[lead]) : missing;
        hold(prediction, &ChannelScores::video_prediction);
        hold(truth, &ChannelScores::video_truth);
        if (!options_.extended_video) {
            continue;
        }
        // A lead time not counted: NaN, but the least and greatest errors over no sample are +inf and -inf (ACE's).
        std::vector<double> bias(plane), rmse = missing, ratio = missing;
        std::vector<double> least(plane, std::numeric_limits<double>::infinity());
        std::vector<double> greatest(plane, -std::numeric_limits<double>::infinity());
        for (std::size_t k = 0; k < plane; ++k) {
            bias[k] = prediction[k] - truth[k];
        }
        if (counted) {
            ExtendedVideoSums& sums = *extended_video_[lead];
            const std::vector<double> squared_error = mean_of(sums.squared_error);
            const std::vector<double> prediction_square = mean_of(sums.prediction_squares);
            const std::vector<double> truth_square = mean_of(sums.truth_squares);
            // The least and greatest errors over data: a NaN anywhere is NaN (its flag), the rest by one MIN of the
            // least and the negated greatest.
            std::vector<std::int32_t> not_a_number(plane);
            std::vector<double> extremes(2 * plane);  // the least, then minus the greatest
            for (std::size_t k = 0; k < plane; ++k) {
                not_a_number[k] = std::isnan(sums.min_error[k]) ? 1 : 0;
                extremes[k] = not_a_number[k] != 0 ? std::numeric_limits<double>::infinity() : sums.min_error[k];
                extremes[plane + k] =
                    not_a_number[k] != 0 ? std::numeric_limits<double>::infinity() : -sums.max_error[k];
            }
            reduce_max<std::int32_t>(grid_.mesh(), not_a_number);
            reduce_min<double>(grid_.mesh(), extremes);
            for (std::size_t k = 0; k < plane; ++k) {
                least[k] = not_a_number[k] != 0 ? nan : extremes[k];
                greatest[k] = not_a_number[k] != 0 ? nan : -extremes[plane + k];
                rmse[k] = std::sqrt(squared_error[k]);
                // ACE's gen_var: each field's E[x^2] - E[x]^2, their ratio
                ratio[k] =
                    (prediction_square[k] - prediction[k] * prediction[k]) / (truth_square[k] - truth[k] * truth[k]);
            }
        }
        hold(bias, &ChannelScores::video_bias);
        hold(rmse, &ChannelScores::video_rmse);
        hold(least, &ChannelScores::video_min_error);
        hold(greatest, &ChannelScores::video_max_error);
        hold(ratio, &ChannelScores::video_variance_ratio);
    }
}

template void Aggregator::record_extended_video<float>(std::int64_t, FieldShard<float>, std::span<const float>, bool);
template void Aggregator::record_extended_video<double>(std::int64_t, FieldShard<double>, std::span<const double>,
                                                        bool);

}  // namespace gridshard
