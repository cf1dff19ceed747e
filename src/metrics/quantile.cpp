// Exact quantiles of samples spread over ranks (metrics/quantile.hpp): distributed radix selection on the values'
// order-preserving integer keys, then numpy's reading of the order statistics.

#include "gridshard/metrics/quantile.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

/// Histogram bins one pass may hold in all (8 MiB of int64): the digit narrows where many prefixes are wanted.
constexpr std::size_t kHistogramBudget = std::size_t{1} << 20;
constexpr int kWidestDigit = 16;
constexpr int kNarrowestDigit = 4;

template <class T>
using KeyOf = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

/// The value's key: unsigned integers in the values' order (-0 just below +0), for values that are not NaN.
template <class T>
KeyOf<T> key_of(T value) {
    using Key = KeyOf<T>;
    constexpr Key sign = Key{1} << (sizeof(Key) * 8 - 1);
    const auto bits = std::bit_cast<Key>(value);
    return (bits & sign) != 0 ? static_cast<Key>(~bits) : static_cast<Key>(bits | sign);
}

template <class T>
T value_of(KeyOf<T> key) {
    using Key = KeyOf<T>;
    constexpr Key sign = Key{1} << (sizeof(Key) * 8 - 1);
    return std::bit_cast<T>((key & sign) != 0 ? static_cast<Key>(key & ~sign) : static_cast<Key>(~key));
}

/// Where numpy reads quantile `q` of `n` sorted values (function_base.py, numpy 1.24: `_quantile`, `_get_indexes`,
/// `_get_gamma`, `_inverted_cdf`): the ranks of the two neighbours and the weight of the upper one. Above the last
/// index numpy takes index -1 for both and its weight from that -1; `inverted_cdf` reads one rank.
struct Reading {
    std::int64_t lower = 0;
    std::int64_t upper = 0;
    double gamma = 0.0;
};

Reading numpy_reading(std::int64_t n, double q, QuantileMethod method) {
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

/// Finds every wanted order statistic's key by radix passes over the values (see sample_quantiles).
template <class T>
void select_keys(const Communicator& group, std::span<const T> values, std::int64_t length,
                 std::vector<Wanted<KeyOf<T>>>& wanted) {
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    struct Slot {
        std::int64_t sample;
        Key prefix;
        bool operator<(const Slot& o) const { return sample != o.sample ? sample < o.sample : prefix < o.prefix; }
        bool operator==(const Slot& o) const { return sample == o.sample && prefix == o.prefix; }
    };
    std::vector<Slot> slots;
    std::vector<std::int64_t> histogram;
    for (int done = 0; done < kBits;) {
        slots.clear();
        for (const auto& w : wanted) {
            slots.push_back({w.sample, w.prefix});
        }
        std::sort(slots.begin(), slots.end());
        slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
        for (auto& w : wanted) {
            w.slot = static_cast<std::size_t>(std::lower_bound(slots.begin(), slots.end(), Slot{w.sample, w.prefix}) -
                                              slots.begin());
        }
        int width = std::min(kWidestDigit, kBits - done);
        while (width > kNarrowestDigit && (slots.size() << width) > kHistogramBudget) {
            --width;
        }
        const std::size_t bins = std::size_t{1} << width;
        const int below_digit = kBits - done - width;
        histogram.assign(slots.size() * bins, 0);
        for (std::size_t first = 0; first < slots.size();) {  // the slots of one sample: one pass over its values
            const std::int64_t sample = slots[first].sample;
            std::size_t last = first;
            while (last < slots.size() && slots[last].sample == sample) {
                ++last;
            }
            const T* run = values.data() + sample * length;
            for (std::int64_t i = 0; i < length; ++i) {
                const T v = run[i];
                if (std::isnan(v)) {
                    continue;
                }
                const Key key = key_of(v);
                const Key top = done == 0 ? Key{0} : static_cast<Key>(key >> (kBits - done));
                const auto found =
                    std::lower_bound(slots.begin() + static_cast<std::ptrdiff_t>(first),
                                     slots.begin() + static_cast<std::ptrdiff_t>(last), Slot{sample, top});
                if (found == slots.begin() + static_cast<std::ptrdiff_t>(last) || found->prefix != top) {
                    continue;
                }
                const auto digit = static_cast<std::size_t>((key >> below_digit) & static_cast<Key>(bins - 1));
                ++histogram[static_cast<std::size_t>(found - slots.begin()) * bins + digit];
            }
            first = last;
        }
        allreduce_sum_in_place(group, std::span<std::int64_t>(histogram));
        for (auto& w : wanted) {
            const std::int64_t* counts = histogram.data() + w.slot * bins;
            std::size_t digit = 0;
            while (digit + 1 < bins && w.rank >= counts[digit]) {
                w.rank -= counts[digit];
                ++digit;
            }
            w.prefix = static_cast<Key>((done == 0 ? Key{0} : static_cast<Key>(w.prefix << width)) | digit);
        }
        done += width;
    }
}

}  // namespace

