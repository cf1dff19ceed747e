#pragma once
// The machinery of the exact quantiles' radix selection (metrics/quantile.hpp), shared by the in-memory selection
// (quantile.cpp) and the streamed one (quantile_stream.cpp): numpy's reading of
// the order statistics, the per-pass histograms of a digit, and the descent from a merged histogram to the next
// digit. No MPI calls here.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../comm/thread_blocks.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/quantile.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "quantile_kernels.hpp"

namespace gridshard::detail {

/// Histogram bins one pass may hold in all (8 MiB of int64): the digit narrows where many prefixes are wanted.
constexpr std::size_t kHistogramBudget = std::size_t{1} << 20;
constexpr int kWidestDigit = 16;
constexpr int kNarrowestDigit = 4;

/// Where numpy reads quantile `q` of `n` sorted values (function_base.py, numpy 1.24: `_quantile`, `_get_indexes`,
/// `_get_gamma`, `_inverted_cdf`): the ranks of the two neighbours and the weight of the upper one. Above the last
/// index numpy takes index -1 for both and its weight from that -1; `inverted_cdf` reads one rank.
struct Reading {
    std::int64_t lower = 0;
    std::int64_t upper = 0;
    double gamma = 0.0;
};

inline Reading numpy_reading(std::int64_t n, double q, QuantileMethod method) {
    Reading r;
    if (method == QuantileMethod::inverted_cdf) {
        const double index = static_cast<double>(n) * q - 1.0;
        const double previous = std::floor(index);
        const double chosen = index - previous == 0.0 ? previous : previous + 1.0;
        r.lower = r.upper = std::max<std::int64_t>(0, static_cast<std::int64_t>(chosen));
        return r;
    }
    const double virtual_index = static_cast<double>(n - 1) * q;
    double previous = std::floor(virtual_index);
    r.lower = static_cast<std::int64_t>(previous);
    r.upper = r.lower + 1;
    if (virtual_index >= static_cast<double>(n - 1)) {
        previous = -1.0;
        r.lower = r.upper = n - 1;
    } else if (virtual_index < 0.0) {
        previous = 0.0;
        r.lower = r.upper = 0;
    }
    r.gamma = virtual_index - previous;
    return r;
}

/// numpy's `_lerp(a, b, t)`: the difference in T, the rest in float64, from the upper side where `t >= 0.5`.
template <class T>
double numpy_lerp(T a, T b, double t) {
    const T difference = b - a;
    if (t >= 0.5) {
        return static_cast<double>(b) - static_cast<double>(difference) * (1.0 - t);
    }
    return static_cast<double>(a) + static_cast<double>(difference) * t;
}

/// An order statistic wanted: the value of rank `rank` (from 0) among sample `sample`'s keys, found digit by digit.
template <class Key>
struct Wanted {
    std::int64_t sample = 0;
    std::int64_t rank = 0;  // among the keys that start with `prefix`
    Key prefix = 0;         // the digits found so far
    std::size_t slot = 0;   // this pass's histogram
    bool operator<(const Wanted& other) const {
        return sample != other.sample ? sample < other.sample : rank < other.rank;
    }
    bool operator==(const Wanted& other) const { return sample == other.sample && rank == other.rank; }
};

/// One histogram of a pass: the keys of one sample that start with `prefix` (its `done` bits found so far).
template <class Key>
struct Slot {
    std::int64_t sample;
    Key prefix;
    bool operator<(const Slot& o) const { return sample != o.sample ? sample < o.sample : prefix < o.prefix; }
    bool operator==(const Slot& o) const { return sample == o.sample && prefix == o.prefix; }
};

/// The widest digit (at most `widest` bits, and `left`, the bits still to find) whose histograms for `slots` prefixes
/// stay within `budget` bins in all, but never below `narrowest` bits.
inline int digit_width(std::size_t slots, int left, int widest, int narrowest, std::size_t budget) {
    int width = std::min(widest, left);
    while (width > narrowest && (slots << width) > budget) {
        --width;
    }
    return width;
}

inline void merge_into(std::int64_t& total, std::int64_t part) {
    total += part;
}
inline void merge_into(ExactSum& total, const ExactSum& part) {
    total.add(part);
}
inline void merge_into(Int128& total, Int128 part) {
    total += part;
}

/// One pass: per slot (sorted), the tally of the next `width` bits of its sample's keys that start with its prefix,
/// this rank's elements only (sample s: elements [offsets[s], offsets[s + 1]); `to_key(element, key)` gives an
/// element's key, or false for one that has none, a NaN; `deposit(bin, index)` adds element `index` to its bin: a
/// count, or its weight), added into `total` (slots x 2^width bins). Threads tally blocks of a sample's elements into
/// tallies of their own, merged after (integer counts and exact sums: the same for any thread count). A table of the
/// prefixes' first (up to 16) bits passes over most keys with one lookup; the rest find their slot among the few that
/// share those bits.
template <class Key, class Bin, class Element, class ToKey, class Deposit>
void tally_digits_into(std::span<const Element> elements, std::span<const std::int64_t> offsets,
                       const std::vector<Slot<Key>>& slots, int done, int width, ToKey to_key, Deposit deposit,
                       std::span<Bin> total) {
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    constexpr std::int64_t kBlock = 65536;
    const std::size_t bins = std::size_t{1} << width;
    const int below_digit = kBits - done - width;
    const int head_bits = std::min(done, kWidestDigit);
    struct Block {
        std::size_t first, last;  // the sample's slots
        std::int64_t begin, count;
    };
    std::vector<Block> blocks;
    for (std::size_t first = 0; first < slots.size();) {
        std::size_t last = first;
        while (last < slots.size() && slots[last].sample == slots[first].sample) {
            ++last;
        }
        const std::int64_t begin = offsets[static_cast<std::size_t>(slots[first].sample)];
        const std::int64_t end = offsets[static_cast<std::size_t>(slots[first].sample) + 1];
        for (std::int64_t b = begin; b < end; b += kBlock) {
            blocks.push_back({first, last, b, std::min(kBlock, end - b)});
        }
        first = last;
    }
    const int threads = threads_for(static_cast<std::int64_t>(blocks.size()), kBlock);
    std::vector<std::vector<Bin>> tallies(static_cast<std::size_t>(threads));
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads)) {
        std::vector<Bin>& tally = tallies[static_cast<std::size_t>(thread_index())];
        tally.assign(slots.size() * bins, Bin{});
        std::vector<char> reachable(std::size_t{1} << head_bits);
        std::size_t table_of = slots.size();  // the first slot of the sample the table describes
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            const Block& block = blocks[b];
            if (table_of != block.first) {
                std::fill(reachable.begin(), reachable.end(), char{0});
                for (std::size_t k = block.first; k < block.last; ++k) {
                    reachable[head_bits == 0 ? 0 : static_cast<std::size_t>(slots[k].prefix >> (done - head_bits))] = 1;
                }
                table_of = block.first;
            }
            const Element* run = elements.data() + block.begin;
            const auto from = slots.begin() + static_cast<std::ptrdiff_t>(block.first);
            const auto to = slots.begin() + static_cast<std::ptrdiff_t>(block.last);
            for (std::int64_t i = 0; i < block.count; ++i) {
                Key key;
                if (!to_key(run[i], key)) {
                    continue;
                }
                if (reachable[head_bits == 0 ? 0 : static_cast<std::size_t>(key >> (kBits - head_bits))] == 0) {
                    continue;
                }
                std::size_t slot = block.first;
                if (done > 0) {
                    const auto top = static_cast<Key>(key >> (kBits - done));
                    const auto found =
                        block.last - block.first == 1 ? from : std::lower_bound(from, to, Slot<Key>{from->sample, top});
                    if (found == to || found->prefix != top) {
                        continue;
                    }
                    slot = static_cast<std::size_t>(found - slots.begin());
                }
                deposit(
                    tally[slot * bins + static_cast<std::size_t>((key >> below_digit) & static_cast<Key>(bins - 1))],
                    block.begin + i);
            }
        }
    }
    for (const std::vector<Bin>& tally : tallies) {
        for (std::size_t k = 0; k < tally.size(); ++k) {
            merge_into(total[k], tally[k]);
        }
    }
}

