#pragma once
// Sums of several fields at once, exactly: the accumulators that take the members of a forecast, which share a lead
// time, add their exact double-double sum in one pass instead of one pass a member. Internal; no MPI calls.

#include <algorithm>
#include <cstdint>

namespace gridshard::detail {

/// The points a chunk of fields' sums covers: their sums stay in registers and L1.
inline constexpr std::int64_t field_sum_chunk = 256;

/// Points [first, first + size) of `count` fields `stride` apart: per point their exact sum s + e (TwoSum, field by
/// field, the points independent so that the loop vectorises), size <= field_sum_chunk. NaN or an infinity reaches s
/// as IEEE addition carries it (e is then NaN).
template <class T>
inline void sum_fields(const T* __restrict fields, std::int64_t count, std::int64_t stride, std::int64_t first,
                       std::int64_t size, double* __restrict s, double* __restrict e) noexcept {
    for (std::int64_t k = 0; k < size; ++k) {
        s[k] = 0.0;
        e[k] = 0.0;
    }
    for (std::int64_t m = 0; m < count; ++m) {
        const T* row = fields + m * stride + first;
        for (std::int64_t k = 0; k < size; ++k) {
            const double x = static_cast<double>(row[k]);
            const double next = s[k] + x;
            const double v = next - s[k];
            e[k] += (s[k] - (next - v)) + (x - v);
            s[k] = next;
        }
    }
}

/// Points [0, n) of `count` fields `stride` apart, a chunk at a time: `use(first, size, s, e)` with the chunk's
/// exact sums (sum_fields).
template <class T, class Use>
inline void for_each_field_sum(const T* fields, std::int64_t count, std::int64_t stride, std::int64_t n,
                               Use use) noexcept {
    double s[field_sum_chunk];
    double e[field_sum_chunk];
    for (std::int64_t first = 0; first < n; first += field_sum_chunk) {
        const std::int64_t size = std::min(field_sum_chunk, n - first);
        sum_fields(fields, count, stride, first, size, s, e);
        use(first, size, s, e);
    }
}

/// `x` into one point's running sums as TimeMeanAccumulator keeps them: a finite value by TwoSum, any other into the
/// IEEE sum of the non-finite ones.
inline void accumulate(double x, double& sum, double& error, double& special) noexcept {
    const bool finite = (x - x) == 0.0;  // false for NaN or infinite
    const double value = finite ? x : 0.0;
    const double next = sum + value;
    const double v = next - sum;
    error += (sum - (next - v)) + (value - v);
    sum = next;
    special += finite ? 0.0 : x;
}

}  // namespace gridshard::detail
