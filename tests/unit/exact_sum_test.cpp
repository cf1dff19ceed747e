// Exact summation: correctly rounded results, independent of order and partition; the vectorised block
// path agrees bit for bit with the per-value path. No MPI.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "gridshard/numerics/exact_sum.hpp"
#include "gridshard/numerics/fixed_point.hpp"

namespace gridshard {
namespace {

__extension__ using Quad = __float128;

double exact_of(const std::vector<double>& values) {
    ExactSum sum;
    for (double v : values) {
        sum.add(v);
    }
    return sum.to_double();
}

std::vector<double> random_values(std::mt19937_64& rng, std::size_t n, int min_exponent, int max_exponent) {
    std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
    std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
    std::vector<double> values(n);
    for (double& v : values) {
        v = std::ldexp(mantissa(rng), exponent(rng));
    }
    return values;
}

TEST(ExactSum, CancellationThatPlainSumsLose) {
    EXPECT_EQ(exact_of({1e16, 1.0, -1e16}), 1.0);
    EXPECT_EQ(exact_of({1e308, 1e308, -1e308, -1e308, 1e-300}), 1e-300);
    EXPECT_EQ(exact_of({0x1p-1074, 0x1p-1074}), 0x1p-1073);
    EXPECT_EQ(exact_of({}), 0.0);
    EXPECT_EQ(exact_of({-3.5, 1.25}), -2.25);
    // Ties round to even: 2^53 + 1 lies halfway between 2^53 and 2^53 + 2.
    EXPECT_EQ(exact_of({0x1p53, 1.0}), 0x1p53);
    EXPECT_EQ(exact_of({0x1p53, 1.0, 0x1p-60}), 0x1p53 + 2);
    EXPECT_EQ(exact_of({0x1p53 + 2, 1.0}), 0x1p53 + 4);
    // Overflow of the true sum gives infinity.
    EXPECT_EQ(exact_of({std::numeric_limits<double>::max(), std::numeric_limits<double>::max()}),
              std::numeric_limits<double>::infinity());
}

TEST(ExactSum, SpecialValuesFollowIeee) {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(exact_of({1.0, inf}), inf);
    EXPECT_EQ(exact_of({1.0, -inf}), -inf);
    EXPECT_TRUE(std::isnan(exact_of({inf, -inf})));
    EXPECT_TRUE(std::isnan(exact_of({1.0, nan})));
    ExactSum zero_weight;
    zero_weight.add_product(0.0, nan);
    EXPECT_EQ(zero_weight.to_double(), 0.0);
}

TEST(ExactSum, MatchesQuadPrecisionWhereThatIsExact) {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        // Values within 2^50 of each other: a __float128 sum of them is exact.
        const auto values = random_values(rng, 1000, -20, 30);
        Quad quad = 0;
        for (double v : values) {
            quad += v;
        }
        EXPECT_EQ(exact_of(values), static_cast<double>(quad));
    }
}

TEST(ExactSum, OrderAndPartitionDoNotMatter) {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 50; ++trial) {
        auto values = random_values(rng, 3000, -300, 300);
        ExactSum reference;
        for (double v : values) {
            reference.add(v);
        }
        const DoubleDouble expected = reference.to_double_double();
        std::shuffle(values.begin(), values.end(), rng);
        // Split into parts, sum each, merge them in another order, also through the packed form.
        std::vector<ExactSum> parts(7);
        for (std::size_t k = 0; k < values.size(); ++k) {
            parts[k % parts.size()].add(values[k]);
        }
        ExactSum merged;
        std::vector<std::int64_t> wire(ExactSum::wire_size, 0);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            merged.add(*it);
            std::vector<std::int64_t> packed(ExactSum::wire_size);
            it->pack(packed);
            for (std::size_t w = 0; w < wire.size(); ++w) {
                wire[w] += packed[w];
            }
        }
        EXPECT_EQ(merged.to_double_double().hi, expected.hi);
        EXPECT_EQ(merged.to_double_double().lo, expected.lo);
        EXPECT_EQ(ExactSum::unpack(wire).to_double(), expected.hi);
    }
}

TEST(ExactSum, SubtractAndDoubleDouble) {
    ExactSum a;
    a.add(1.0);
    a.add(0x1p-80);
    ExactSum b;
    b.add(1.0);
    ExactSum difference = a;
    difference.subtract(b);
    EXPECT_EQ(difference.to_double(), 0x1p-80);
    const DoubleDouble dd = a.to_double_double();
    EXPECT_EQ(dd.hi, 1.0);
    EXPECT_EQ(dd.lo, 0x1p-80);
}

