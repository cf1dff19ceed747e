// Exact quantiles of samples spread over ranks (metrics/quantile.hpp): distributed radix selection on the values'
// order-preserving integer keys, then numpy's reading of the order statistics.

#include "gridshard/metrics/quantile.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/exact_allreduce.hpp"
#include "gridshard/comm/redistribution.hpp"
#include "gridshard/core/error.hpp"
#include "quantile_selection.hpp"

namespace gridshard {
namespace {

using namespace detail;  // the selection's machinery (quantile_selection.hpp)

/// A test in the values' own order for the values whose keys lie in [low, high]: `low <= x && x <= high` holds for
/// every such value (the keys refine the values' order, in which -0 and +0 are equal), may hold for a few more (the
/// other zero), and fails for NaN. A bound whose key is a NaN's lies beyond an infinity.
template <class T>
ValueRange<T> values_between(KeyOf<T> low, KeyOf<T> high) {
    constexpr T inf = std::numeric_limits<T>::infinity();
    T from = value_of<T>(low);
    T to = value_of<T>(high);
    if (std::isnan(from)) {
        from = low < key_of(-inf) ? -inf : inf;
    }
    if (std::isnan(to)) {
        to = high > key_of(inf) ? inf : -inf;
    }
    return {from, to};
}

/// The keys of this rank's values that start with a prefix of `slots` (sorted; `common + width` bits, where every key
/// of a sample shares its first `common` bits and `width` is at most 16), per sample, with the offsets of each
/// sample's run: what the passes after the first read instead of the values. A run of consecutive wanted prefixes is
/// a range of values, so the read compares lanes of values with a sample's ranges (vectorised) and forms a key only
/// where a lane lies in one. Threads read blocks of a sample's values into buffers of their own, joined in block
/// order after.
template <class T>
std::pair<std::vector<KeyOf<T>>, std::vector<std::int64_t>> wanted_keys(std::span<const T> values, std::int64_t samples,
                                                                        std::int64_t length,
                                                                        const std::vector<Slot<KeyOf<T>>>& slots,
                                                                        int common, int width) {
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    constexpr std::int64_t kBlock = 65536;
    constexpr std::int64_t kChunk = kMarkLanes * kBits;  // one bit of a lane per value
    struct Block {
        std::int64_t sample, begin, count;
    };
    const auto digit_mask = static_cast<Key>((std::size_t{1} << width) - 1);
    const int below = kBits - common - width;
    const Key tail = below == 0 ? Key{0} : static_cast<Key>(static_cast<Key>(~Key{0}) >> (kBits - below));
    std::vector<char> wanted(static_cast<std::size_t>(samples) << width);  // per sample, its wanted digits
    std::vector<std::vector<ValueRange<T>>> ranges(static_cast<std::size_t>(samples));
    std::vector<Block> blocks;
    for (std::size_t slot = 0; slot < slots.size();) {
        const std::int64_t s = slots[slot].sample;
        Key low = 0;
        for (const std::size_t first = slot; slot < slots.size() && slots[slot].sample == s; ++slot) {
            const Key prefix = slots[slot].prefix;
            wanted[(static_cast<std::size_t>(s) << width) + static_cast<std::size_t>(prefix & digit_mask)] = 1;
            if (slot == first || prefix != slots[slot - 1].prefix + 1) {
                low = static_cast<Key>(prefix << below);  // a new run of prefixes
            } else {
                ranges[static_cast<std::size_t>(s)].pop_back();
            }
            ranges[static_cast<std::size_t>(s)].push_back(
                values_between<T>(low, static_cast<Key>(static_cast<Key>(prefix << below) | tail)));
        }
        for (std::int64_t b = 0; b < length; b += kBlock) {
            blocks.push_back({s, s * length + b, std::min(kBlock, length - b)});
        }
    }
    std::vector<std::vector<Key>> kept(blocks.size());
    const int threads = detail::threads_for(static_cast<std::int64_t>(blocks.size()), kBlock);
    GRIDSHARD_PRAGMA(omp parallel for schedule(static) num_threads(threads))
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const Block& block = blocks[b];
        const char* digits = wanted.data() + (static_cast<std::size_t>(block.sample) << width);
        const std::vector<ValueRange<T>>& in = ranges[static_cast<std::size_t>(block.sample)];
        const T* run = values.data() + block.begin;
        std::vector<Key>& out = kept[b];
        const auto keep = [&](T value) {
            Key key;
            if (key_of_number(value, key) && digits[static_cast<std::size_t>((key >> below) & digit_mask)] != 0) {
                out.push_back(key);
            }
        };
        Key lanes[kMarkLanes];
        for (std::int64_t i = 0; i < block.count; i += kChunk) {
            const std::int64_t n = std::min(kChunk, block.count - i);
            mark_in_ranges(run + i, n, std::span<const ValueRange<T>>(in), lanes);
            for (std::int64_t lane = 0; lane < kMarkLanes; ++lane) {
                for (Key marked = lanes[lane]; marked != 0; marked &= static_cast<Key>(marked - 1)) {
                    keep(run[i + std::countr_zero(marked) * kMarkLanes + lane]);
                }
            }
        }
    }
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(samples) + 1, 0);
    std::size_t total = 0;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        total += kept[b].size();
        offsets[static_cast<std::size_t>(blocks[b].sample) + 1] += static_cast<std::int64_t>(kept[b].size());
    }
    for (std::int64_t s = 0; s < samples; ++s) {
        offsets[static_cast<std::size_t>(s) + 1] += offsets[static_cast<std::size_t>(s)];
    }
    std::vector<Key> keys;
    keys.reserve(total);
    for (const auto& block_keys : kept) {  // blocks run in sample order
        keys.insert(keys.end(), block_keys.begin(), block_keys.end());
    }
    return {std::move(keys), std::move(offsets)};
}