/// tally_digits_into a histogram of its own (slots x 2^width bins).
template <class Key, class Bin, class Element, class ToKey, class Deposit>
std::vector<Bin> tally_digits(std::span<const Element> elements, std::span<const std::int64_t> offsets,
                              const std::vector<Slot<Key>>& slots, int done, int width, ToKey to_key, Deposit deposit) {
    std::vector<Bin> total(slots.size() << width);
    tally_digits_into<Key, Bin>(elements, offsets, slots, done, width, to_key, deposit, std::span<Bin>(total));
    return total;
}

/// A value's key, or false for NaN, which has no place in the order.
template <class T>
bool key_of_number(T value, KeyOf<T>& key) {
    if (std::isnan(value)) {
        return false;
    }
    key = key_of(value);
    return true;
}

/// A count per bin (tally_digits' deposit).
constexpr auto count_one = [](std::int64_t& bin, std::int64_t) { ++bin; };

/// An element's key for tally_digits: a value's (none for NaN), or a key's own. Lambdas, so that they inline.
template <class T>
constexpr auto key_of_value = [](T value, KeyOf<T>& key) { return key_of_number(value, key); };
template <class Key>
constexpr auto key_itself = [](Key element, Key& key) {
    key = element;
    return true;
};

/// Each wanted statistic's next digit from its slot's merged histogram, and its rank among the keys with it.
template <class Key>
void descend(std::vector<Wanted<Key>>& wanted, const std::vector<std::int64_t>& histogram, int width) {
    const std::size_t bins = std::size_t{1} << width;
    for (auto& w : wanted) {
        const std::int64_t* counts = histogram.data() + w.slot * bins;
        std::size_t digit = 0;
        while (digit + 1 < bins && w.rank >= counts[digit]) {
            w.rank -= counts[digit];
            ++digit;
        }
        w.prefix = static_cast<Key>(static_cast<Key>(w.prefix << width) | digit);
    }
}