// An expansion sums back to the very same accumulator, and a scaled sum is the sum of the scaled terms:
// together they give exact products of exact sums (the variance's W*Q - S^2).
TEST(ExactSum, ExpansionAndScaledSumsAreExact) {
    std::mt19937_64 rng(17);
    for (int trial = 0; trial < 200; ++trial) {
        const std::vector<double> values = random_values(rng, 50, -80, 80);
        ExactSum sum;
        for (double v : values) {
            sum.add(v);
        }
        const std::vector<double> parts = sum.expansion();
        ASSERT_FALSE(parts.empty());
        EXPECT_EQ(parts.front(), sum.to_double());
        ExactSum rebuilt;
        for (double p : parts) {
            rebuilt.add(p);
        }
        ExactSum difference = rebuilt;
        difference.subtract(sum);
        EXPECT_EQ(difference.to_double(), 0.0);
        EXPECT_TRUE(difference.expansion().empty());
        // factor * sum, exactly, against the per-value products.
        const double factor = std::ldexp(std::uniform_real_distribution<double>(-1.0, 1.0)(rng), trial % 40 - 20);
        // Through the packed form, as after an allreduce: a negative sum then carries its sign through the
        // limbs above it, which add_scaled must not take for digits.
        std::vector<std::int64_t> wire(ExactSum::wire_size);
        sum.pack(wire);
        ExactSum scaled;
        scaled.add_scaled(ExactSum::unpack(wire), factor);
        ExactSum products;
        for (double v : values) {
            products.add_product(factor, v);
        }
        ExactSum gap = scaled;
        gap.subtract(products);
        EXPECT_TRUE(gap.expansion().empty()) << trial;
    }
    // (1 + 2^-80)^2 - 1 - 2^-79 = 2^-160: invisible to double-double, exact here.
    ExactSum s;
    s.add(1.0);
    s.add(0x1p-80);
    ExactSum square;
    for (double p : s.expansion()) {
        square.add_scaled(s, p);
    }
    square.add(-1.0);
    square.add(-0x1p-79);
    EXPECT_EQ(square.to_double(), 0x1p-160);
    EXPECT_TRUE(ExactSum{}.expansion().empty());
    ExactSum special;
    special.add(std::numeric_limits<double>::quiet_NaN());
    ASSERT_EQ(special.expansion().size(), 1U);
    EXPECT_TRUE(std::isnan(special.expansion().front()));
    ExactSum infinite;
    infinite.add(std::numeric_limits<double>::infinity());
    ExactSum flipped;
    flipped.add_scaled(infinite, -2.0);
    EXPECT_EQ(flipped.to_double(), -std::numeric_limits<double>::infinity());
}

TEST(ExactSum, ProductsAreExact) {
    ExactSum sum;
    const double a = 0.1;
    const double b = 3.0;
    sum.add_product(a, b);
    sum.add(-(a * b));
    // a*b rounded differs from the exact product by the error term a TwoProduct would give.
    EXPECT_EQ(sum.to_double(), std::fma(a, b, -(a * b)));
}

template <class T>
void expect_block_path_matches_per_value_path(const std::vector<T>& values, double factor) {
    ExactSum block;
    add_exact_sum(values.data(), static_cast<std::int64_t>(values.size()), factor, block);
    ExactSum per_value;
    for (T v : values) {
        per_value.add_product(factor, static_cast<double>(v));
    }
    const DoubleDouble x = block.to_double_double();
    const DoubleDouble y = per_value.to_double_double();
    EXPECT_EQ(std::isnan(x.hi), std::isnan(y.hi));
    if (!std::isnan(x.hi)) {
        EXPECT_EQ(x.hi, y.hi);
        EXPECT_EQ(x.lo, y.lo);
    }
}

TEST(ExactSum, BlockPathIsExact) {
    std::mt19937_64 rng(3);
    const double factors[] = {1.0, 0.3, -7.25e-5, 1e300};
    for (int trial = 0; trial < 40; ++trial) {
        for (double factor : factors) {
            // Narrow range (fast path), wide range (per-value fallback), zeros, lengths over one block.
            expect_block_path_matches_per_value_path(random_values(rng, 5000, -5, 20), factor);
            expect_block_path_matches_per_value_path(random_values(rng, 1500, -200, 200), factor);
            auto with_zeros = random_values(rng, 4097, 0, 10);
            for (std::size_t k = 0; k < with_zeros.size(); k += 3) {
                with_zeros[k] = 0.0;
            }
            expect_block_path_matches_per_value_path(with_zeros, factor);
            std::vector<float> floats(3001);
            for (float& f : floats) {
                f = static_cast<float>(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                                  std::uniform_int_distribution<int>(-30, 40)(rng)));
            }
            expect_block_path_matches_per_value_path(floats, factor);
        }
    }
    expect_block_path_matches_per_value_path(std::vector<double>{1.0, std::numeric_limits<double>::infinity()}, 2.0);
    expect_block_path_matches_per_value_path(std::vector<float>{1.0F, std::nanf("")}, 2.0);
    expect_block_path_matches_per_value_path(std::vector<double>{1e-310, 3e-320, 0.0}, 1.0);
    ExactSum ignored;
    const std::vector<double> nan_row{std::nan(""), 1.0};
    add_exact_sum(nan_row.data(), 2, 0.0, ignored);
    EXPECT_EQ(ignored.to_double(), 0.0);
}