/// Per sample, this rank's count of keys by the `width` bits below their first `common` (which every key of the
/// sample shares): samples x 2^width bins. The digits are formed in vectorised chunks, NaN's in a bin of its own
/// that is dropped; threads tally blocks of a sample's values into tallies of their own, summed after (the same
/// counts for any thread count).
template <class T>
std::vector<std::int64_t> first_digits(std::span<const T> values, std::int64_t samples, std::int64_t length, int common,
                                       int width) {
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    constexpr std::int64_t kBlock = 65536;
    constexpr std::int64_t kChunk = 1024;
    const std::size_t bins = std::size_t{1} << width;
    const std::size_t row = bins + 1;                           // and NaN's
    std::vector<std::pair<std::int64_t, std::int64_t>> blocks;  // (first value, count), a sample's each
    for (std::int64_t s = 0; s < samples; ++s) {
        for (std::int64_t b = 0; b < length; b += kBlock) {
            blocks.emplace_back(s * length + b, std::min(kBlock, length - b));
        }
    }
    const int threads = detail::threads_for(static_cast<std::int64_t>(blocks.size()), kBlock);
    std::vector<std::vector<std::int64_t>> tallies(static_cast<std::size_t>(threads));
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads)) {
        std::vector<std::int64_t>& tally = tallies[static_cast<std::size_t>(thread_index())];
        tally.assign(static_cast<std::size_t>(samples) * row, 0);
        Key digits[kChunk];
        std::vector<std::uint32_t> block_counts(row);  // a block's: half the bytes of int64, and no overflow
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            const auto [begin, count] = blocks[b];
            std::fill(block_counts.begin(), block_counts.end(), 0U);
            for (std::int64_t i = 0; i < count; i += kChunk) {
                const std::int64_t n = std::min(kChunk, count - i);
                key_digits(values.data() + begin + i, n, kBits - common - width, static_cast<Key>(bins - 1),
                           static_cast<Key>(bins), digits);
                for (std::int64_t k = 0; k < n; ++k) {
                    ++block_counts[digits[k]];
                }
            }
            std::int64_t* counts = tally.data() + static_cast<std::size_t>(begin / length) * row;
            for (std::size_t d = 0; d < row; ++d) {
                counts[d] += block_counts[d];
            }
        }
    }
    std::vector<std::int64_t> histogram(static_cast<std::size_t>(samples) * bins, 0);
    for (const std::vector<std::int64_t>& tally : tallies) {
        if (tally.empty()) {
            continue;  // a thread OpenMP did not start (a smaller team than asked for: nesting, a thread limit)
        }
        for (std::size_t s = 0; s < static_cast<std::size_t>(samples); ++s) {
            for (std::size_t d = 0; d < bins; ++d) {
                histogram[s * bins + d] += tally[s * row + d];
            }
        }
    }
    return histogram;
}

