// The zonal means: NaN-aware means over longitude per row, for one field or several in one pass each and one
// exchange over the lon group. A row in exact mode keeps its sum as the fixed-point path forms it (a few words,
// fixed_point_rows.hpp); every other row, and every row of fast summation, takes the one engine's per-(channel, row)
// sums (add_zonal_terms).

#include "gridshard/metrics/metrics.hpp"

#include <bit>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../comm/thread_blocks.hpp"
#include "fixed_point_rows.hpp"
#include "gridshard/comm/redistribution.hpp"
#include "metric_support.hpp"
#include "zonal_sums.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// Per (field, channel, row), field-major: the count of the valid points and their mean (NaN without one).
struct ZonalSums {
    std::vector<double> means;
    std::vector<double> counts;
};

// A row's sums as the int64 words they travel in (FixedPointRowSum): the state says whether the row took the
// fixed-point path (and its grid's digits) or the per-row path.
enum RowWord : std::size_t { count_word, state_word, lowest_bit_word, high_word, low_word, terms_word, row_words };
enum RowState : std::int64_t { per_row_path = 0, one_digit = 1, two_digits = 2 };

// The sums of the engine's per-(channel, row) terms for every row: one PartialSums of an ExactSum per slot, one
// allreduce over `lon`. Collective over `lon`.
template <class T>
ZonalSums engine_zonal_sums(const ShardedGrid& grid, std::span<const FieldShard<T>> fields, const TermRequest& request,
                            std::int64_t groups) {
    const Box& box = grid.box();
    const std::int64_t channels = fields.front().channels;
    const std::int64_t slots = static_cast<std::int64_t>(fields.size()) * groups;
    PartialSums partial(slots * request.terms.size(), request.summation, window_for<T>());
    for (std::size_t f = 0; f < fields.size(); ++f) {
        add_zonal_terms(box, ShardInputs<T>{fields[f].values.data(), nullptr, channels}, request, partial,
                        static_cast<std::int64_t>(f) * groups * request.terms.size());
    }
    partial.allreduce(grid.mesh().lon());
    const TermSums sums(std::make_shared<const PartialSums>(std::move(partial)), request.terms, slots, false);
    ZonalSums out{std::vector<double>(static_cast<std::size_t>(slots)),
                  std::vector<double>(static_cast<std::size_t>(slots))};
    for (std::int64_t k = 0; k < slots; ++k) {
        out.means[static_cast<std::size_t>(k)] = sums.mean(k, Term::truth);
        out.counts[static_cast<std::size_t>(k)] = sums.value(k, Term::weight).hi;
    }
    return out;
}

