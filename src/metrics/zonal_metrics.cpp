// The zonal mean: a NaN-aware mean over longitude per row, from the one engine's per-(channel, row) sums
// and one allreduce over the lon group.

#include "gridshard/metrics/metrics.hpp"

#include <memory>
#include <string>
#include <vector>

#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

template <class T>
std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const Box& box = grid.box();
    agree_or_throw(grid.mesh().lon(), shard_error(x, box, "x"), {x.channels}, "channels");
    const TermRequest request{{Term::weight, Term::truth}, ValidityPolicy::skip_nan, summation};
    const RowWeights unit_weights(Weights{}, Box{});  // unused: every point weighs 1
    PartialSums partial = form_terms(grid.grid(), box, ShardInputs<T>{x.values.data(), nullptr, x.channels},
                                     unit_weights, request, Grouping::channel_row);
    partial.allreduce(grid.mesh().lon());
    const TermSums sums(std::make_shared<const PartialSums>(std::move(partial)), request.terms,
                        x.channels * box.lat.size(), false);
    return per_channel(sums, [&](std::int64_t k) { return sums.mean(k, Term::truth); });
}

#define GRIDSHARD_INSTANTIATE(T) \
    template std::vector<double> zonal_mean<T>(const ShardedGrid&, FieldShard<T>, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
