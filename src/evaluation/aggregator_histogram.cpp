// ACE's histograms in the Aggregator (AggregatorOptions::histogram): per window the local range and counts of a
// counted pair's values at the points ACE's mask keeps, the window's range agreed over the world and ACE's edges
// taken from it (metrics/histogram.hpp), the window given again where its edges moved, and at finish the counts summed
// once and ACE's percentiles.

#include <algorithm>
#include <cmath>
#include <limits>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard {

template <class T>
void Aggregator::set_histogram_mask(FieldShard<T> truth) {
    if (!options_.histogram || histogram_mask_known_) {
        return;
    }
    for (std::size_t k = 0; k < histogram_mask_.size() && k < truth.values.size(); ++k) {
        histogram_mask_[k] = std::isnan(truth.values[k]) ? 1 : 0;
    }
    histogram_mask_known_ = true;
    histogram_phase_ = HistogramPhase::range;
}

template <class T>
void Aggregator::record_histogram(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                  std::span<const T> members, bool with_truth) {
    histogram_values_double_ = std::is_same_v<T, double>;
    if (histogram_phase_ == HistogramPhase::mask) {
        if (with_truth && std::pair{initial_condition, lead} == histogram_mask_pair()) {
            for (std::size_t k = 0; k < histogram_mask_.size(); ++k) {
                histogram_mask_[k] = std::isnan(truth.values[k]) ? 1 : 0;
            }
        }
        return;
    }
    const std::size_t plane = histogram_mask_.size();
    const auto channels = static_cast<std::size_t>(shape_.channels);
    const std::size_t area = plane / channels;
    const bool binning = histogram_phase_ == HistogramPhase::binning;
    // One field's values of channel c into histogram h: in the range phase its range, and its bins under the current
    // edges where there are some; in the binning phase its bins, where the histogram awaits them.
    const auto add = [&](const T* values, std::size_t c, WindowHistogram& h) {
        if (binning && !h.awaiting) {
            return;
        }
        const bool bin = binning || h.committed.has_edges();
        const std::uint8_t* left_out = histogram_mask_.data() + c * area;
        const T* field = values + c * area;
        for (std::size_t k = 0; k < area; ++k) {
            if (left_out[k] != 0) {
                continue;
            }
            const T x = field[k];
            if (!binning) {
                if (!std::isfinite(x)) {
                    h.not_finite = true;
                    continue;
                }
                h.lowest = std::min(h.lowest, static_cast<double>(x));
                h.highest = std::max(h.highest, static_cast<double>(x));
            }
            if (bin && std::isfinite(x)) {
                ++h.window_counts[h.committed.bin_of(x)];
            }
        }
    };
    const std::size_t held = plane == 0 ? 0 : members.size() / plane;
    for (std::size_t c = 0; c < channels; ++c) {
        if (with_truth) {
            add(truth.values.data(), c, histograms_[2 * c]);
        }
        for (std::size_t m = 0; m < held; ++m) {
            add(members.data() + m * plane, c, histograms_[2 * c + 1]);
        }
    }
}

template <class T>
void Aggregator::replay_histogram(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                  std::span<const T> members) {
    if (!options_.histogram || !counted_[static_cast<std::size_t>(lead)]) {
        return;
    }
    record_histogram<T>(initial_condition, lead, truth, members, shape_.work.members.begin == 0);
}

bool Aggregator::end_histogram_window() {
    if (!options_.histogram) {
        return false;
    }
    const ProcessMesh& mesh = grid_.mesh();
    const auto fresh_window = [&] {
        for (WindowHistogram& h : histograms_) {
            h.lowest = std::numeric_limits<double>::infinity();
            h.highest = -std::numeric_limits<double>::infinity();
            h.not_finite = false;
            std::fill(h.window_counts.begin(), h.window_counts.end(), 0);
        }
    };
    if (histogram_phase_ == HistogramPhase::mask) {
        // ACE's mask: the truth's NaN points at the mask pair, kept by the ranks that recorded it (collective over
        // data: the others add nothing), and whether any rank recorded a pair (a window of no counted pair, such as
        // ACE's initial condition, is no first window)
        std::vector<std::int32_t> mask(histogram_mask_.begin(), histogram_mask_.end());
        mask.push_back(histogram_window_pairs_ > 0 ? 1 : 0);
        reduce_max<std::int32_t>(mesh, mask);
        if (mask.back() == 0) {
            return false;
        }
        std::copy(mask.begin(), mask.end() - 1, histogram_mask_.begin());
        histogram_mask_known_ = true;
        histogram_phase_ = HistogramPhase::range;
        fresh_window();
        return true;
    }
    if (histogram_phase_ == HistogramPhase::binning) {
        for (WindowHistogram& h : histograms_) {
            if (h.awaiting) {
                h.committed.add_counts(h.window_counts);
                h.awaiting = false;
            }
        }
        histogram_phase_ = HistogramPhase::range;
        histogram_window_pairs_ = 0;
        fresh_window();
        return false;
    }
    // The window's range over the world: per histogram the lowest (negated), the highest and whether a value was not
    // finite, maxima over data then over spatial (none NaN).
    std::vector<double> range;
    range.reserve(3 * histograms_.size());
    for (const WindowHistogram& h : histograms_) {
        range.insert(range.end(), {-h.lowest, h.highest, h.not_finite ? 1.0 : 0.0});
    }
    reduce_max<double>(mesh, range);
    spatial_reduce_max<double>(mesh, range);
    bool again = false;
    for (std::size_t k = 0; k < histograms_.size(); ++k) {
        WindowHistogram& h = histograms_[k];
        const double lowest = -range[3 * k], highest = range[3 * k + 1];
        if (range[3 * k + 2] != 0.0) {
            ++h.windows_left_out;  // ACE skips a window with NaN; with an infinite value it never ends
            continue;
        }
        if (!(lowest <= highest)) {
            continue;  // no value in this window
        }
        const double lower = histogram_values_double_ ? histogram_lower_bound(lowest)
                                                      : histogram_lower_bound(static_cast<float>(lowest));
        const double upper = histogram_values_double_ ? histogram_upper_bound(highest)
                                                      : histogram_upper_bound(static_cast<float>(highest));
        if (h.committed.take_range(lower, upper)) {
            h.awaiting = true;  // its values binned again under the new edges
            std::fill(h.window_counts.begin(), h.window_counts.end(), 0);
            again = true;
        } else {
            h.committed.add_counts(h.window_counts);
        }
    }
    if (again) {
        histogram_phase_ = HistogramPhase::binning;
        return true;
    }
    histogram_window_pairs_ = 0;
    fresh_window();
    return false;
}

