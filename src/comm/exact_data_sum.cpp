// The exact elementwise sum over the data group (include/gridshard/comm/collectives.hpp, reduce_sum_exact): each
// element's values on the data ranks summed as integers on a grid the ranks agree per element, rounded once.
//
// Per element, one MPI_Allreduce(MAX) of two int16 gives the highest binary exponent of its values and the lowest bit
// any of them holds, with its specials (NaN, +inf, -inf, all -0) on values no exponent takes. An element whose finite
// values span fewer than 2^kGridSpan above that lowest bit (every element of values that are not wildly apart) is an
// integer multiple of `2^lowest` below `2^(lowest + kGridSpan)` on every rank: one int64 digit where the ranks' sum of
// them stays below 2^62 (a float32 element's values span about 24 bits plus their exponents' spread), else two (high,
// low: base 2^52), summed by one MPI_Allreduce(SUM) of int64 over the ranks (integer addition: the same in any order),
// then rounded to T once, to nearest, ties to even, from the 128-bit integer they make. The rare element whose values
// span more (or every element, past kMostRanks data ranks, where the digits' sums could overflow) is gathered instead
// and summed exactly in rank order (ExactSum), then rounded to T once.

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {
namespace {

constexpr int kGridSpan = 103;             // bits above the grid a value may reach: two digits of base 2^52
constexpr std::int64_t kMostRanks = 1024;  // 2^10 digits below 2^52 each stay below 2^62

// Each element's two int16 slots for the MAX allreduce: its top (the binary exponent e of its largest value,
// |v| < 2^e) and its bottom (minus the exponent of the lowest bit any of its values holds). The specials ride on
// values no exponent takes, which the maximum keeps: NaN above +inf in the top, -inf in the bottom, and a zero's top
// says whether it is +0 (so an element whose values are all -0 is -0, as IEEE addition gives).
constexpr std::int16_t kNegativeZero = INT16_MIN;
constexpr std::int16_t kPositiveZero = INT16_MIN + 1;
constexpr std::int16_t kPositiveInfinity = 4000;
constexpr std::int16_t kNaN = 5000;
constexpr std::int16_t kNegativeInfinity = 4000;  // in the bottom slot
constexpr int kSlots = 2;
constexpr std::int64_t kExactCode = 1000;  // the agreement's code of an exact sum of a T: 1000 + sizeof(T)

// The digits' combined integer (a GCC and Clang extension).
__extension__ typedef __int128 Int128;            // NOLINT(modernize-use-using)
__extension__ typedef unsigned __int128 UInt128;  // NOLINT(modernize-use-using)

// A finite non-zero double as `integer 2^exponent` with `integer` odd.
struct OddInteger {
    std::uint64_t integer;
    int exponent;
};

OddInteger odd_integer(std::uint64_t bits) {
    const auto biased = static_cast<int>((bits >> 52) & 0x7ff);
    const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
    const std::uint64_t integer = biased == 0 ? fraction : fraction | (std::uint64_t{1} << 52);
    const int zeros = std::countr_zero(integer);
    return {integer >> zeros, (biased == 0 ? -1074 : biased - 1075) + zeros};
}

// The element's slots (top, bottom) for the MAX allreduce.
void describe(double v, std::int16_t* slot) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    slot[0] = kNegativeZero;
    slot[1] = kNegativeZero;
    if (std::isnan(v)) {
        slot[0] = kNaN;
    } else if (std::isinf(v)) {
        (v > 0 ? slot[0] : slot[1]) = v > 0 ? kPositiveInfinity : kNegativeInfinity;
    } else if (v == 0) {
        slot[0] = std::signbit(v) ? kNegativeZero : kPositiveZero;
    } else {
        const OddInteger odd = odd_integer(bits);
        slot[0] = static_cast<std::int16_t>(odd.exponent + 64 - std::countl_zero(odd.integer));
        slot[1] = static_cast<std::int16_t>(-odd.exponent);
    }
}

// `v` (finite, a multiple of 2^lowest below 2^(lowest + kGridSpan)) as signed digits in `out`: one, `v / 2^lowest`
// (where the element's values span few enough bits that their sum stays below 2^62), or two, `v / 2^lowest = high
// 2^52 + low`. Returns how many it wrote.
int digits_of(double v, int lowest, bool one_digit, std::int64_t* out) {
    Int128 scaled = 0;
    if (v != 0) {
        const OddInteger odd = odd_integer(std::bit_cast<std::uint64_t>(v));
        scaled = static_cast<Int128>(odd.integer) << (odd.exponent - lowest);
    }
    const std::int64_t sign = v < 0 ? -1 : 1;
    if (one_digit) {
        out[0] = sign * static_cast<std::int64_t>(scaled);
        return 1;
    }
    out[0] = sign * static_cast<std::int64_t>(scaled >> 52);
    out[1] = sign * static_cast<std::int64_t>(scaled & ((Int128{1} << 52) - 1));
    return 2;
}

// What the agreed slots say of an element.
enum class Kind { nan, positive_infinity, negative_infinity, zero, negative_zero, finite };

Kind kind_of(const std::int16_t* slot) {
    if (slot[0] == kNaN || (slot[0] == kPositiveInfinity && slot[1] == kNegativeInfinity)) {
        return Kind::nan;
    }
    if (slot[0] == kPositiveInfinity) {
        return Kind::positive_infinity;
    }
    if (slot[1] == kNegativeInfinity) {
        return Kind::negative_infinity;
    }
    if (slot[0] == kPositiveZero) {
        return Kind::zero;
    }
    return slot[0] == kNegativeZero ? Kind::negative_zero : Kind::finite;
}

// `m 2^lowest` rounded once to T, to nearest, ties to even (subnormal results and overflow to infinity included).
template <class T>
T round_scaled(Int128 m, int lowest) {
    if (m == 0) {
        return T{0};
    }
    constexpr int precision = std::numeric_limits<T>::digits;
    constexpr int smallest_normal = std::numeric_limits<T>::min_exponent - 1;  // 2^-1022, 2^-126
    const bool negative = m < 0;
    const auto a = static_cast<UInt128>(negative ? -m : m);
    const auto high_word = static_cast<std::uint64_t>(a >> 64);
    const int length =
        high_word != 0 ? 128 - std::countl_zero(high_word) : 64 - std::countl_zero(static_cast<std::uint64_t>(a));
    const int top = lowest + length - 1;  // the value's leading bit
    const int kept_lowest = std::max(top - precision + 1, smallest_normal - precision + 1);
    const int shift = kept_lowest - lowest;
    double result = 0;
    if (shift <= 0) {
        result = std::ldexp(static_cast<double>(static_cast<std::uint64_t>(a)), lowest);  // exact: below 2^precision
    } else {
        UInt128 kept = 0;
        if (shift <= 128) {  // beyond, the value is below half the least kept unit: it rounds to zero
            kept = shift == 128 ? 0 : a >> shift;
            const UInt128 remainder = shift == 128 ? a : a - (kept << shift);
            const UInt128 half = static_cast<UInt128>(1) << (shift - 1);
            if (remainder > half || (remainder == half && (kept & 1) != 0)) {
                ++kept;
            }
        }
        // `kept` is at most 2^precision: exact in double; the scaling is exact or overflows to infinity, as it must.
        result = std::ldexp(static_cast<double>(static_cast<std::uint64_t>(kept)), kept_lowest);
    }
    return static_cast<T>(negative ? -result : result);  // exact: the value has T's precision (or is infinite)
}

// The exact sum `sum` rounded once to T.
template <class T>
T round_exact(const ExactSum& sum) {
    const DoubleDouble both = sum.to_double_double();
    if constexpr (std::is_same_v<T, double>) {
        return both.hi;
    } else {
        // hi is the double nearest the sum: the float nearest hi is the float nearest the sum unless hi lies exactly
        // halfway between two floats, where the rounded remainder says on which side the sum lies.
        const float nearest = static_cast<float>(both.hi);
        if (!std::isfinite(both.hi) || static_cast<double>(nearest) == both.hi || both.lo == 0) {
            return nearest;
        }
        const float other = std::nextafter(nearest, both.hi > nearest ? std::numeric_limits<float>::infinity()
                                                                      : -std::numeric_limits<float>::infinity());
        const double beyond = std::isinf(other) ? std::copysign(0x1p128, both.hi) : static_cast<double>(other);
        if (both.hi != (static_cast<double>(nearest) + beyond) / 2) {
            return nearest;
        }
        const bool upward = both.lo > 0;
        const float larger = std::max(nearest, other);
        const float smaller = std::min(nearest, other);
        return upward ? larger : smaller;
    }
}

int as_count(std::int64_t n) {
    if (n > INT_MAX) {
        throw ArgumentError("reduce_sum_exact: " + std::to_string(n) + " values do not fit one MPI count (at most " +
                            std::to_string(INT_MAX) + ")");
    }
    return static_cast<int>(n);
}

}  // namespace

