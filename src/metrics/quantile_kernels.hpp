#pragma once
// The exact quantiles' vectorised reads of values (quantile.cpp): each value's key and the digit of it a pass counts,
// a run's least and greatest number, and which values lie in ranges of them. Each is compiled for several x86-64
// levels (core/kernel_dispatch.hpp). Internal; no MPI calls.

#include <bit>
#include <cstdint>
#include <span>
#include <type_traits>

namespace gridshard::detail {

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

/// Per value of values[0, n), the bits `(key >> below) & mask` of its key, or `none` for NaN.
template <class T>
void key_digits(const T* values, std::int64_t n, int below, KeyOf<T> mask, KeyOf<T> none, KeyOf<T>* digits) noexcept;

/// The least and greatest number of values[0, n) in the values' own order (NaN passed over; -0 and +0 equal, so a
/// zero may be either), or +inf and -inf when there is none.
template <class T>
void least_and_greatest(const T* values, std::int64_t n, T& least, T& greatest) noexcept;

/// Values `low <= x && x <= high` (so never NaN).
template <class T>
struct ValueRange {
    T low;
    T high;
};

/// Lanes of mark_in_ranges: value k of a chunk is bit k / kMarkLanes of lane k % kMarkLanes.
constexpr std::int64_t kMarkLanes = 64;

/// Which values of values[0, n) one of `ranges` holds, n at most kMarkLanes times the bits of a key: value k is
/// marked by bit k / kMarkLanes of lanes[k % kMarkLanes]. Few values are marked, so a reader visits the set bits
/// alone.
template <class T>
void mark_in_ranges(const T* values, std::int64_t n, std::span<const ValueRange<T>> ranges, KeyOf<T>* lanes) noexcept;

}  // namespace gridshard::detail
