// Exact quantiles of samples streamed in passes (metrics/quantile.hpp, QuantileStream): sample_quantiles' radix
// selection with a histogram per digit in every pass and no keys kept.

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/quantile.hpp"
#include "quantile_selection.hpp"

namespace gridshard {
namespace {

/// Histogram bins one streamed pass may hold in all (8 MiB of int64): each pass reads the whole run again, so the
/// digits are as wide as this allows.
constexpr std::size_t kStreamBudget = std::size_t{1} << 20;

}  // namespace

template <class T>
struct QuantileStream<T>::State {
    using Key = detail::KeyOf<T>;
    static constexpr int kBits = static_cast<int>(sizeof(Key) * 8);

    std::int64_t samples = 0;
    std::vector<double> probabilities;
    QuantileMethod method = QuantileMethod::linear;
    int done = 0;   // the key bits found before this pass
    int width = 0;  // this pass's digit
    int passes = 0;
    bool finished = false;
    // This pass's slots, sorted, and per sample its own (labelled sample 0, for a tally of its values alone) and
    // where its histograms begin.
    std::vector<std::vector<detail::Slot<Key>>> sample_slots;
    std::vector<std::size_t> first_slot;
    std::vector<std::int64_t> histogram;
    // From the first pass: each sample's count, numpy's readings, the statistics asked and their keys so far.
    std::vector<std::int64_t> counts;
    std::vector<detail::Reading> readings;
    std::vector<detail::Wanted<Key>> asked, found;
    // Per statistic of `found`, how many values its prefix held in the last pass: this pass's slot must hold as many.
    std::vector<std::int64_t> in_prefix;

    void begin_pass(const std::vector<detail::Slot<Key>>& slots, int digit) {
        width = digit;
        sample_slots.assign(static_cast<std::size_t>(samples), {});
        first_slot.assign(static_cast<std::size_t>(samples), 0);
        for (std::size_t k = 0; k < slots.size(); ++k) {  // sorted by sample: each sample's slots in a run
            const auto s = static_cast<std::size_t>(slots[k].sample);
            if (sample_slots[s].empty()) {
                first_slot[s] = k;
            }
            sample_slots[s].push_back({0, slots[k].prefix});
        }
        histogram.assign(slots.size() << width, 0);
    }

