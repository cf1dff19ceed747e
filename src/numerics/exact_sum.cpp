#include "gridshard/numerics/exact_sum.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "../core/kernel_dispatch.hpp"

namespace gridshard {
namespace {

using detail::Int128;
__extension__ using UInt128 = unsigned __int128;

constexpr std::int64_t digit_mask = (std::int64_t{1} << ExactSum::limb_bits) - 1;
// Each deposit adds less than 2^33 to any limb, so 2^29 deposits stay far below 2^63.
constexpr std::int64_t deposits_before_normalizing = std::int64_t{1} << 29;

// mantissa * 2^exponent == value, with |mantissa| < 2^53 an integer; value finite and non-zero.
void split_double(double value, std::int64_t& mantissa, int& exponent) noexcept {
    int e = 0;
    const double fraction = std::frexp(value, &e);
    mantissa = static_cast<std::int64_t>(std::ldexp(fraction, 53));
    exponent = e - 53;
}

}  // namespace

void ExactSum::deposit_piece(std::int64_t piece, int exponent) noexcept {
    // piece has |piece| < 2^33; it lands in two limbs after shifting to the limb grid.
    const int offset = exponent - lowest_exponent;
    if (offset < 0 || offset / limb_bits + 1 >= limb_count) {
        return;  // outside every product of finite doubles; cannot happen for the public entry points
    }
    const int limb = offset / limb_bits;
    low_ = std::min(low_, limb);
    high_ = std::max(high_, limb + 2);
    const Int128 shifted = static_cast<Int128>(piece) << (offset % limb_bits);
    limbs_[static_cast<std::size_t>(limb)] += static_cast<std::int64_t>(shifted & digit_mask);
    limbs_[static_cast<std::size_t>(limb) + 1] += static_cast<std::int64_t>(shifted >> limb_bits);
}

void ExactSum::deposit(Int128 value, int exponent) noexcept {
    if (value == 0) {
        return;
    }
    // value = p0 + p1*2^32 + p2*2^64 + p3*2^96, p0..p2 in [0, 2^32), p3 signed.
    for (int k = 0; k < 3; ++k) {
        deposit_piece(static_cast<std::int64_t>(value & digit_mask), exponent + k * limb_bits);
        value >>= limb_bits;
    }
    deposit_piece(static_cast<std::int64_t>(value), exponent + 3 * limb_bits);
    if (++deposits_ >= deposits_before_normalizing) {
        normalize();
    }
}

void ExactSum::add_special(double value) noexcept {
    if (std::isnan(value)) {
        ++nan_count_;
    } else if (value > 0) {
        ++positive_infinities_;
    } else {
        ++negative_infinities_;
    }
}

void ExactSum::add(double value) noexcept {
    add_product(1.0, value);
}

void ExactSum::add_product(double factor, double value) noexcept {
    if (factor == 0.0) {
        return;
    }
    if (!std::isfinite(value) || !std::isfinite(factor)) {
        add_special(factor * value);
        return;
    }
    if (value == 0.0) {
        return;
    }
    std::int64_t mf = 0;
    std::int64_t mv = 0;
    int ef = 0;
    int ev = 0;
    split_double(factor, mf, ef);
    split_double(value, mv, ev);
    deposit(static_cast<Int128>(mf) * mv, ef + ev);
}

void ExactSum::add_product(double factor, std::int64_t digits, int exponent) noexcept {
    if (factor == 0.0 || digits == 0) {
        return;
    }
    if (!std::isfinite(factor)) {
        add_special(factor * static_cast<double>(digits));
        return;
    }
    std::int64_t mf = 0;
    int ef = 0;
    split_double(factor, mf, ef);
    deposit(static_cast<Int128>(mf) * digits, ef + exponent);
}

void ExactSum::normalize() noexcept {
    deposits_ = 0;
    if (low_ >= high_) {
        low_ = limb_count;
        high_ = 0;
        return;
    }
    // Carry through the active limbs; the top one keeps the sign.
    constexpr std::int64_t radix = std::int64_t{1} << limb_bits;
    for (int k = low_; k + 1 < high_; ++k) {
        const std::int64_t carry = limbs_[static_cast<std::size_t>(k)] >> limb_bits;  // floor division
        limbs_[static_cast<std::size_t>(k)] -= carry * radix;
        limbs_[static_cast<std::size_t>(k) + 1] += carry;
    }
    // While the top limb exceeds a signed digit, carry it into a new top limb.
    constexpr std::int64_t half_radix = radix / 2;
    while (high_ < limb_count) {
        std::int64_t& top = limbs_[static_cast<std::size_t>(high_) - 1];
        if (top >= -half_radix && top < half_radix) {
            break;
        }
        const std::int64_t carry = top >> limb_bits;
        top -= carry * radix;
        limbs_[static_cast<std::size_t>(high_)] = carry;
        ++high_;
    }
    while (high_ > low_ && limbs_[static_cast<std::size_t>(high_) - 1] == 0) {
        --high_;
    }
    while (low_ < high_ && limbs_[static_cast<std::size_t>(low_)] == 0) {
        ++low_;
    }
    if (low_ >= high_) {
        low_ = limb_count;
        high_ = 0;
    }
}

int ExactSum::sign() const noexcept {
    ExactSum normalised = *this;
    normalised.normalize();
    if (normalised.high_ <= normalised.low_) {
        return 0;
    }
    return normalised.negative() ? -1 : 1;
}

bool ExactSum::negative() const noexcept {
    return high_ > low_ && limbs_[static_cast<std::size_t>(high_) - 1] < 0;
}

void ExactSum::negate() noexcept {
    for (int k = low_; k < high_; ++k) {
        limbs_[static_cast<std::size_t>(k)] = -limbs_[static_cast<std::size_t>(k)];
    }
    std::swap(positive_infinities_, negative_infinities_);
}

void ExactSum::clear() noexcept {
    for (int k = low_; k < high_; ++k) {
        limbs_[static_cast<std::size_t>(k)] = 0;
    }
    low_ = limb_count;
    high_ = 0;
    nan_count_ = 0;
    positive_infinities_ = 0;
    negative_infinities_ = 0;
    deposits_ = 0;
}

void ExactSum::add(const ExactSum& other) noexcept {
    // Limb sums stay far from overflow: this one normalised, the other's limbs bounded by its deposits.
    normalize();
    for (int k = other.low_; k < other.high_; ++k) {
        limbs_[static_cast<std::size_t>(k)] += other.limbs_[static_cast<std::size_t>(k)];
    }
    low_ = std::min(low_, other.low_);
    high_ = std::max(high_, other.high_);
    nan_count_ += other.nan_count_;
    positive_infinities_ += other.positive_infinities_;
    negative_infinities_ += other.negative_infinities_;
    deposits_ = other.deposits_ + 2;
    if (deposits_ >= deposits_before_normalizing) {
        normalize();
    }
}

void ExactSum::subtract(const ExactSum& other) noexcept {
    ExactSum negated = other;
    negated.negate();
    add(negated);
}

void ExactSum::add_scaled(const ExactSum& other, double factor) noexcept {
    if (factor == 0.0) {
        return;
    }
    // The magnitude, so the limbs are a minimal run of digits (a normalised negative sum may carry its sign
    // through every limb above its value), and the sign in the factor.
    ExactSum normalized = other;
    normalized.normalize();
    if (normalized.negative()) {
        normalized.negate();
        normalized.normalize();
        factor = -factor;
    }
    if (!std::isfinite(factor)) {
        const double value = normalized.to_double();
        if (value != 0.0) {
            add_special(factor * value);
        }
        return;
    }
    // Each limb is an integer digit (the top one signed) of weight 2^(lowest_exponent + 32k).
    for (int k = normalized.low_; k < normalized.high_; ++k) {
        add_product(factor, normalized.limbs_[static_cast<std::size_t>(k)], lowest_exponent + k * limb_bits);
    }
    const bool flip = factor < 0.0;
    nan_count_ += normalized.nan_count_;
    positive_infinities_ += flip ? normalized.negative_infinities_ : normalized.positive_infinities_;
    negative_infinities_ += flip ? normalized.positive_infinities_ : normalized.negative_infinities_;
}

std::vector<double> ExactSum::expansion() const {
    std::vector<double> terms;
    ExactSum rest = *this;
    for (double d = rest.to_double(); d != 0.0; d = rest.to_double()) {
        terms.push_back(d);
        if (!std::isfinite(d)) {
            break;
        }
        rest.add(-d);
    }
    return terms;
}

double ExactSum::to_double() const noexcept {
    if (nan_count_ > 0 || (positive_infinities_ > 0 && negative_infinities_ > 0)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    if (positive_infinities_ > 0) {
        return std::numeric_limits<double>::infinity();
    }
    if (negative_infinities_ > 0) {
        return -std::numeric_limits<double>::infinity();
    }
    ExactSum magnitude = *this;
    magnitude.normalize();  // limbs in [0, 2^32) but the top one, which carries the sign
    const bool negative = magnitude.negative();
    if (negative) {
        magnitude.negate();
        magnitude.normalize();
    }
    const auto& limbs = magnitude.limbs_;
    if (magnitude.high_ <= magnitude.low_) {
        return 0.0;
    }
    const int top = magnitude.high_ - 1;  // non-zero after normalize()
    // The three highest limbs as one 96-bit window, and whether anything non-zero lies below it.
    auto limb_at = [&](int k) -> UInt128 {
        return k >= 0 ? static_cast<UInt128>(limbs[static_cast<std::size_t>(k)]) : 0;
    };
    const UInt128 window = (limb_at(top) << 64) | (limb_at(top - 1) << 32) | limb_at(top - 2);
    bool sticky = false;
    for (int k = magnitude.low_; k < top - 2; ++k) {
        sticky = sticky || limbs[static_cast<std::size_t>(k)] != 0;
    }
    const int window_exponent = lowest_exponent + (top - 2) * limb_bits;  // weight of the window's bit 0
    int length = 0;
    for (UInt128 w = window; w != 0; w >>= 1) {
        ++length;
    }
    // Keep 53 bits, or fewer where the result is subnormal (its last bit weighs 2^-1074).
    int drop = std::max(length - 53, -1074 - window_exponent);
    if (drop > length) {
        return negative ? -0.0 : 0.0;  // below half the smallest subnormal
    }
    UInt128 kept = window;
    if (drop > 0) {
        const UInt128 half = static_cast<UInt128>(1) << (drop - 1);
        const UInt128 rest = window & ((half << 1) - 1);
        kept = window >> drop;
        const bool round_up = rest > half || (rest == half && (sticky || (kept & 1) != 0));
        kept += round_up ? 1 : 0;
    } else {
        drop = 0;  // the window holds the value exactly; nothing below it matters for a 53-bit result
    }
    const double result = std::ldexp(static_cast<double>(static_cast<std::uint64_t>(kept)), window_exponent + drop);
    return negative ? -result : result;
}

DoubleDouble ExactSum::to_double_double() const noexcept {
    const double hi = to_double();
    if (!std::isfinite(hi)) {
        return {hi, 0.0};
    }
    ExactSum rest = *this;
    rest.add(-hi);
    return {hi, rest.to_double()};
}

void ExactSum::pack(std::span<std::int64_t> out) const noexcept {
    ExactSum normalized = *this;
    normalized.normalize();
    std::copy(normalized.limbs_.begin(), normalized.limbs_.end(), out.begin());
    out[limb_count] = nan_count_;
    out[limb_count + 1] = positive_infinities_;
    out[limb_count + 2] = negative_infinities_;
}

ExactSum ExactSum::unpack(std::span<const std::int64_t> in) noexcept {
    ExactSum sum;
    std::copy(in.begin(), in.begin() + limb_count, sum.limbs_.begin());
    sum.low_ = 0;
    sum.high_ = limb_count;
    sum.nan_count_ = in[limb_count];
    sum.positive_infinities_ = in[limb_count + 1];
    sum.negative_infinities_ = in[limb_count + 2];
    sum.normalize();
    return sum;
}

bool ExactSum::pack_window(std::span<std::int64_t> out, int first_limb) const noexcept {
    ExactSum normalized = *this;
    normalized.normalize();
    const int last = first_limb + static_cast<int>(out.size()) - 3;  // one past the window's top limb
    // Normalised, every limb outside [low_, high_) is zero (no sign extension): the top limb is signed.
    if (normalized.low_ < normalized.high_ && (normalized.low_ < first_limb || normalized.high_ > last)) {
        return false;
    }
    std::copy(normalized.limbs_.begin() + first_limb, normalized.limbs_.begin() + last, out.begin());
    const auto counts = static_cast<std::size_t>(last - first_limb);
    out[counts] = nan_count_;
    out[counts + 1] = positive_infinities_;
    out[counts + 2] = negative_infinities_;
    return true;
}

ExactSum ExactSum::unpack_window(std::span<const std::int64_t> in, int first_limb) noexcept {
    ExactSum sum;
    const std::size_t limbs = in.size() - 3;
    std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(limbs), sum.limbs_.begin() + first_limb);
    sum.low_ = first_limb;
    sum.high_ = first_limb + static_cast<int>(limbs);
    sum.nan_count_ = in[limbs];
    sum.positive_infinities_ = in[limbs + 1];
    sum.negative_infinities_ = in[limbs + 2];
    sum.normalize();
    return sum;
}

namespace {

// Largest block whose digit sums cannot overflow: 2^11 values of at most 2^50 each.
constexpr std::int64_t block_values = 2048;
constexpr double magic = 0x1.8p52;  // x + magic has exponent 52: its low bits are round(x)
constexpr double two_to_51 = 0x1p51;

template <class T>
using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

template <class T>
GRIDSHARD_KERNEL void add_block(const T* values, std::int64_t n, double factor, ExactSum& sum) noexcept {
    using U = Bits<T>;
    constexpr U magnitude_mask = std::numeric_limits<U>::max() >> 1;
    constexpr U infinity_bits = std::bit_cast<U>(std::numeric_limits<T>::infinity());
    // Sweep: the largest and the smallest non-zero magnitude, as integer max/min of the bit patterns.
    // (bits - 1 wraps zero to the largest pattern, so the minimum of bits - 1 skips zeros.)
    U largest = 0;
    U smallest_less_one = std::numeric_limits<U>::max();
    for (std::int64_t j = 0; j < n; ++j) {
        const U bits = std::bit_cast<U>(values[j]) & magnitude_mask;
        largest = largest > bits ? largest : bits;
        const U less_one = bits - 1;
        smallest_less_one = smallest_less_one < less_one ? smallest_less_one : less_one;
    }
    if (largest == 0) {
        return;
    }
    const U smallest = smallest_less_one + 1;
    const bool finite = largest < infinity_bits;  // NaN and infinities have the largest patterns
    const int top = finite ? std::ilogb(static_cast<double>(std::bit_cast<T>(largest))) + 1 : 0;  // |v| < 2^top
    const int scale_exponent = 50 - top;
    const bool fits = finite && scale_exponent > -1000 && scale_exponent < 1000 &&
                      std::ilogb(static_cast<double>(std::bit_cast<T>(smallest))) >= top - 49;
    if (!fits) {
        for (std::int64_t j = 0; j < n; ++j) {
            sum.add_product(factor, static_cast<double>(values[j]));
        }
        return;
    }
    const double scale = std::ldexp(1.0, scale_exponent);
    const std::uint64_t bias = static_cast<std::uint64_t>(n) * std::bit_cast<std::uint64_t>(magic);
    // Floats (24-bit mantissas) within 2^26 of the largest are whole numbers at this scale: one digit.
    if (std::numeric_limits<T>::digits <= 24 &&
        std::ilogb(static_cast<double>(std::bit_cast<T>(smallest))) >= top - 50 + std::numeric_limits<T>::digits - 1) {
        std::uint64_t whole = 0;
        for (std::int64_t j = 0; j < n; ++j) {
            whole += std::bit_cast<std::uint64_t>(static_cast<double>(values[j]) * scale + magic);
        }
        sum.add_product(factor, static_cast<std::int64_t>(whole - bias), -scale_exponent);
        return;
    }
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double scaled = static_cast<double>(values[j]) * scale;  // exact: a power-of-two scaling
        const double rounded = scaled + magic;                         // rounds to an integer, |hi| < 2^50
        const double remainder = scaled - (rounded - magic);           // exact, |remainder| <= 1/2
        const double low_digit = remainder * two_to_51 + magic;        // exact integer: the block fits
        high += std::bit_cast<std::uint64_t>(rounded);
        low += std::bit_cast<std::uint64_t>(low_digit);
    }
    sum.add_product(factor, static_cast<std::int64_t>(high - bias), -scale_exponent);
    sum.add_product(factor, static_cast<std::int64_t>(low - bias), -scale_exponent - 51);
}

template <class T>
void add_blocks(const T* values, std::int64_t n, double factor, ExactSum& sum) noexcept {
    if (factor == 0.0) {
        return;
    }
    for (std::int64_t start = 0; start < n; start += block_values) {
        add_block(values + start, std::min(block_values, n - start), factor, sum);
    }
}

}  // namespace

void add_exact_sum(const double* values, std::int64_t n, double factor, ExactSum& sum) noexcept {
    add_blocks(values, n, factor, sum);
}

void add_exact_sum(const float* values, std::int64_t n, double factor, ExactSum& sum) noexcept {
    add_blocks(values, n, factor, sum);
}

LimbWindow window_for_range(const ExponentRange& range, std::int64_t terms) noexcept {
    if (range.highest < range.lowest) {
        return {0, 1};
    }
    const int headroom =
        static_cast<int>(std::ceil(std::log2(static_cast<double>(std::max<std::int64_t>(terms, 2))))) + 2;
    const int lowest_bit = std::max(range.lowest - 53, -1074);
    const int highest_bit = range.highest + headroom;
    const int first = std::max(0, (lowest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits - 1);
    const int last =
        std::min(ExactSum::limb_count, (highest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits + 2);
    return {first, last - first};
}

}  // namespace gridshard
