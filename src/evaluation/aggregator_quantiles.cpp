// The run's exact quantiles in the Aggregator (AggregatorOptions::quantiles): every counted pair's values, per region
// and channel, into one QuantileStream (metrics/quantile.hpp) pass after pass, the pairs given again between passes.

#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard {

template <class T>
QuantileStream<T>& Aggregator::quantile_stream() {
    std::optional<QuantileStream<T>>& stream = [this]() -> std::optional<QuantileStream<T>>& {
        if constexpr (std::is_same_v<T, float>) {
            return float_quantiles_;
        } else {
            return double_quantiles_;
        }
    }();
    if (!stream) {
        const auto samples = static_cast<std::int64_t>(regions_.size()) * 2 * shape_.channels;
        stream.emplace(samples, options_.quantiles->probabilities, options_.quantiles->method);
    }
    return *stream;
}

template <class T>
void Aggregator::record_quantiles(std::int64_t lead, FieldShard<T> truth, std::span<const T> members) {
    if (!options_.quantiles || !counted_.at(static_cast<std::size_t>(lead))) {
        return;
    }
    // The truth once: by the data rank that holds member 0 (its only copy when the members are split).
    const bool with_truth = shape_.work.members.begin == 0;
    QuantileStream<T>& stream = quantile_stream<T>();
    const std::int64_t channels = shape_.channels;
    const auto area = static_cast<std::size_t>(grid_.box().area());
    const std::size_t held = area == 0 ? 0 : members.size() / (area * static_cast<std::size_t>(channels));
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        const std::optional<std::vector<std::int64_t>>& cells = regions_[r].cells;
        const auto add = [&](std::int64_t sample, std::span<const T> field) {
            if (cells) {
                stream.add(sample, field, std::span<const std::int64_t>(*cells));
            } else {
                stream.add(sample, field);
            }
        };
        for (std::int64_t c = 0; c < channels; ++c) {
            const auto truth_sample = (static_cast<std::int64_t>(r) * 2) * channels + c;
            const std::size_t at = static_cast<std::size_t>(c) * area;
            if (with_truth) {
                add(truth_sample, truth.values.subspan(at, area));
            }
            for (std::size_t m = 0; m < held; ++m) {
                add(truth_sample + channels, members.subspan(m * area * static_cast<std::size_t>(channels) + at, area));
            }
        }
    }
}

template <class T>
bool Aggregator::end_quantile_pass() {
    if (!options_.quantiles) {
        throw ArgumentError("end_quantile_pass: the aggregator forms no quantiles");
    }
    return quantile_stream<T>().end_pass(grid_.mesh().world());
}

template <class T>
void Aggregator::replay_quantiles(std::int64_t lead, FieldShard<T> truth, std::span<const T> members) {
    record_quantiles<T>(lead, truth, members);
}

void Aggregator::finish_quantiles(VariableScores& out) const {
    SampleQuantiles all;
    if (float_quantiles_) {
        all = float_quantiles_->result();  // ArgumentError while passes remain
    } else if (double_quantiles_) {
        all = double_quantiles_->result();
    } else {
        throw ArgumentError("quantiles: no pass over the values has ended (end_quantile_pass)");
    }
    const std::int64_t channels = shape_.channels;
    const auto samples = static_cast<std::size_t>(regions_.size()) * 2 * static_cast<std::size_t>(channels);
    const std::size_t probabilities = options_.quantiles->probabilities.size();
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::size_t truth = r * 2 * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c);
            const std::size_t prediction = truth + static_cast<std::size_t>(channels);
            RegionQuantiles q{.truth_count = all.counts[truth], .prediction_count = all.counts[prediction]};
            for (std::size_t k = 0; k < probabilities; ++k) {
                q.truth.push_back(all.values[k * samples + truth]);
                q.prediction.push_back(all.values[k * samples + prediction]);
            }
            out[static_cast<std::size_t>(c)].regions[r].quantiles = std::move(q);
        }
    }
}

template bool Aggregator::end_quantile_pass<float>();
template bool Aggregator::end_quantile_pass<double>();
template void Aggregator::replay_quantiles<float>(std::int64_t, FieldShard<float>, std::span<const float>);
template void Aggregator::replay_quantiles<double>(std::int64_t, FieldShard<double>, std::span<const double>);
template void Aggregator::record_quantiles<float>(std::int64_t, FieldShard<float>, std::span<const float>);
template void Aggregator::record_quantiles<double>(std::int64_t, FieldShard<double>, std::span<const double>);

}  // namespace gridshard