/// The counts' sums over `group`, in place (one allreduce), moved as int32 where `narrow` (the caller knows that every
/// sum fits): half the bytes.
void allreduce_counts(const Communicator& group, std::vector<std::int64_t>& counts, bool narrow) {
    if (!narrow) {
        allreduce_sum_in_place(group, std::span<std::int64_t>(counts));
        return;
    }
    std::vector<std::int32_t> narrowed(counts.size());
    std::transform(counts.begin(), counts.end(), narrowed.begin(),
                   [](std::int64_t count) { return static_cast<std::int32_t>(count); });
    allreduce_sum_in_place(group, std::span<std::int32_t>(narrowed));
    std::copy(narrowed.begin(), narrowed.end(), counts.begin());
}

/// Whether counts of at most `bound` fit an int32.
bool fits_int32(std::int64_t bound) {
    return bound <= std::numeric_limits<std::int32_t>::max();
}

/// The first pass, over every sample (one histogram each): the bits every key of a sample shares (`common`, the
/// least over the samples that have keys, found from every rank's least and greatest key) are left out, so the digit
/// counts the next `width` bits, and each sample's `prefixes` entry is its shared bits. Each sample's count of values
/// that are not NaN comes with it. Collective over `group`: two allreduces (the keys' range with the longest run, the
/// histograms, as int32 where the values are fewer than 2^31).
template <class Key>
struct FirstPass {
    std::vector<std::int64_t> histogram;
    std::vector<std::int64_t> counts;
    std::vector<Key> prefixes;
    int common = 0;
    int width = 0;
};

/// The first digit's widest: 12 bits below the shared ones keep a sample's histogram within 32 KiB (cache and wire)
/// while leaving few keys under a wanted digit.
constexpr int kWidestFirstDigit = 12;

/// A key as an int64 in the same order, for a MIN allreduce.
template <class Key>
std::int64_t ordered(Key key) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(key) ^ (std::uint64_t{1} << 63));
}
template <class Key>
Key unordered(std::int64_t value) {
    return static_cast<Key>(static_cast<std::uint64_t>(value) ^ (std::uint64_t{1} << 63));
}