/// The distinct prefixes `wanted` asks for, sorted, each statistic pointed at its own.
template <class Statistic>
auto slots_of(std::vector<Statistic>& wanted) {
    using Key = decltype(Statistic::prefix);
    std::vector<Slot<Key>> slots;
    for (const auto& w : wanted) {
        slots.push_back({w.sample, w.prefix});
    }
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    for (auto& w : wanted) {
        w.slot = static_cast<std::size_t>(std::lower_bound(slots.begin(), slots.end(), Slot<Key>{w.sample, w.prefix}) -
                                          slots.begin());
    }
    return slots;
}

/// Each sample's count of keys: the sum of its row of a first pass's histogram (one slot per sample, 2^width bins).
inline std::vector<std::int64_t> sample_counts(const std::vector<std::int64_t>& histogram, std::int64_t samples,
                                               int width) {
    const std::size_t bins = std::size_t{1} << width;
    std::vector<std::int64_t> counts;
    for (std::int64_t s = 0; s < samples; ++s) {
        const auto* row = histogram.data() + static_cast<std::size_t>(s) * bins;
        counts.push_back(std::accumulate(row, row + bins, std::int64_t{0}));
    }
    return counts;
}

/// The order statistics numpy reads for `probabilities` of samples of `counts` values (none of an empty sample):
/// per (probability k, sample s) its reading at [k * samples + s], and the distinct (sample, rank) wanted, sorted,
/// each with prefix 0 and its sample's slot.
template <class Key>
std::vector<Wanted<Key>> wanted_statistics(std::span<const std::int64_t> counts, std::span<const double> probabilities,
                                           QuantileMethod method, std::vector<Reading>& readings) {
    const std::size_t samples = counts.size();
    readings.assign(probabilities.size() * samples, Reading{});
    std::vector<Wanted<Key>> wanted;
    for (std::size_t k = 0; k < probabilities.size(); ++k) {
        for (std::size_t s = 0; s < samples; ++s) {
            if (counts[s] > 0) {
                const Reading r = numpy_reading(counts[s], probabilities[k], method);
                readings[k * samples + s] = r;
                const auto sample = static_cast<std::int64_t>(s);
                wanted.push_back({.sample = sample, .rank = r.lower, .slot = s});
                wanted.push_back({.sample = sample, .rank = r.upper, .slot = s});
            }
        }
    }
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    return wanted;
}

/// numpy's quantiles (probability slowest, as SampleQuantiles::values) from the keys `found` of the statistics
/// `asked` (wanted_statistics', in its order), read as `readings` say; NaN for a sample of no value.
template <class T>
std::vector<double> numpy_quantiles(const std::vector<Wanted<KeyOf<T>>>& asked,
                                    const std::vector<Wanted<KeyOf<T>>>& found, const std::vector<Reading>& readings,
                                    std::span<const std::int64_t> counts, std::size_t probabilities,
                                    QuantileMethod method) {
    const std::size_t samples = counts.size();
    const auto value_at = [&](std::int64_t sample, std::int64_t rank) {
        const auto at = std::lower_bound(asked.begin(), asked.end(), Wanted<KeyOf<T>>{.sample = sample, .rank = rank});
        return value_of<T>(found[static_cast<std::size_t>(at - asked.begin())].prefix);
    };
    std::vector<double> result(probabilities * samples, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < probabilities; ++k) {
        for (std::size_t s = 0; s < samples; ++s) {
            if (counts[s] == 0) {
                continue;
            }
            const Reading& r = readings[k * samples + s];
            const auto sample = static_cast<std::int64_t>(s);
            const T lower = value_at(sample, r.lower);
            result[k * samples + s] = method == QuantileMethod::inverted_cdf
                                          ? static_cast<double>(lower)
                                          : numpy_lerp(lower, value_at(sample, r.upper), r.gamma);
        }
    }
    return result;
}

}  // namespace gridshard::detail