template <class T>
void reduce_sum_exact(const ProcessMesh& mesh, std::span<T> values) {
    const Communicator& data = mesh.data();
    const auto n = static_cast<std::int64_t>(values.size());
    // The code differs from reduce_sum's (collectives.cpp: 104 and 108), so ranks that ask one sum and the other
    // raise on every rank in this first allreduce instead of mixing their collectives.
    detail::agree_or_throw(data, "", {n, kExactCode + static_cast<std::int64_t>(sizeof(T))},
                           "reduction length, element type and summation (exact or MPI's)");
    if (n == 0 || data.size() == 1) {
        return;
    }
    std::vector<std::int16_t> slots(static_cast<std::size_t>(n) * kSlots);
    for (std::int64_t k = 0; k < n; ++k) {
        describe(static_cast<double>(values[static_cast<std::size_t>(k)]), slots.data() + k * kSlots);
    }
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, slots.data(), as_count(n * kSlots), MPI_INT16_T, MPI_MAX, data.native());
    // The layout of the digits, alike on every rank (from the agreed slots): none for zeros and specials, one for an
    // element whose D values' sum stays below 2^62, two for the others on the grid; the wide ones are gathered.
    const bool few_ranks = data.size() <= kMostRanks;
    const auto rank_bits = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(data.size())));
    const auto on_the_grid = [&](const std::int16_t* slot) { return few_ranks && slot[0] + slot[1] <= kGridSpan; };
    const auto one_digit = [&](const std::int16_t* slot) { return slot[0] + slot[1] + rank_bits <= 62; };
    std::vector<std::int64_t> digits(static_cast<std::size_t>(2 * n));
    std::vector<std::int64_t> wide;  // the elements whose values span more than the grid holds
    std::size_t used = 0;
    for (std::int64_t k = 0; k < n; ++k) {
        const std::int16_t* slot = slots.data() + k * kSlots;
        if (kind_of(slot) != Kind::finite) {
            continue;  // zeros or a special: no digits
        }
        if (!on_the_grid(slot)) {
            wide.push_back(k);
            continue;
        }
        used += static_cast<std::size_t>(digits_of(static_cast<double>(values[static_cast<std::size_t>(k)]), -slot[1],
                                                   one_digit(slot), digits.data() + used));
    }
    allreduce_sum_in_place(data, std::span<std::int64_t>(digits.data(), used));
    std::vector<T> gathered;
    if (!wide.empty()) {  // alike on every rank: decided from the agreed slots
        std::vector<T> mine(wide.size());
        for (std::size_t w = 0; w < wide.size(); ++w) {
            mine[w] = values[static_cast<std::size_t>(wide[w])];
        }
        gathered = allgather_data(mesh, std::span<const T>(mine));
    }
    constexpr T infinity = std::numeric_limits<T>::infinity();
    const std::int64_t* next = digits.data();
    for (std::int64_t k = 0; k < n; ++k) {
        const std::int16_t* slot = slots.data() + k * kSlots;
        T& out = values[static_cast<std::size_t>(k)];
        switch (kind_of(slot)) {
            case Kind::nan:
                out = std::numeric_limits<T>::quiet_NaN();
                break;
            case Kind::positive_infinity:
                out = infinity;
                break;
            case Kind::negative_infinity:
                out = -infinity;
                break;
            case Kind::zero:
                out = T{0};
                break;
            case Kind::negative_zero:
                out = -T{0};
                break;
            case Kind::finite:
                if (on_the_grid(slot)) {
                    const bool one = one_digit(slot);
                    const Int128 m = one ? Int128{next[0]} : static_cast<Int128>(next[0]) * (Int128{1} << 52) + next[1];
                    next += one ? 1 : 2;
                    out = round_scaled<T>(m, -slot[1]);
                }
                break;  // a wide element: below
        }
    }
    const std::size_t ranks = static_cast<std::size_t>(data.size());
    for (std::size_t w = 0; w < wide.size(); ++w) {
        ExactSum sum;
        for (std::size_t r = 0; r < ranks; ++r) {
            sum.add(static_cast<double>(gathered[r * wide.size() + w]));
        }
        values[static_cast<std::size_t>(wide[w])] = round_exact<T>(sum);
    }
}

template <class T>
void reduce_mean_exact(const ProcessMesh& mesh, std::span<T> values) {
    reduce_sum_exact(mesh, values);
    const T count = static_cast<T>(mesh.data().size());
    for (T& v : values) {
        v /= count;
    }
}

template void reduce_sum_exact<float>(const ProcessMesh&, std::span<float>);
template void reduce_sum_exact<double>(const ProcessMesh&, std::span<double>);
template void reduce_mean_exact<float>(const ProcessMesh&, std::span<float>);
template void reduce_mean_exact<double>(const ProcessMesh&, std::span<double>);

}  // namespace gridshard