// The fixed-point digits of terms on a grid, added to an ExactSum, equal the per-value exact sum: grids from
// the subnormals to large exponents, terms filling the whole span (103 powers of two), full blocks of the
// largest terms (the digits' headroom), cancellation, and every factor. A term one power beyond the span
// does not survive, so the span the callers prove is the one that matters.
TEST(FixedPoint, DigitsOnAGridAreExact) {
    std::mt19937_64 rng(23);
    auto expect_exact = [](const std::vector<double>& terms, int lowest_bit, double factor) {
        std::uint64_t high = 0;
        std::uint64_t low = 0;
        const double anchor = fixed_point_anchor(lowest_bit);
        for (double v : terms) {
            fixed_point_add(v, anchor, high, low);
        }
        ExactSum fixed;
        add_fixed_point(fixed, factor, high, low, static_cast<std::int64_t>(terms.size()), lowest_bit);
        ExactSum reference;
        for (double v : terms) {
            reference.add_product(factor, v);
        }
        EXPECT_EQ(fixed.to_double(), reference.to_double()) << "grid 2^" << lowest_bit << ", factor " << factor;
        EXPECT_EQ(fixed.to_double_double().lo, reference.to_double_double().lo);
    };
    for (const int lowest_bit : {-1074, -344, -172, -60, 0, 300, 909}) {
        for (int trial = 0; trial < 20; ++trial) {
            // Terms whose 53 bits lie anywhere within the span: an integer mantissa times a power of two.
            std::vector<double> terms(static_cast<std::size_t>(fixed_point_block));
            std::uniform_int_distribution<int> shift(0, fixed_point_span - 53);
            std::uniform_int_distribution<std::int64_t> mantissa(-(std::int64_t{1} << 53) + 1,
                                                                 (std::int64_t{1} << 53) - 1);
            for (double& v : terms) {
                v = std::ldexp(static_cast<double>(mantissa(rng)), lowest_bit + shift(rng));
            }
            if (trial % 4 == 1) {  // cancellation: each term and its negative, then one small term
                for (std::size_t k = 0; k + 1 < terms.size(); k += 2) {
                    terms[k + 1] = -terms[k];
                }
                terms.back() = std::ldexp(1.0, lowest_bit);
            }
            if (trial % 4 == 2) {  // a full block of the largest terms of one sign: the digits' headroom
                std::fill(terms.begin(), terms.end(),
                          std::ldexp(1.0, lowest_bit + fixed_point_span) -
                              std::ldexp(1.0, lowest_bit + fixed_point_span - 53));
            }
            for (const double factor : {1.0, -0.3, 0x1p-900, 3e200}) {
                expect_exact(terms, lowest_bit, factor);
            }
        }
    }
    // The one-digit form: whole multiples of the grid below 2^51, a full block of both signs.
    for (const int lowest_bit : {-1074, -172, -23, 40, 909}) {
        std::vector<double> whole(static_cast<std::size_t>(fixed_point_block));
        std::uniform_int_distribution<std::int64_t> digit(-(std::int64_t{1} << 51) + 1, (std::int64_t{1} << 51) - 1);
        for (double& v : whole) {
            v = std::ldexp(static_cast<double>(digit(rng)), lowest_bit);
        }
        whole.front() = std::ldexp(0x1p51 - 1.0, lowest_bit);
        std::uint64_t digits = 0;
        for (double v : whole) {
            fixed_point_add_whole(v, fixed_point_anchor(lowest_bit), digits);
        }
        for (const double factor : {1.0, -0.3, 3e200}) {
            ExactSum fixed;
            add_fixed_point_whole(fixed, factor, digits, fixed_point_block, lowest_bit);
            ExactSum reference;
            for (double v : whole) {
                reference.add_product(factor, v);
            }
            EXPECT_EQ(fixed.to_double(), reference.to_double()) << "one digit, grid 2^" << lowest_bit;
            EXPECT_EQ(fixed.to_double_double().lo, reference.to_double_double().lo);
        }
    }
    // One power beyond the span the digits cannot hold.
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    fixed_point_add(std::ldexp(1.5, fixed_point_span), fixed_point_anchor(0), high, low);
    ExactSum beyond;
    add_fixed_point(beyond, 1.0, high, low, 1, 0);
    EXPECT_NE(beyond.to_double(), std::ldexp(1.5, fixed_point_span));
}