template <class T>
FirstPass<KeyOf<T>> first_pass(const Communicator& group, std::span<const T> values, std::int64_t samples,
                               std::int64_t length) {
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    // Per sample the least key and the complement of the greatest (so that one MIN gives both) over every rank, and
    // last the longest run negated: a bound on a bin's count.
    std::vector<std::int64_t> bounds(2 * static_cast<std::size_t>(samples) + 1,
                                     std::numeric_limits<std::int64_t>::max());
    bounds.back() = -length;
    const int threads = detail::threads_for(samples * length, 65536);
    GRIDSHARD_PRAGMA(omp parallel for schedule(static) num_threads(threads))
    for (std::int64_t s = 0; s < samples; ++s) {
        const T* run = values.data() + s * length;
        T least, greatest;
        least_and_greatest(run, length, least, greatest);
        bool number = false;
        for (std::int64_t k = 0; k < length && !(least < greatest) && !number; ++k) {
            number = !std::isnan(run[k]);  // one value or equal ones: is there a number at all?
        }
        number = number || least < greatest;
        if (number) {  // a zero bound widened to -0 below and +0 above: the keys' range holds every key
            least = least == T{0} ? -T{0} : least;
            greatest = greatest == T{0} ? T{0} : greatest;
            bounds[2 * static_cast<std::size_t>(s)] = ordered(key_of(least));
            bounds[2 * static_cast<std::size_t>(s) + 1] = ~ordered(key_of(greatest));
        }
    }
    allreduce_min_in_place(group, std::span<std::int64_t>(bounds));
    FirstPass<Key> pass;
    pass.common = kBits;
    for (std::int64_t s = 0; s < samples; ++s) {
        if (bounds[2 * static_cast<std::size_t>(s)] != std::numeric_limits<std::int64_t>::max()) {  // it has keys
            const Key least = unordered<Key>(bounds[2 * static_cast<std::size_t>(s)]);
            const Key greatest = unordered<Key>(~bounds[2 * static_cast<std::size_t>(s) + 1]);
            pass.common = std::min(pass.common, static_cast<int>(std::countl_zero(static_cast<Key>(least ^ greatest))));
        }
    }
    pass.common = std::min(pass.common, kBits - 1);  // at least one bit to count
    for (std::int64_t s = 0; s < samples; ++s) {
        const bool keys = bounds[2 * static_cast<std::size_t>(s)] != std::numeric_limits<std::int64_t>::max();
        const Key least = keys ? unordered<Key>(bounds[2 * static_cast<std::size_t>(s)]) : Key{0};
        pass.prefixes.push_back(pass.common == 0 ? Key{0} : static_cast<Key>(least >> (kBits - pass.common)));
    }
    pass.width = digit_width(static_cast<std::size_t>(samples), kBits - pass.common, kWidestFirstDigit, kNarrowestDigit,
                             kHistogramBudget);
    pass.histogram = first_digits(values, samples, length, pass.common, pass.width);
    allreduce_counts(group, pass.histogram, fits_int32(-bounds.back() * group.size()));
    pass.counts = sample_counts(pass.histogram, samples, pass.width);
    return pass;
}

/// Every wanted statistic's key from every rank's kept keys (`keys`, sample after sample at `offsets`), gathered on
/// every rank: among its sample's keys that start with its prefix (its first `done` bits, one of `slots`, which
/// slots_of(wanted) gave), the one of its rank. Only the samples `asked` (those with a wanted statistic, sorted; the
/// others kept no key) are counted. Collective over `group`: two allgathers (each rank's count per sample asked, then
/// the keys).
template <class Key>
void select_gathered(const Communicator& group, const std::vector<Key>& keys, const std::vector<std::int64_t>& offsets,
                     const std::vector<Slot<Key>>& slots, const std::vector<std::int64_t>& asked, int done,
                     std::vector<Wanted<Key>>& wanted) {
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    const std::size_t n = asked.size();
    const auto ranks = static_cast<std::size_t>(group.size());
    std::vector<std::int64_t> mine(n);
    for (std::size_t j = 0; j < n; ++j) {
        const auto s = static_cast<std::size_t>(asked[j]);
        mine[j] = offsets[s + 1] - offsets[s];
    }
    const std::vector<std::int64_t> per_rank = allgather(group, std::span<const std::int64_t>(mine));  // [r * n + j]
    std::vector<int> counts(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        counts[r] =
            as_int_count(std::accumulate(per_rank.begin() + static_cast<std::ptrdiff_t>(r * n),
                                         per_rank.begin() + static_cast<std::ptrdiff_t>((r + 1) * n), std::int64_t{0}),
                         "quantile keys");
    }
    const std::vector<Key> all = allgatherv(group, std::span<const Key>(keys), std::span<const int>(counts));
    // Each kept key into the bucket of its prefix, one per wanted prefix (it has one: it was kept for it).
    const int below = kBits - done;
    std::vector<std::vector<Key>> buckets(slots.size());
    auto from = all.begin();
    for (std::size_t r = 0; r < ranks; ++r) {
        for (std::size_t j = 0; j < n; ++j) {
            const std::int64_t sample = asked[j];
            const auto first = std::lower_bound(slots.begin(), slots.end(), Slot<Key>{sample, Key{0}});
            const auto last = std::lower_bound(first, slots.end(), Slot<Key>{sample + 1, Key{0}});
            const auto to = from + static_cast<std::ptrdiff_t>(per_rank[r * n + j]);
            for (; from != to; ++from) {
                const auto prefix = static_cast<Key>(*from >> below);
                const auto slot = std::lower_bound(first, last, Slot<Key>{sample, prefix});
                if (slot != last && slot->prefix == prefix) {
                    buckets[static_cast<std::size_t>(slot - slots.begin())].push_back(*from);
                }
            }
        }
    }
    for (auto& w : wanted) {
        std::vector<Key>& bucket = buckets[w.slot];
        if (w.rank >= static_cast<std::int64_t>(bucket.size())) {
            throw SystemError("quantiles: the keys gathered do not hold the statistic of rank " +
                              std::to_string(w.rank) + " of sample " + std::to_string(w.sample) +
                              " that the histograms counted");
        }
        const auto at = bucket.begin() + static_cast<std::ptrdiff_t>(w.rank);
        std::nth_element(bucket.begin(), at, bucket.end());
        w.prefix = *at;
    }
}

