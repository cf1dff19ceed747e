// ACE's near-zero fractions (AggregatorOptions::near_zero_fraction): the config's rule, per-cell counts of the
// indicator (value <= eps) over the counted pairs, exact, and at finish the fractions.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {
namespace {

std::string threshold_text(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

}  // namespace

std::optional<NearZeroFractionOptions> NearZeroFractionConfig::options_for(const std::string& variable) const {
    if (!variables.empty() && std::find(variables.begin(), variables.end(), variable) == variables.end()) {
        return std::nullopt;
    }
    double threshold = eps;
    for (const auto& [name, value] : per_variable_eps) {
        if (name == variable) {
            threshold = value;
        }
    }
    if (!(threshold >= 0.0)) {  // NaN too: no value would be at or below it
        throw ArgumentError(setting_name("near_zero_fraction") + ": the threshold of '" + variable +
                            "' must be a number >= 0 (ACE's rule), got " + threshold_text(threshold));
    }
    return NearZeroFractionOptions{threshold, include_maps};
}

void NearZeroFractionConfig::check(const std::vector<std::string>& scored) const {
    check_variable_names("near_zero_fraction", "variables", variables, scored);
    std::vector<std::string> own;
    for (const auto& [name, value] : per_variable_eps) {
        own.push_back(name);
    }
    check_variable_names("near_zero_fraction", "per_variable_eps", own, scored);
    for (const std::string& name : scored) {
        (void)options_for(name);
    }
}

template <class T>
void Aggregator::record_near_zero(FieldShard<T> truth, std::span<const T> members, bool with_truth) {
    const double eps = options_.near_zero_fraction->eps;
    const std::size_t plane = truth.values.size();
    const std::size_t held = members.size() / (plane == 0 ? 1 : plane);
    near_zero_indicator_.resize(plane);
    const std::span<const double> counts[] = {near_zero_indicator_};
    if (with_truth) {
        for (std::size_t k = 0; k < plane; ++k) {
            near_zero_indicator_[k] = truth.values[k] <= eps ? 1.0 : 0.0;  // NaN is not at or below: 0, as ACE's
        }
        near_zero_truth_->add_steps(counts, 1);
    }
    if (held > 0) {  // per point how many of the members held are at or below: one add for them all
        std::fill(near_zero_indicator_.begin(), near_zero_indicator_.end(), 0.0);
        for (std::size_t m = 0; m < held; ++m) {
            const T* values = members.data() + m * plane;
            for (std::size_t k = 0; k < plane; ++k) {
                near_zero_indicator_[k] += values[k] <= eps ? 1.0 : 0.0;
            }
        }
        near_zero_prediction_->add_steps(counts, static_cast<std::int64_t>(held));
    }
}

void Aggregator::finish_near_zero(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    near_zero_prediction_->merge_over_data();  // collective over data: every counted pair added once
    near_zero_truth_->merge_over_data();
    const std::vector<double> prediction = near_zero_prediction_->mean_difference(ValidityPolicy::propagate);
    const std::vector<double> truth = near_zero_truth_->mean_difference(ValidityPolicy::propagate);
    // A snapshot's fraction is sum a [x <= eps] / sum a; their mean over the snapshots is the weighted mean of the
    // per-cell fractions (collective over spatial). No snapshot: NaN.
    const Weights w = regions_.front().weights.view();
    const auto fractions = [&](const std::vector<double>& cells, std::int64_t snapshots) {
        std::vector<double> values = weighted_mean(grid_, FieldShard<double>{cells, channels}, w, options_.summation);
        if (snapshots == 0) {
            values.assign(values.size(), std::numeric_limits<double>::quiet_NaN());
        }
        return values;
    };
    const std::vector<double> gen = fractions(prediction, near_zero_prediction_->steps());
    const std::vector<double> target = fractions(truth, near_zero_truth_->steps());
    for (std::int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<std::size_t>(c);
        RegionScores& global = out[k].regions.front();
        for (const RegisteredScore* s : scores_) {
            if (const auto* value = std::get_if<NearZeroValue>(&s->source)) {
                global.time_means.push_back({s, *value == NearZeroValue::prediction ? gen[k]
                                                : *value == NearZeroValue::truth    ? target[k]
                                                                                    : gen[k] - target[k]});
            }
        }
    }
    if (options_.near_zero_fraction->maps) {
        std::vector<std::vector<double>> gen_maps = held_maps(prediction);  // collective over the world
        std::vector<std::vector<double>> target_maps = held_maps(truth);
        for (std::int64_t c = 0; c < channels; ++c) {
            out[static_cast<std::size_t>(c)].near_zero_prediction_map =
                std::move(gen_maps[static_cast<std::size_t>(c)]);
            out[static_cast<std::size_t>(c)].near_zero_truth_map = std::move(target_maps[static_cast<std::size_t>(c)]);
        }
    }
}

template void Aggregator::record_near_zero<float>(FieldShard<float>, std::span<const float>, bool);
template void Aggregator::record_near_zero<double>(FieldShard<double>, std::span<const double>, bool);

}  // namespace gridshard
