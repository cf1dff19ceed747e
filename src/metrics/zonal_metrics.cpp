// The zonal mean: a NaN-aware mean over longitude per row, one allreduce over the lon group.

#include "gridshard/metrics/metrics.hpp"

#include <string>
#include <vector>

#include "metric_support.hpp"
#include "threads.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

template <class T>
std::vector<double> zonal_mean(const ShardedGrid& grid, FieldShard<T> x, Summation summation) {
    const Box& box = grid.box();
    const std::string error = detail::shard_error(x, box, "x");
    const std::int64_t rows = box.lat.size();
    const std::int64_t values = x.channels * rows;
    // Slots: the nansum of each (channel, row), then its count of valid points; no weights here.
    detail::agree_or_throw(grid.mesh().lon(), error, {x.channels}, "channels");
    PartialSums sums(values * 2, summation, window_for<T>());
    // Every (channel, row) has slots of its own, formed by one thread: the same bits for any thread count.
    GRIDSHARD_PRAGMA(omp parallel num_threads(detail::threads_for(values)) if (values > 1)) {
        // Masked rows keep the input type: float rows take the exact sum's cheaper one-digit path.
        std::vector<T> masked(static_cast<std::size_t>(box.lon.size()));
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t k = 0; k < values; ++k) {
            const T* row = row_of(x, box, k / rows, k % rows);
            T* __restrict out = masked.data();
            std::int64_t valid = 0;
            for (std::int64_t j = 0; j < box.lon.size(); ++j) {
                const T v = row[j];
                out[j] = v == v ? v : T{0};
                valid += v == v ? 1 : 0;
            }
            sums.add_row(k, masked.data(), box.lon.size(), 1.0);
            sums.add_count(values + k, 1.0, valid);
        }
    }
    sums.allreduce(grid.mesh().lon());
    std::vector<double> result(static_cast<std::size_t>(values));
    for (std::int64_t k = 0; k < values; ++k) {
        const double count = sums.value(values + k);
        result[static_cast<std::size_t>(k)] = count > 0 ? sums.value(k) / count : nan;
    }
    return result;
}

#define GRIDSHARD_INSTANTIATE(T) \
    template std::vector<double> zonal_mean<T>(const ShardedGrid&, FieldShard<T>, Summation);

GRIDSHARD_INSTANTIATE(float)
GRIDSHARD_INSTANTIATE(double)

}  // namespace gridshard