/// Finds every wanted statistic's key: its first digit from the first pass's histograms; then one more read of the
/// values keeps the keys that start with a wanted digit. Where those are few (with each rank's count per sample, at
/// most 1 MiB over every rank, known from the merged histograms), every rank gathers them and reads each statistic
/// off them (two allgathers);
/// otherwise passes for the other digits count them, with histograms of at most 512 KiB in all (2^17 bins as int32
/// where the keys kept are fewer than 2^31, else 2^16), one allreduce each (see sample_quantiles). Collective over
/// `group`.
template <class T>
void select_keys(const Communicator& group, std::span<const T> values, std::int64_t samples, std::int64_t length,
                 const FirstPass<KeyOf<T>>& first, std::vector<Wanted<KeyOf<T>>>& wanted) {
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    for (auto& w : wanted) {
        w.slot = static_cast<std::size_t>(w.sample);
        w.prefix = first.prefixes[static_cast<std::size_t>(w.sample)];
    }
    descend(wanted, first.histogram, first.width);
    const std::vector<Slot<Key>> first_slots = slots_of(wanted);
    std::int64_t kept = 0;  // over every rank: the first histogram's counts of the wanted digits
    const auto digit_mask = static_cast<Key>((std::size_t{1} << first.width) - 1);
    for (const Slot<Key>& slot : first_slots) {
        kept += first.histogram[(static_cast<std::size_t>(slot.sample) << first.width) +
                                static_cast<std::size_t>(slot.prefix & digit_mask)];
    }
    const bool narrow = fits_int32(kept);
    const std::size_t budget = narrow ? std::size_t{1} << 17 : std::size_t{1} << 16;
    const auto [keys, offsets] = wanted_keys(values, samples, length, first_slots, first.common, first.width);
    std::vector<std::int64_t> asked;  // the samples with a wanted statistic
    for (const Slot<Key>& slot : first_slots) {
        if (asked.empty() || asked.back() != slot.sample) {
            asked.push_back(slot.sample);
        }
    }
    // What every rank receives in a gather: the kept keys and each rank's count per sample asked.
    constexpr std::int64_t kGatherBytes = std::int64_t{1} << 20;
    const std::int64_t gathered =
        kept * static_cast<std::int64_t>(sizeof(Key)) +
        static_cast<std::int64_t>(asked.size()) * group.size() * static_cast<std::int64_t>(sizeof(std::int64_t));
    if (first.common + first.width < kBits && gathered <= kGatherBytes) {
        select_gathered(group, keys, offsets, first_slots, asked, first.common + first.width, wanted);
        return;
    }
    for (int done = first.common + first.width; done < kBits;) {
        const std::vector<Slot<Key>> slots = slots_of(wanted);
        const int width = digit_width(slots.size(), kBits - done, kWidestDigit, 1, budget);
        std::vector<std::int64_t> histogram =
            tally_digits<Key, std::int64_t>(std::span<const Key>(keys), std::span<const std::int64_t>(offsets), slots,
                                            done, width, key_itself<Key>, count_one);
        allreduce_counts(group, histogram, narrow);
        descend(wanted, histogram, width);
        done += width;
    }
}