// The zonal sums in exact mode. Each row's fixed-point sum is a few words (FixedPointRowSum) instead
// of an ExactSum; the words of every lon rank are gathered (one allgather over `lon`) and each rank adds them
// exactly, in one ExactSum a thread. The rows that any rank sums by the per-row path (a range the grids cannot hold,
// infinities, a row longer than one block) are merged as exact sums, in one allreduce of those rows alone. Both
// merges are exact, so every mean is the exact path's bits. Collective over `lon`.
//
// With `handed` (a pair: per (channel, row), RowValueSums), a row it marks formed takes its words from there.
template <class T>
ZonalSums fixed_point_zonal_sums(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                 const TermRequest& request, std::int64_t groups,
                                 std::span<const RowValueSums> handed) {
    const Box& box = grid.box();
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    const std::int64_t slots = static_cast<std::int64_t>(fields.size()) * groups;
    const auto words_at = [](std::vector<std::int64_t>& words, std::int64_t slot) {
        return words.data() + slot * static_cast<std::int64_t>(row_words);
    };
    const auto grid_of = [](const std::int64_t* words) {  // the grid of a row's words on the fixed-point path
        return FixedPointGrid{static_cast<int>(words[lowest_bit_word]), words[state_word] == one_digit};
    };
    const auto row_of = [&](std::int64_t slot) {  // slot: field-major, then (channel, row) as add_zonal_terms's
        return fields[static_cast<std::size_t>(slot / groups)].values.data() + (slot % groups) * cols;
    };
    std::vector<std::int64_t> mine(static_cast<std::size_t>(slots) * row_words, 0);
    GRIDSHARD_PRAGMA(omp parallel for schedule(static) num_threads(threads_for(slots, cols)) if (slots > 1))
    for (std::int64_t s = 0; s < slots; ++s) {
        std::int64_t* words = words_at(mine, s);
        const RowValueSums* given = handed.empty() ? nullptr : &handed[static_cast<std::size_t>(s % groups)];
        const std::optional<FixedPointRowSum> sum = given != nullptr && given->formed
                                                        ? (s < groups ? given->truth : given->prediction)
                                                        : fixed_point_row_sum(row_of(s), cols);
        if (!sum) {
            words[state_word] = per_row_path;
            continue;
        }
        words[count_word] = sum->count;
        words[state_word] = sum->grid.one_digit ? one_digit : two_digits;
        words[lowest_bit_word] = sum->grid.lowest_bit;
        words[high_word] = std::bit_cast<std::int64_t>(sum->high);
        words[low_word] = std::bit_cast<std::int64_t>(sum->low);
        words[terms_word] = sum->terms;
    }
    const Communicator& lon = grid.mesh().lon();
    std::vector<std::int64_t> all = lon.size() > 1 ? allgather(lon, mine) : mine;
    const int ranks = lon.size();
    const auto rank_words = [&](int r, std::int64_t s) {
        return words_at(all, static_cast<std::int64_t>(r) * slots + s);
    };

    // The rows some rank summed by the per-row path: the same list on every rank (from the gathered words).
    std::vector<std::int64_t> per_row;
    std::vector<bool> merged_exactly(static_cast<std::size_t>(slots), false);
    for (std::int64_t s = 0; s < slots; ++s) {
        for (int r = 0; r < ranks; ++r) {
            if (rank_words(r, s)[state_word] == per_row_path) {
                per_row.push_back(s);
                merged_exactly[static_cast<std::size_t>(s)] = true;
                break;
            }
        }
    }
    ZonalSums out{std::vector<double>(static_cast<std::size_t>(slots)),
                  std::vector<double>(static_cast<std::size_t>(slots))};
    if (!per_row.empty()) {
        // Row per_row[j]'s terms from slot j * terms on (the request's order: count, then sum); this rank's share by
        // whichever path it took.
        const std::int64_t terms = request.terms.size();
        const std::int64_t count_term = request.terms.index(Term::weight);
        const std::int64_t sum_term = request.terms.index(Term::truth);
        PartialSums exact(terms * static_cast<std::int64_t>(per_row.size()), Summation::reproducible, window_for<T>());
        for (std::size_t j = 0; j < per_row.size(); ++j) {
            const std::int64_t s = per_row[j];
            const std::int64_t* words = words_at(mine, s);
            const std::int64_t slot = static_cast<std::int64_t>(j) * terms;
            if (words[state_word] == per_row_path) {
                const std::int64_t i = (s % groups) % rows;
                const Box row_box{Range{box.lat.begin + i, box.lat.begin + i + 1}, box.lon};
                add_zonal_terms(row_box, ShardInputs<T>{row_of(s), nullptr, 1}, request, exact, slot);
            } else {
                exact.add_count(slot + count_term, 1.0, words[count_word]);
                if (words[terms_word] > 0) {
                    exact.add_fixed_point(slot + sum_term, 1.0, grid_of(words),
                                          std::bit_cast<std::uint64_t>(words[high_word]),
                                          std::bit_cast<std::uint64_t>(words[low_word]), words[terms_word]);
                }
            }
        }
        exact.allreduce(lon);
        for (std::size_t j = 0; j < per_row.size(); ++j) {
            const auto s = static_cast<std::size_t>(per_row[j]);
            const std::int64_t slot = static_cast<std::int64_t>(j) * terms;
            const DoubleDouble count = exact.value_dd(slot + count_term);
            out.means[s] = ratio_of(exact.value_dd(slot + sum_term), count);
            out.counts[s] = count.hi;
        }
    }
    GRIDSHARD_PRAGMA(
        omp parallel num_threads(threads_for(slots, 64 * static_cast<std::int64_t>(ranks))) if (slots > 1)) {
        ExactSum sum;
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t s = 0; s < slots; ++s) {
            if (merged_exactly[static_cast<std::size_t>(s)]) {
                continue;
            }
            std::int64_t count = 0;
            // Where every rank's words lie on one grid, their sum is one integer multiple of it (below 2^127: each
            // rank's below 2^116, and at most 2^10 ranks), rounded without an ExactSum; else an ExactSum adds them.
            std::optional<int> common_bit;
            bool one_grid = ranks <= 1024;
            detail::Int128 multiple = 0;
            for (int r = 0; r < ranks; ++r) {
                const std::int64_t* words = rank_words(r, s);
                count += words[count_word];
                if (words[terms_word] > 0) {
                    const FixedPointGrid row_grid = grid_of(words);
                    one_grid = one_grid && common_bit.value_or(row_grid.lowest_bit) == row_grid.lowest_bit;
                    common_bit = row_grid.lowest_bit;
                    if (one_grid) {
                        multiple +=
                            fixed_point_multiple(row_grid, std::bit_cast<std::uint64_t>(words[high_word]),
                                                 std::bit_cast<std::uint64_t>(words[low_word]), words[terms_word]);
                    }
                }
            }
            std::optional<DoubleDouble> rounded =
                one_grid ? round_fixed_point_multiple(multiple, common_bit.value_or(0)) : std::nullopt;
            if (!rounded) {
                sum.clear();
                for (int r = 0; r < ranks; ++r) {
                    const std::int64_t* words = rank_words(r, s);
                    if (words[terms_word] > 0) {
                        grid_of(words).deposit(sum, 1.0, std::bit_cast<std::uint64_t>(words[high_word]),
                                               std::bit_cast<std::uint64_t>(words[low_word]), words[terms_word]);
                    }
                }
                rounded = sum.to_double_double();
            }
            const DoubleDouble total{static_cast<double>(count), 0.0};  // exact: a count below 2^53
            out.means[static_cast<std::size_t>(s)] = ratio_of(*rounded, total);
            out.counts[static_cast<std::size_t>(s)] = total.hi;
        }
    }
    return out;
}