    template <class Element, class ToKey>
    void tally(std::int64_t sample, std::span<const Element> elements, ToKey to_key) {
        if (finished) {
            throw ArgumentError("QuantileStream::add: the last pass has ended");
        }
        if (sample < 0 || sample >= samples) {
            throw ArgumentError("sample=" + std::to_string(sample) + ": expected 0 to " + std::to_string(samples - 1));
        }
        const auto& slots = sample_slots[static_cast<std::size_t>(sample)];
        if (slots.empty()) {
            return;  // no statistic of this sample is wanted in this pass
        }
        const std::int64_t offsets[] = {0, static_cast<std::int64_t>(elements.size())};
        const std::span<std::int64_t> bins = std::span<std::int64_t>(histogram).subspan(
            first_slot[static_cast<std::size_t>(sample)] << width, slots.size() << width);
        detail::tally_digits_into<Key, std::int64_t>(elements, std::span<const std::int64_t>(offsets), slots, done,
                                                     width, to_key, detail::count_one, bins);
    }
};

template <class T>
QuantileStream<T>::QuantileStream(std::int64_t samples, std::vector<double> probabilities, QuantileMethod method)
    : state_(std::make_unique<State>()) {
    if (samples < 0) {
        throw ArgumentError("samples=" + std::to_string(samples) + ": must be >= 0");
    }
    check_quantile_probabilities(probabilities);
    State& s = *state_;
    s.samples = samples;
    s.probabilities = std::move(probabilities);
    s.method = method;
    std::vector<detail::Slot<typename State::Key>> slots;
    for (std::int64_t k = 0; k < samples; ++k) {
        slots.push_back({k, 0});
    }
    s.begin_pass(slots, detail::digit_width(slots.size(), State::kBits, detail::kWidestDigit, detail::kNarrowestDigit,
                                            kStreamBudget));
}

template <class T>
QuantileStream<T>::QuantileStream(QuantileStream&&) noexcept = default;
template <class T>
QuantileStream<T>& QuantileStream<T>::operator=(QuantileStream&&) noexcept = default;
template <class T>
QuantileStream<T>::~QuantileStream() = default;

template <class T>
void QuantileStream<T>::add(std::int64_t sample, std::span<const T> values) {
    state_->tally(sample, values, detail::key_of_value<T>);
}

template <class T>
void QuantileStream<T>::add(std::int64_t sample, std::span<const T> values, std::span<const std::int64_t> cells) {
    const auto [lowest, highest] = std::minmax_element(cells.begin(), cells.end());
    if (!cells.empty() && (*lowest < 0 || *highest >= static_cast<std::int64_t>(values.size()))) {
        throw ArgumentError("cells: " + std::to_string(*lowest < 0 ? *lowest : *highest) + " lies outside the " +
                            std::to_string(values.size()) + " values");
    }
    const T* data = values.data();
    state_->tally(sample, cells, [data](std::int64_t cell, typename State::Key& key) {
        return detail::key_of_number(data[cell], key);
    });
}

template <class T>
bool QuantileStream<T>::end_pass(const Communicator& group) {
    State& s = *state_;
    if (s.finished) {
        throw ArgumentError("QuantileStream::end_pass: the last pass has ended");
    }
    allreduce_sum_in_place(group, std::span<std::int64_t>(s.histogram));
    const std::size_t bins = std::size_t{1} << s.width;
    if (s.passes++ == 0) {  // the first: each sample's count, and the statistics numpy reads
        s.counts = detail::sample_counts(s.histogram, s.samples, s.width);
        s.asked = detail::wanted_statistics<typename State::Key>(s.counts, s.probabilities, s.method, s.readings);
        s.found = s.asked;
    }
    for (std::size_t k = 0; k < s.in_prefix.size(); ++k) {  // the same sums on every rank: the same verdict
        const auto* row = s.histogram.data() + s.found[k].slot * bins;
        const std::int64_t held = std::accumulate(row, row + bins, std::int64_t{0});
        if (held != s.in_prefix[k]) {
            throw SystemError("quantiles: pass " + std::to_string(s.passes) + " was given " + std::to_string(held) +
                              " values where pass " + std::to_string(s.passes - 1) + " had " +
                              std::to_string(s.in_prefix[k]) +
                              ": the values changed between passes (an input rewritten while it was read?)");
        }
    }
    detail::descend(s.found, s.histogram, s.width);
    s.in_prefix.clear();
    for (const auto& w : s.found) {
        s.in_prefix.push_back(s.histogram[w.slot * bins + static_cast<std::size_t>(w.prefix & (bins - 1))]);
    }
    s.done += s.width;
    if (s.done == State::kBits || s.found.empty()) {
        s.finished = true;
        s.histogram = {};
        s.sample_slots = {};
        return false;
    }
    const auto slots = detail::slots_of(s.found);
    s.begin_pass(slots,
                 detail::digit_width(slots.size(), State::kBits - s.done, detail::kWidestDigit, 1, kStreamBudget));
    return true;
}

template <class T>
int QuantileStream<T>::passes() const noexcept {
    return state_->passes;
}

template <class T>
SampleQuantiles QuantileStream<T>::result() const {
    const State& s = *state_;
    if (!s.finished) {
        throw ArgumentError("QuantileStream::result: the passes have not ended (end_pass returned true)");
    }
    return {detail::numpy_quantiles<T>(s.asked, s.found, s.readings, s.counts, s.probabilities.size(), s.method),
            s.counts};
}

template class QuantileStream<float>;
template class QuantileStream<double>;

}  // namespace gridshard