/// The length of each sample's run of `size` values; ArgumentError when they do not form `samples` equal runs or a
/// probability lies outside [0, 1].
std::int64_t run_length(std::size_t size, std::int64_t samples, std::span<const double> probabilities) {
    if (samples < 0 || (samples == 0 && size != 0) || (samples > 0 && size % static_cast<std::size_t>(samples) != 0)) {
        throw ArgumentError("values: " + std::to_string(size) + " do not form " + std::to_string(samples) +
                            " equal runs, one per sample");
    }
    check_quantile_probabilities(probabilities);
    return samples == 0 ? 0 : static_cast<std::int64_t>(size) / samples;
}

/// Exact sums one weighted pass may hold in all (about 5 MB): the digit narrows where many prefixes are wanted.
constexpr std::size_t kWeightedBudget = 4096;
constexpr int kWidestWeightedDigit = 8;

/// A weighted statistic wanted: the smallest key of sample `sample` whose cumulative weight (the weights of the
/// sample's keys up to it) reaches `target` and is above zero, found digit by digit; `below` is the weight of the
/// sample's keys below those that start with `prefix`.
template <class Key>
struct WeightedWanted {
    std::int64_t sample = 0;
    ExactSum target;
    ExactSum below;
    Key prefix = 0;
    std::size_t slot = 0;
};

/// Each wanted statistic's next digit from its slot's merged weights: the first bin where the cumulative weight
/// reaches its target and is above zero (exact comparisons). The statistic lies in its prefix's range, so some bin
/// of the range does.
template <class Key>
void descend_weighted(std::vector<WeightedWanted<Key>>& wanted, const std::vector<ExactSum>& sums, int width) {
    const std::size_t bins = std::size_t{1} << width;
    for (auto& w : wanted) {
        const ExactSum* weights = sums.data() + w.slot * bins;
        std::size_t digit = 0;
        for (; digit + 1 < bins; ++digit) {
            if (weights[digit].sign() == 0) {
                continue;  // no weight here: the cumulative weight stays short
            }
            ExactSum reached = w.below;
            reached.add(weights[digit]);
            ExactSum surplus = reached;
            surplus.subtract(w.target);
            if (surplus.sign() >= 0 && reached.sign() > 0) {
                break;
            }
            w.below = reached;
        }
        w.prefix = static_cast<Key>(static_cast<Key>(w.prefix << width) | digit);
    }
}

/// A finite weight >= 0 as an integer on the grid 2^lowest_bit, which its lowest bit must not lie below.
inline detail::Int128 weight_on_grid(double weight, int lowest_bit) noexcept {
    if (weight == 0.0) {
        return 0;  // +0 or -0, which have no lowest bit (the grid may lie above the subnormals)
    }
    const auto bits = std::bit_cast<std::uint64_t>(weight);  // positive: no sign bit
    const auto biased = static_cast<int>(bits >> 52);
    const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
    const auto mantissa = static_cast<std::int64_t>(biased == 0 ? fraction : fraction | (std::uint64_t{1} << 52));
    return detail::Int128{mantissa} << ((biased == 0 ? -1074 : biased - 1075) - lowest_bit);
}

/// Each bin's integer on the grid 2^lowest_bit as an exact sum.
std::vector<ExactSum> exact_sums_of(const std::vector<detail::Int128>& bins, int lowest_bit) {
    std::vector<ExactSum> sums(bins.size());
    for (std::size_t k = 0; k < bins.size(); ++k) {
        const detail::Int128 v = bins[k];  // >= 0: a sum of weights
        if (v != 0) {
            const auto low = static_cast<std::uint64_t>(v);
            sums[k].add_product(1.0, static_cast<std::int64_t>(v >> 64), lowest_bit + 64);
            sums[k].add_product(1.0, static_cast<std::int64_t>(low >> 32), lowest_bit + 32);
            sums[k].add_product(1.0, static_cast<std::int64_t>(low & 0xffffffffU), lowest_bit);
        }
    }
    return sums;
}

}  // namespace