QuantileMethod parse_quantile_method(std::string_view name) {
    if (name == "linear") {
        return QuantileMethod::linear;
    }
    if (name == "inverted_cdf") {
        return QuantileMethod::inverted_cdf;
    }
    throw ArgumentError("method='" + std::string(name) + "': expected 'linear' or 'inverted_cdf'");
}

template <class T>
SampleQuantiles sample_quantiles(const Communicator& group, std::span<const T> values, std::int64_t samples,
                                 std::span<const double> probabilities, QuantileMethod method) {
    if (samples < 0 || (samples == 0 && !values.empty()) ||
        (samples > 0 && values.size() % static_cast<std::size_t>(samples) != 0)) {
        throw ArgumentError("values: " + std::to_string(values.size()) + " do not form " + std::to_string(samples) +
                            " equal runs, one per sample");
    }
    for (const double q : probabilities) {
        if (!(q >= 0.0 && q <= 1.0)) {
            throw ArgumentError("q=" + std::to_string(q) + ": quantiles must be in the range [0, 1]");
        }
    }
    const std::int64_t length = samples == 0 ? 0 : static_cast<std::int64_t>(values.size()) / samples;
    std::vector<std::int64_t> counts(static_cast<std::size_t>(samples), 0);
    for (std::int64_t s = 0; s < samples; ++s) {
        const auto run = values.subspan(static_cast<std::size_t>(s * length), static_cast<std::size_t>(length));
        counts[static_cast<std::size_t>(s)] = std::count_if(run.begin(), run.end(), [](T v) { return !std::isnan(v); });
    }
    allreduce_sum_in_place(group, std::span<std::int64_t>(counts));

    using Key = KeyOf<T>;
    std::vector<Wanted<Key>> wanted;
    for (std::int64_t s = 0; s < samples; ++s) {
        const std::int64_t n = counts[static_cast<std::size_t>(s)];
        for (const double q : probabilities) {
            if (n > 0) {
                const Reading r = numpy_reading(n, q, method);
                wanted.push_back({.sample = s, .rank = r.lower});
                wanted.push_back({.sample = s, .rank = r.upper});
            }
        }
    }
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    std::vector<Wanted<Key>> found = wanted;  // the ranks asked, kept for the lookup below
    select_keys(group, values, length, found);

    const auto value_at = [&](std::int64_t sample, std::int64_t rank) {
        const auto at = std::lower_bound(wanted.begin(), wanted.end(), Wanted<Key>{.sample = sample, .rank = rank});
        return value_of<T>(found[static_cast<std::size_t>(at - wanted.begin())].prefix);
    };
    std::vector<double> result(probabilities.size() * static_cast<std::size_t>(samples));
    for (std::size_t k = 0; k < probabilities.size(); ++k) {
        for (std::int64_t s = 0; s < samples; ++s) {
            const std::int64_t n = counts[static_cast<std::size_t>(s)];
            double& out = result[k * static_cast<std::size_t>(samples) + static_cast<std::size_t>(s)];
            if (n == 0) {
                out = std::numeric_limits<double>::quiet_NaN();
                continue;
            }
            const Reading r = numpy_reading(n, probabilities[k], method);
            const T lower = value_at(s, r.lower);
            out = method == QuantileMethod::inverted_cdf ? static_cast<double>(lower)
                                                         : numpy_lerp(lower, value_at(s, r.upper), r.gamma);
        }
    }
    return {std::move(result), std::move(counts)};
}

template SampleQuantiles sample_quantiles<float>(const Communicator&, std::span<const float>, std::int64_t,
                                                 std::span<const double>, QuantileMethod);
template SampleQuantiles sample_quantiles<double>(const Communicator&, std::span<const double>, std::int64_t,
                                                  std::span<const double>, QuantileMethod);

}  // namespace gridshard