void Aggregator::finish_histogram(VariableScores& out) {
    const std::size_t bins = static_cast<std::size_t>(options_.histogram->bins);
    // Every rank's counts summed over the world (each value counted on the one rank that holds it), with the pairs
    // recorded since the last window's end: none may be, or their values would be missing.
    std::vector<std::int64_t> counts;
    counts.reserve(histograms_.size() * bins + 1);
    for (const WindowHistogram& h : histograms_) {
        if (h.committed.has_edges()) {
            counts.insert(counts.end(), h.committed.counts().begin(), h.committed.counts().end());
        } else {
            counts.insert(counts.end(), bins, 0);
        }
    }
    counts.push_back(histogram_window_pairs_ + (histogram_phase_ == HistogramPhase::binning ? 1 : 0));
    allreduce_sum_in_place(grid_.mesh().world(), counts);
    if (counts.back() != 0) {
        throw ArgumentError(setting_name("histogram") + ": " + std::to_string(counts.back()) +
                            " pair(s) recorded after the last window's end (end_histogram_window); end every window, "
                            "and give its pairs again while it asks");
    }
    const double probability = options_.histogram->percentile / 100.0;
    for (std::size_t c = 0; c < out.size(); ++c) {
        ChannelHistograms result;
        for (const bool truth : {true, false}) {
            const WindowHistogram& h = histograms_[2 * c + (truth ? 0 : 1)];
            std::vector<std::int64_t> summed;
            if (h.committed.has_edges()) {
                const auto first = counts.begin() + static_cast<std::ptrdiff_t>((2 * c + (truth ? 0 : 1)) * bins);
                summed.assign(first, first + static_cast<std::ptrdiff_t>(bins));
            }
            if (truth) {  // ACE's target repeats each initial condition's truth once per member
                for (std::int64_t& n : summed) {
                    n *= shape_.extent.members;
                }
            }
            const double percentile = histogram_quantile(h.committed.edges(), summed, probability);
            (truth ? result.truth_edges : result.prediction_edges) = h.committed.edges();
            (truth ? result.truth_counts : result.prediction_counts) = std::move(summed);
            (truth ? result.truth_windows_left_out : result.prediction_windows_left_out) = h.windows_left_out;
            (truth ? result.truth_percentile : result.prediction_percentile) = percentile;
        }
        RegionScores& global = out[c].regions.front();
        for (const RegisteredScore* s : scores_) {
            if (const auto* value = std::get_if<HistogramValue>(&s->source)) {
                global.time_means.push_back({s, *value == HistogramValue::prediction_percentile
                                                    ? result.prediction_percentile
                                                    : result.truth_percentile});
            }
        }
        out[c].histograms = std::move(result);
    }
}

template void Aggregator::set_histogram_mask<float>(FieldShard<float>);
template void Aggregator::set_histogram_mask<double>(FieldShard<double>);
template void Aggregator::record_histogram<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                                  bool);
template void Aggregator::record_histogram<double>(std::int64_t, std::int64_t, FieldShard<double>,
                                                   std::span<const double>, bool);
template void Aggregator::replay_histogram<float>(std::int64_t, std::int64_t, FieldShard<float>,
                                                  std::span<const float>);
template void Aggregator::replay_histogram<double>(std::int64_t, std::int64_t, FieldShard<double>,
                                                   std::span<const double>);

}  // namespace gridshard