std::string quantile_weights_problem(std::span<const double> weights) {
    for (const double w : weights) {
        if (!(std::isfinite(w) && w >= 0.0)) {
            return "weights must be finite and >= 0, got " + std::to_string(w);
        }
    }
    return "";
}

template <class T>
SampleQuantiles sample_weighted_quantiles(const Communicator& group, std::span<const T> values,
                                          std::span<const double> weights, std::int64_t samples,
                                          std::span<const double> probabilities) {
    const std::int64_t length = run_length(values.size(), samples, probabilities);
    if (weights.size() != values.size()) {
        throw ArgumentError("weights: " + std::to_string(weights.size()) + " for " + std::to_string(values.size()) +
                            " values; expected one weight per value");
    }
    if (const std::string problem = quantile_weights_problem(weights); !problem.empty()) {
        throw ArgumentError(problem);
    }
    using Key = KeyOf<T>;
    constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(samples), 0);
    ExponentRange range;
    for (std::int64_t s = 0; s < samples; ++s) {
        for (std::int64_t i = s * length; i < (s + 1) * length; ++i) {
            counts[static_cast<std::size_t>(s)] += std::isnan(values[static_cast<std::size_t>(i)]) ? 0 : 1;
            range.add(weights[static_cast<std::size_t>(i)]);
        }
    }
    allreduce_sum_in_place(group, std::span<std::int64_t>(counts));
    // The bins' sums span the weights' range times the values' count: their limbs alone go on the wire.
    const std::int64_t terms = std::accumulate(counts.begin(), counts.end(), std::int64_t{1});
    range = allreduce_range(group, range);
    const LimbWindow window = window_for_range(range, terms);
    // Weights of a few tens of binades (area weights, masks) sum exactly in 128-bit integers on the grid of their
    // lowest bit; a wider range takes an ExactSum per bin. The range is agreed: every rank takes the same path.
    const int lowest_bit = std::max(range.lowest - 52, -1074);
    const bool on_grid =
        range.lowest <= range.highest &&
        range.highest + 1 + static_cast<int>(std::bit_width(static_cast<std::uint64_t>(terms))) - lowest_bit <= 126;
    std::vector<std::int64_t> offsets;
    std::vector<Slot<Key>> slots;
    for (std::int64_t s = 0; s <= samples; ++s) {
        offsets.push_back(s * length);
        if (s < samples) {
            slots.push_back({s, Key{0}});
        }
    }
    const auto weigh = [weights](ExactSum& bin, std::int64_t index) {
        bin.add(weights[static_cast<std::size_t>(index)]);
    };
    const auto weigh_on_grid = [weights, lowest_bit](detail::Int128& bin, std::int64_t index) {
        bin += weight_on_grid(weights[static_cast<std::size_t>(index)], lowest_bit);
    };
    const auto pass = [&](const std::vector<Slot<Key>>& of, int done, int width) {
        const std::span<const std::int64_t> runs(offsets);
        std::vector<ExactSum> sums =
            on_grid ? exact_sums_of(tally_digits<Key, detail::Int128>(values, runs, of, done, width, key_of_value<T>,
                                                                      weigh_on_grid),
                                    lowest_bit)
                    : tally_digits<Key, ExactSum>(values, runs, of, done, width, key_of_value<T>, weigh);
        allreduce_exact(group, std::span<ExactSum>(sums), window);
        return sums;
    };
    int width = digit_width(slots.size(), kBits, kWidestWeightedDigit, 1, kWeightedBudget);
    const std::vector<ExactSum> first = pass(slots, 0, width);

    // Each sample's weight, and per probability the statistic whose cumulative weight reaches q times it.
    std::vector<WeightedWanted<Key>> wanted;
    std::vector<std::int64_t> position(probabilities.size() * static_cast<std::size_t>(samples), -1);  // [k * s + s]
    for (std::int64_t s = 0; s < samples; ++s) {
        ExactSum total;
        for (std::size_t b = 0; b < (std::size_t{1} << width); ++b) {
            total.add(first[(static_cast<std::size_t>(s) << width) + b]);
        }
        if (total.sign() == 0) {
            continue;  // no value, or no weight: NaN
        }
        for (std::size_t k = 0; k < probabilities.size(); ++k) {
            position[k * static_cast<std::size_t>(samples) + static_cast<std::size_t>(s)] =
                static_cast<std::int64_t>(wanted.size());
            WeightedWanted<Key> w;
            w.sample = s;
            w.slot = static_cast<std::size_t>(s);
            w.target.add_scaled(total, probabilities[k]);
            wanted.push_back(std::move(w));
        }
    }
    descend_weighted(wanted, first, width);
    for (int done = width; done < kBits && !wanted.empty(); done += width) {
        slots = slots_of(wanted);
        width = digit_width(slots.size(), kBits - done, kWidestWeightedDigit, 1, kWeightedBudget);
        descend_weighted(wanted, pass(slots, done, width), width);
    }
    std::vector<double> result(position.size());
    for (std::size_t k = 0; k < position.size(); ++k) {
        result[k] = position[k] < 0
                        ? std::numeric_limits<double>::quiet_NaN()
                        : static_cast<double>(value_of<T>(wanted[static_cast<std::size_t>(position[k])].prefix));
    }
    return {std::move(result), std::move(counts)};
}

