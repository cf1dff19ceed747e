// The exact quantiles' vectorised reads (quantile_kernels.hpp): loops with no branch, every pointer restrict, and
// the key formed with integer operations, so that they vectorise at each x86-64 level.

#include "quantile_kernels.hpp"

#include <limits>

#include "../core/kernel_dispatch.hpp"

namespace gridshard::detail {

template <class T>
GRIDSHARD_KERNEL void key_digits(const T* __restrict values, std::int64_t n, int below, KeyOf<T> mask, KeyOf<T> none,
                                 KeyOf<T>* __restrict digits) noexcept {
    using Key = KeyOf<T>;
    using Signed = std::make_signed_t<Key>;
    constexpr int kTop = static_cast<int>(sizeof(Key) * 8) - 1;
    constexpr Key sign = Key{1} << kTop;
    for (std::int64_t k = 0; k < n; ++k) {
        const auto bits = std::bit_cast<Key>(values[k]);
        // All ones where the sign is set (flip every bit), else the sign alone (set it): key_of without a branch.
        const auto flip = static_cast<Key>(static_cast<Key>(std::bit_cast<Signed>(bits) >> kTop) | sign);
        const auto digit = static_cast<Key>(static_cast<Key>(static_cast<Key>(bits ^ flip) >> below) & mask);
        digits[k] = values[k] == values[k] ? digit : none;
    }
}

template <class T>
GRIDSHARD_KERNEL void least_and_greatest(const T* __restrict values, std::int64_t n, T& least, T& greatest) noexcept {
    // `x < low ? x : low` passes NaN over and vectorises (minps); lanes of their own stay in vector registers.
    constexpr std::int64_t kLanes = 16;
    T lows[kLanes], highs[kLanes];
    for (std::int64_t k = 0; k < kLanes; ++k) {
        lows[k] = std::numeric_limits<T>::infinity();
        highs[k] = -std::numeric_limits<T>::infinity();
    }
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (std::int64_t k = 0; k < kLanes; ++k) {
            lows[k] = values[i + k] < lows[k] ? values[i + k] : lows[k];
            highs[k] = values[i + k] > highs[k] ? values[i + k] : highs[k];
        }
    }
    for (std::int64_t k = 0; i < n; ++i, ++k) {
        lows[k] = values[i] < lows[k] ? values[i] : lows[k];
        highs[k] = values[i] > highs[k] ? values[i] : highs[k];
    }
    least = lows[0];
    greatest = highs[0];
    for (std::int64_t k = 1; k < kLanes; ++k) {
        least = lows[k] < least ? lows[k] : least;
        greatest = highs[k] > greatest ? highs[k] : greatest;
    }
}

template <class T>
GRIDSHARD_KERNEL void mark_in_ranges(const T* __restrict values, std::int64_t n, std::span<const ValueRange<T>> ranges,
                                     KeyOf<T>* __restrict lanes) noexcept {
    using Key = KeyOf<T>;
    for (std::int64_t l = 0; l < kMarkLanes; ++l) {
        lanes[l] = 0;
    }
    const std::int64_t rows = n / kMarkLanes;
    for (const ValueRange<T> range : ranges) {
        const T low = range.low;
        const T high = range.high;
        for (std::int64_t r = 0; r < rows; ++r) {
            const T* row = values + r * kMarkLanes;
            for (std::int64_t l = 0; l < kMarkLanes; ++l) {
                lanes[l] |= static_cast<Key>(
                    static_cast<Key>(static_cast<Key>(row[l] >= low) & static_cast<Key>(row[l] <= high)) << r);
            }
        }
        for (std::int64_t k = rows * kMarkLanes; k < n; ++k) {
            lanes[k - rows * kMarkLanes] |=
                static_cast<Key>(static_cast<Key>(values[k] >= low && values[k] <= high) << rows);
        }
    }
}

template void key_digits<float>(const float*, std::int64_t, int, std::uint32_t, std::uint32_t, std::uint32_t*) noexcept;
template void key_digits<double>(const double*, std::int64_t, int, std::uint64_t, std::uint64_t,
                                 std::uint64_t*) noexcept;
template void least_and_greatest<float>(const float*, std::int64_t, float&, float&) noexcept;
template void least_and_greatest<double>(const double*, std::int64_t, double&, double&) noexcept;
template void mark_in_ranges<float>(const float*, std::int64_t, std::span<const ValueRange<float>>,
                                    std::uint32_t*) noexcept;
template void mark_in_ranges<double>(const double*, std::int64_t, std::span<const ValueRange<double>>,
                                     std::uint64_t*) noexcept;

}  // namespace gridshard::detail