// A fixed-point sum rounded straight from its integer multiple of the grid gives ExactSum::to_double_double's two
// parts, bit for bit: both digit forms, blocks of random terms and of ties (a remainder of half an ulp either way,
// which rounds to even), cancellation to zero (+0), the largest multiples, grids from the lowest normal to the highest
// allowed; outside them (a subnormal or infinite part possible) it declines.
TEST(FixedPoint, AMultipleOfTheGridRoundsAsTheExactSum) {
    std::mt19937_64 rng(41);
    auto expect_same = [](detail::Int128 multiple, int lowest_bit, const ExactSum& reference, const char* what) {
        const std::optional<DoubleDouble> direct = round_fixed_point_multiple(multiple, lowest_bit);
        ASSERT_TRUE(direct.has_value()) << what << ", grid 2^" << lowest_bit;
        const DoubleDouble expected = reference.to_double_double();
        EXPECT_EQ(std::bit_cast<std::uint64_t>(direct->hi), std::bit_cast<std::uint64_t>(expected.hi))
            << what << ", grid 2^" << lowest_bit << ": " << direct->hi << " vs " << expected.hi;
        EXPECT_EQ(std::bit_cast<std::uint64_t>(direct->lo), std::bit_cast<std::uint64_t>(expected.lo))
            << what << ", grid 2^" << lowest_bit << ": " << direct->lo << " vs " << expected.lo;
    };
    for (const int lowest_bit : {-1022, -400, -52, 0, 77, 902}) {
        for (int trial = 0; trial < 40; ++trial) {
            const bool one_digit = trial % 2 == 0;
            std::vector<double> terms(static_cast<std::size_t>(fixed_point_block));
            std::uniform_int_distribution<int> shift(0, one_digit ? 0 : fixed_point_span - 53);
            const std::int64_t reach = std::int64_t{1} << (one_digit ? 51 : 53);
            std::uniform_int_distribution<std::int64_t> mantissa(-reach + 1, reach - 1);
            for (double& v : terms) {
                v = std::ldexp(static_cast<double>(mantissa(rng)), lowest_bit + shift(rng));
            }
            if (trial % 8 == 3) {  // cancellation to zero
                for (std::size_t k = 0; k + 1 < terms.size(); k += 2) {
                    terms[k + 1] = -terms[k];
                }
            }
            if (trial % 8 == 5 && !one_digit) {  // ties: 2^60 plus half an ulp, either sign, and one ulp more
                std::fill(terms.begin(), terms.end(), 0.0);
                terms[0] = std::ldexp(trial % 16 == 5 ? 1.0 : -1.0, lowest_bit + 60);
                terms[1] = std::ldexp(trial % 16 == 5 ? 1.0 : -1.0, lowest_bit + 7);
                terms[2] = std::ldexp(static_cast<double>(trial % 3), lowest_bit + 8);
            }
            if (trial % 8 == 7) {  // a full block of the largest terms of one sign
                std::fill(terms.begin(), terms.end(),
                          one_digit ? std::ldexp(0x1p51 - 1.0, lowest_bit)
                                    : std::ldexp(1.0, lowest_bit + fixed_point_span) -
                                          std::ldexp(1.0, lowest_bit + fixed_point_span - 53));
            }
            const FixedPointGrid grid{lowest_bit, one_digit};
            std::uint64_t high = 0;
            std::uint64_t low = 0;
            ExactSum reference;
            for (double v : terms) {
                one_digit ? fixed_point_add_whole(v, grid.anchor(), high)
                          : fixed_point_add(v, grid.anchor(), high, low);
                reference.add(v);
            }
            const auto count = static_cast<std::int64_t>(terms.size());
            expect_same(fixed_point_multiple(grid, high, low, count), lowest_bit, reference,
                        one_digit ? "one digit" : "two digits");
            ExactSum deposited;
            grid.deposit(deposited, 1.0, high, low, count);
            EXPECT_EQ(deposited.to_double(), reference.to_double());
        }
    }
    EXPECT_FALSE(round_fixed_point_multiple(1, -1023).has_value());  // its lo could be subnormal
    EXPECT_FALSE(round_fixed_point_multiple(1, 903).has_value());    // its hi could overflow
    EXPECT_FALSE(round_fixed_point_multiple(detail::Int128{1} << 120, 0).has_value());
    EXPECT_FALSE(round_fixed_point_multiple(-(detail::Int128{1} << 120), 0).has_value());
    EXPECT_TRUE(round_fixed_point_multiple((detail::Int128{1} << 120) - 1, 902).has_value());
}

}  // namespace
}  // namespace gridshard