template SampleQuantiles sample_weighted_quantiles<float>(const Communicator&, std::span<const float>,
                                                          std::span<const double>, std::int64_t,
                                                          std::span<const double>);
template SampleQuantiles sample_weighted_quantiles<double>(const Communicator&, std::span<const double>,
                                                           std::span<const double>, std::int64_t,
                                                           std::span<const double>);

std::string quantile_probabilities_problem(std::span<const double> probabilities) {
    for (const double q : probabilities) {
        if (!(q >= 0.0 && q <= 1.0)) {
            char shortest[32];  // the number as given: its shortest round trip (1.5, not 1.500000)
            const auto end = std::to_chars(shortest, shortest + sizeof shortest, q).ptr;
            return "q=" + std::string(shortest, end) + ": quantiles must be in the range [0, 1]";
        }
    }
    return "";
}

void check_quantile_probabilities(std::span<const double> probabilities) {
    if (std::string problem = quantile_probabilities_problem(probabilities); !problem.empty()) {
        throw ArgumentError(std::move(problem));
    }
}

std::string_view to_string(QuantileMethod method) noexcept {
    return method == QuantileMethod::linear ? "linear" : "inverted_cdf";
}

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
    const std::int64_t length = run_length(values.size(), samples, probabilities);
    const FirstPass<KeyOf<T>> first = first_pass(group, values, samples, length);
    const std::vector<std::int64_t>& counts = first.counts;

    using Key = KeyOf<T>;
    std::vector<Reading> readings;
    const std::vector<Wanted<Key>> wanted = wanted_statistics<Key>(counts, probabilities, method, readings);
    std::vector<Wanted<Key>> found = wanted;  // the ranks asked, kept for the lookup
    select_keys(group, values, samples, length, first, found);
    std::vector<double> result = numpy_quantiles<T>(wanted, found, readings, counts, probabilities.size(), method);
    return {std::move(result), counts};
}

template SampleQuantiles sample_quantiles<float>(const Communicator&, std::span<const float>, std::int64_t,
                                                 std::span<const double>, QuantileMethod);
template SampleQuantiles sample_quantiles<double>(const Communicator&, std::span<const double>, std::int64_t,
                                                  std::span<const double>, QuantileMethod);

}  // namespace gridshard
