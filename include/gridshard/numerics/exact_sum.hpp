#pragma once
/// @file
/// Exact, order-independent summation: the reproducible sums behind every metric (docs/design.md §5).
/// No MPI calls.
///
/// ## Algorithm
/// `ExactSum` is a fixed-point superaccumulator: 140 signed 64-bit limbs, each holding a 32-bit digit
/// plus 31 bits of carry headroom, with limb k weighing 2^(32k - 2240). It covers every product of two
/// finite doubles, so any sum of doubles, or of double products, is held *exactly*. Exact sums do not
/// depend on the order of additions, so merging the accumulators of any decomposition, in any order
/// (an MPI_SUM allreduce of the limbs), gives bit-identical results: reproducibility by construction.
///
/// Values arrive in blocks (a row segment of a shard). `add_exact_sum` first sweeps the block for its
/// largest and smallest non-zero magnitude (integer max/min of the bit patterns, which also catches NaN
/// and infinities), then picks the scale 2^S that puts the largest value just below 2^50 and splits
/// every value into two integer digits, `v*2^S = hi + lo*2^-51`, with the float-to-integer trick
/// `bits(x + 1.5*2^52) = bits(1.5*2^52) + round(x)`; the digits are summed in 64-bit integer lanes,
/// which vectorises. That split is exact whenever the block's values lie within 2^49 of its largest
/// one, which holds for geophysical fields; a block that does not (or that holds NaN or infinities)
/// takes an exact per-value path instead. Each block then costs two exact limb deposits.
///
/// ## Accuracy
/// Results are the exact sum rounded once to nearest (ties to even): the correctly rounded answer,
/// better than any plain or compensated summation. `expansion` and `add_scaled` form exact products of
/// exact sums, so the variance's `W*Sxx - Sx^2` is exact however far the mean lies from zero. NaN and infinities follow
/// IEEE rules (any NaN, or +inf with -inf, gives NaN).
///
/// ## Cost
/// About a dozen vector operations per value (sweep and split) against one for a plain sum (callers that can
/// prove a grid for their terms use the cheaper digits of numerics/fixed_point.hpp instead), and
/// 1,144 bytes per accumulator on the wire (`wire_size` int64) against 8 for a double. An accumulator
/// keeps the range of limbs it uses, so normalising, negating, merging and rounding cost a few limbs for
/// the sums of one field, not 140.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace gridshard {

namespace detail {
__extension__ using Int128 = __int128;  // GCC and Clang; exact products of two 64-bit integers
}

/// A value carried as an unevaluated sum `hi + lo` with |lo| <= ulp(hi)/2.
struct DoubleDouble {
    double hi = 0.0;
    double lo = 0.0;
};

/// An exact sum of doubles (see the file comment). Default-constructed to zero.
class ExactSum {
  public:
    static constexpr int limb_bits = 32;
    static constexpr int lowest_exponent = -2240;
    static constexpr int limb_count = 140;
    /// int64 words in the packed form: the limbs, then counts of NaN, +inf and -inf.
    static constexpr std::size_t wire_size = limb_count + 3;

    /// Adds `value` exactly.
    void add(double value) noexcept;
    /// Adds `factor * value` exactly (no rounding of the product).
    void add_product(double factor, double value) noexcept;
    /// Adds `factor * digits * 2^exponent` exactly.
    void add_product(double factor, std::int64_t digits, int exponent) noexcept;
    /// Adds another exact sum.
    void add(const ExactSum& other) noexcept;
    /// Subtracts another exact sum.
    void subtract(const ExactSum& other) noexcept;
    /// Adds `factor * other` exactly (every limb of `other` times `factor`, no rounding): with the
    /// expansion below, the exact product of two exact sums (the variance's `W*Sxx - Sx^2`).
    void add_scaled(const ExactSum& other, double factor) noexcept;
    /// Makes the sum zero again, touching only the limbs it uses (cheaper than assigning a new one).
    void clear() noexcept;