// The zonal sums of `fields` (per field, channel and row: the count of the valid points and their mean), merged over
// `lon`, and the groups of one field. Collective over `lon`.
template <class T>
std::pair<ZonalSums, std::int64_t> zonal_sums(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                              Summation summation, std::span<const RowValueSums> handed = {}) {
    const Box& box = grid.box();
    std::string error = fields.empty() ? "zonal_means: no fields" : "";
    for (std::size_t f = 0; f < fields.size() && error.empty(); ++f) {
        error = shard_error(fields[f], box, "x");
        if (error.empty() && fields[f].channels != fields.front().channels) {
            error = "zonal_means: every field needs the same channels, got " + std::to_string(fields.front().channels) +
                    " and " + std::to_string(fields[f].channels);
        }
    }
    const std::int64_t channels = fields.empty() ? 0 : fields.front().channels;
    agree_or_throw(grid.mesh().lon(), error, {channels, static_cast<std::int64_t>(fields.size())},
                   "channels and fields");
    const TermRequest request{{Term::weight, Term::truth}, ValidityPolicy::skip_nan, summation};
    const std::int64_t groups = channels * box.lat.size();  // per field
    if (summation == Summation::reproducible) {
        return {fixed_point_zonal_sums(grid, fields, request, groups, handed), groups};
    }
    return {engine_zonal_sums(grid, fields, request, groups), groups};
}

// The zonal means of `fields`, one result per field (zonal_sums with `handed`).
template <class T>
std::vector<std::vector<double>> means_per_field(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                                 Summation summation, std::span<const RowValueSums> handed) {
    const auto [sums, groups] = zonal_sums(grid, fields, summation, handed);
    std::vector<std::vector<double>> result(fields.size());
    for (std::size_t f = 0; f < fields.size(); ++f) {
        const auto first = sums.means.begin() + static_cast<std::ptrdiff_t>(f) * groups;
        result[f].assign(first, first + groups);
    }
    return result;
}

}  // namespace

template <class T>
std::vector<std::vector<double>> detail::zonal_means_with_row_sums(const ShardedGrid& grid, FieldShard<T> truth,
                                                                   FieldShard<T> prediction, Summation summation,
                                                                   std::span<const RowValueSums> handed) {
    const FieldShard<T> fields[] = {truth, prediction};
    return means_per_field<T>(grid, fields, summation, handed);
}

template <class T>
std::vector<std::vector<double>> zonal_means(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                             Summation summation) {
    return means_per_field(grid, fields, summation, {});
}

template <class T>
std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const FieldShard<T> fields[] = {x};
    return zonal_means<T>(grid, fields, summation).front();
}

template <class T>
ZonalMeanAndCount zonal_mean_and_count(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const FieldShard<T> fields[] = {x};
    auto [sums, groups] = zonal_sums<T>(grid, fields, summation);
    return ZonalMeanAndCount{std::move(sums.means), std::move(sums.counts)};
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                 \
    template std::vector<std::vector<double>> detail::zonal_means_with_row_sums<T>(                              \
        const ShardedGrid&, FieldShard<T>, FieldShard<T>, Summation, std::span<const RowValueSums>);             \
    template std::vector<double> zonal_mean<T>(const ShardedGrid&, FieldShard<T>, Summation);                    \
    template ZonalMeanAndCount zonal_mean_and_count<T>(const ShardedGrid&, FieldShard<T>, Summation);            \
    template std::vector<std::vector<double>> zonal_means<T>(const ShardedGrid&, std::span<const FieldShard<T>>, \
                                                             Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
