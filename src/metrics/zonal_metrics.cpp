// The zonal means: NaN-aware means over longitude per row, from the one engine's per-(channel, row) sums,
// for one field or several in one pass each and one allreduce over the lon group.

#include "gridshard/metrics/metrics.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// The zonal sums of `fields` (per field, channel and row: the count of the valid points and their sum), merged over
// `lon`, and the groups of one field. Collective over `lon`: one allreduce.
template <class T>
std::pair<TermSums, std::int64_t> zonal_sums(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                             Summation summation) {
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
    PartialSums partial(static_cast<std::int64_t>(fields.size()) * groups * request.terms.size(), summation,
                        window_for<T>());
    for (std::size_t f = 0; f < fields.size(); ++f) {
        add_zonal_terms(box, ShardInputs<T>{fields[f].values.data(), nullptr, channels}, request, partial,
                        static_cast<std::int64_t>(f) * groups * request.terms.size());
    }
    partial.allreduce(grid.mesh().lon());
    return {TermSums(std::make_shared<const PartialSums>(std::move(partial)), request.terms,
                     static_cast<std::int64_t>(fields.size()) * groups, false),
            groups};
}

}  // namespace

template <class T>
std::vector<std::vector<double>> zonal_means(const ShardedGrid& grid, std::span<const FieldShard<T>> fields,
                                             Summation summation) {
    const auto [sums, groups] = zonal_sums(grid, fields, summation);
    std::vector<std::vector<double>> result(fields.size(), std::vector<double>(static_cast<std::size_t>(groups)));
    for (std::size_t f = 0; f < fields.size(); ++f) {
        for (std::int64_t k = 0; k < groups; ++k) {
            result[f][static_cast<std::size_t>(k)] = sums.mean(static_cast<std::int64_t>(f) * groups + k, Term::truth);
        }
    }
    return result;
}

template <class T>
std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const FieldShard<T> fields[] = {x};
    return zonal_means<T>(grid, fields, summation).front();
}

template <class T>
ZonalMeanAndCount zonal_mean_and_count(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const FieldShard<T> fields[] = {x};
    const auto [sums, groups] = zonal_sums<T>(grid, fields, summation);
    ZonalMeanAndCount out{std::vector<double>(static_cast<std::size_t>(groups)),
                          std::vector<double>(static_cast<std::size_t>(groups))};
    for (std::int64_t k = 0; k < groups; ++k) {
        out.means[static_cast<std::size_t>(k)] = sums.mean(k, Term::truth);
        out.counts[static_cast<std::size_t>(k)] = sums.value(k, Term::weight).hi;
    }
    return out;
}

#define GRIDSHARD_INSTANTIATE(T)                                                                                 \
    template std::vector<double> zonal_mean<T>(const ShardedGrid&, FieldShard<T>, Summation);                    \
    template ZonalMeanAndCount zonal_mean_and_count<T>(const ShardedGrid&, FieldShard<T>, Summation);            \
    template std::vector<std::vector<double>> zonal_means<T>(const ShardedGrid&, std::span<const FieldShard<T>>, \
                                                             Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