    /// The sign of the exact sum (-1, 0 or 1), which no rounding can hide; meaningless once NaN or infinities were
    /// added.
    [[nodiscard]] int sign() const noexcept;
    /// The sum rounded to nearest, ties to even; NaN or +-inf when those were added.
    [[nodiscard]] double to_double() const noexcept;
    /// The sum to 106 bits: `hi` is to_double(), `lo` the rounded remainder.
    [[nodiscard]] DoubleDouble to_double_double() const noexcept;
    /// The sum as doubles whose exact sum it is, largest first, each the rounded remainder of the ones
    /// before (at most one per 53 bits the sum spans; bits below 2^-1074, which only products of tiny values
    /// reach, are left out); empty for zero, one value for NaN or +-inf.
    [[nodiscard]] std::vector<double> expansion() const;

    /// Writes `wire_size` int64 words whose elementwise sum over accumulators is their exact sum.
    void pack(std::span<std::int64_t> out) const noexcept;
    /// The accumulator whose packed form is `in` (for example a summed packed form).
    [[nodiscard]] static ExactSum unpack(std::span<const std::int64_t> in) noexcept;

    /// A compact packed form: limbs `[first_limb, first_limb + out.size() - 3)` only, the last one signed,
    /// then the counts of NaN, +inf and -inf. Returns false when the sum does not fit the window; sums of
    /// one element type fit `window_for<T>()`.
    [[nodiscard]] bool pack_window(std::span<std::int64_t> out, int first_limb) const noexcept;
    /// The accumulator whose compact packed form (possibly summed) is `in`, which ends in the 3 counts.
    [[nodiscard]] static ExactSum unpack_window(std::span<const std::int64_t> in, int first_limb) noexcept;

  private:
    void deposit(detail::Int128 value, int exponent) noexcept;
    void deposit_piece(std::int64_t piece, int exponent) noexcept;
    void add_special(double value) noexcept;
    void normalize() noexcept;
    void negate() noexcept;
    [[nodiscard]] bool negative() const noexcept;  // of a normalised sum

    // Limbs outside [low_, high_) are zero, so normalising, negating and merging touch only the limbs a
    // sum uses (a handful for a field of one magnitude), not all 140. Normalised, the limbs below the top
    // one are digits in [0, 2^32) and the top one is signed.
    std::array<std::int64_t, limb_count> limbs_{};
    int low_ = limb_count;
    int high_ = 0;
    std::int64_t nan_count_ = 0;
    std::int64_t positive_infinities_ = 0;
    std::int64_t negative_infinities_ = 0;
    std::int64_t deposits_ = 0;  // since the last normalisation, to keep limbs from overflowing
};

/// The limb window `{first, count}` that holds any unweighted sum of up to 2^31 values of type T
/// (float or double) exactly: from the type's smallest subnormal to its largest value times 2^40.
struct LimbWindow {
    int first = 0;
    int count = 0;
};
template <class T>
[[nodiscard]] constexpr LimbWindow window_for() noexcept {
    constexpr int lowest_bit = sizeof(T) == 4 ? -149 : -1074;
    constexpr int highest_bit = (sizeof(T) == 4 ? 128 : 1024) + 40 + 3 * ExactSum::limb_bits;
    constexpr int first = (lowest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits - 1;
    constexpr int last = (highest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits + 2;
    return {first, last - first};
}

/// The lowest and highest binary exponents of the finite non-zero values added to some sums (empty: lowest above
/// highest).
struct ExponentRange {
    int lowest = std::numeric_limits<int>::max();
    int highest = -std::numeric_limits<int>::max();  // negatable, so that a MIN reduction can merge both bounds
    void add(double value) noexcept {
        if (value != 0.0 && std::isfinite(value)) {
            const int e = std::ilogb(value);
            lowest = std::min(lowest, e);
            highest = std::max(highest, e);
        }
    }
    void add(const ExponentRange& other) noexcept {
        lowest = std::min(lowest, other.lowest);
        highest = std::max(highest, other.highest);
    }
};

/// The limb window that holds every sum of up to `terms` values within `range` (and each product's rounding, down
/// to 2^-1074), with a margin; `{0, 1}` for an empty range.
[[nodiscard]] LimbWindow window_for_range(const ExponentRange& range, std::int64_t terms) noexcept;

/// Adds `factor * sum(values[0..n))` to `sum`, exactly (see the file comment for the block algorithm).
/// A zero factor adds nothing, NaN included. No MPI calls.
void add_exact_sum(const double* values, std::int64_t n, double factor, ExactSum& sum) noexcept;
/// Float input, converted exactly to double.
void add_exact_sum(const float* values, std::int64_t n, double factor, ExactSum& sum) noexcept;

}  // namespace gridshard
