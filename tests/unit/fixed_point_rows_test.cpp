// The term engine's fixed-point rows (src/metrics/fixed_point_rows.hpp) against its per-row path
// (src/metrics/exact_products.hpp), which sums each term exactly as an ExactSum: every term of every row, float and
// double, under every policy, equal as exact sums, and the fixed-point path taken exactly where its grids hold the
// row. No MPI.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "exact_products.hpp"
#include "fixed_point_rows.hpp"
#include "partial_sums.hpp"
#include "term_rows.hpp"

namespace gridshard::detail {
namespace {

constexpr double row_weight = 0.7071067811865476;  // a cosine of latitude: every bit of the factor counts

// The exact sum of `slot` as its expansion (each double the rounded remainder of the ones before it): one form of
// each value, to compare two sums exactly.
std::vector<double> exact_value(const PartialSums& sums, std::int64_t slot) {
    return sums.exact(slot)->expansion();
}

// The per-row path's sums of the row pair x, y (y empty for one field) in slots weight, then FixedPointSlots' order.
template <class V, ValidityPolicy policy>
PartialSums per_row_sums(const std::vector<V>& x, const std::vector<V>& y) {
    const auto n = static_cast<std::int64_t>(x.size());
    const bool pair = !y.empty();
    std::vector<V> xm(x.size());
    std::vector<V> ym(x.size());
    std::int64_t valid = 0;
    for (std::size_t j = 0; j < x.size(); ++j) {
        const bool ok = counts_both<policy>(x[j], pair ? y[j] : V{0});
        xm[j] = ok ? x[j] : V{0};
        ym[j] = ok && pair ? y[j] : V{0};
        valid += ok ? 1 : 0;
    }
    PartialSums sums(7, Summation::reproducible);
    const Row<V> row{xm.data(), pair ? ym.data() : nullptr, nullptr, row_weight, n};
    std::vector<double> work(static_cast<std::size_t>(4 * n));
    add_valid_weight(sums, 0, row, nullptr, valid);
    add_weighted(sums, 1, xm.data(), row, nullptr, work.data());
    add_weighted_square(sums, 3, xm.data(), row, nullptr, work.data());
    if (pair) {
        add_weighted(sums, 2, ym.data(), row, nullptr, work.data());
        add_weighted_square(sums, 4, ym.data(), row, nullptr, work.data());
        add_weighted_product(sums, 5, xm.data(), ym.data(), row, nullptr, work.data(), PointProduct::difference_square);
        add_weighted_product(sums, 6, xm.data(), ym.data(), row, nullptr, work.data(), PointProduct::cross);
    }
    return sums;
}

// Whether the fixed-point path takes the row (with or without the squares and products), and if it does, that its
// sums are the per-row path's, exactly.
template <class V, ValidityPolicy policy>
bool fixed_point_agrees(const std::vector<V>& x, const std::vector<V>& y, bool moments, const std::string& what) {
    const bool pair = !y.empty();
    FixedPointSlots slots;
    slots.weight = 0;
    slots.sums = {1,
                  pair ? 2 : -1,
                  moments ? 3 : -1,
                  moments && pair ? 4 : -1,
                  moments && pair ? 5 : -1,
                  moments && pair ? 6 : -1};
    PartialSums fixed(7, Summation::reproducible);
    if (!add_fixed_point_row(policy, fixed, x.data(), pair ? y.data() : nullptr, static_cast<std::int64_t>(x.size()),
                             row_weight, slots)) {
        return false;
    }
    const PartialSums reference = per_row_sums<V, policy>(x, y);
    EXPECT_EQ(exact_value(fixed, 0), exact_value(reference, 0)) << what << ": weight";
    for (std::size_t k = 0; k < slots.sums.size(); ++k) {
        if (slots.sums[k] >= 0) {
            EXPECT_EQ(exact_value(fixed, slots.sums[k]), exact_value(reference, slots.sums[k]))
                << what << ": term " << k;
        }
    }
    return true;
}

// Every policy, with and without the prediction and the moments; returns in how many of the cases the fixed-point
// path took the row.
template <class V>
int agreeing_cases(const std::vector<V>& x, const std::vector<V>& y, const std::string& what) {
    int taken = 0;
    for (const bool moments : {false, true}) {
        for (const bool pair : {false, true}) {
            const std::vector<V> none;
            const std::vector<V>& second = pair ? y : none;
            const std::string name = what + (moments ? ", moments" : "") + (pair ? ", pair" : "");
            taken += fixed_point_agrees<V, ValidityPolicy::propagate>(x, second, moments, name + ", propagate") ? 1 : 0;
            taken += fixed_point_agrees<V, ValidityPolicy::skip_nan>(x, second, moments, name + ", skip_nan") ? 1 : 0;
            taken += fixed_point_agrees<V, ValidityPolicy::skip_invalid_pairs>(x, second, moments,
                                                                               name + ", skip_invalid_pairs")
                         ? 1
                         : 0;
        }
    }
    return taken;
}

// Rows of `n` values `center + spread * u` (u uniform in [-1, 1)), the prediction the truth plus `noise * u'`.
struct RowPair {
    std::vector<double> truth;
    std::vector<double> prediction;
};
RowPair random_rows(std::int64_t n, double center, double spread, double noise, unsigned seed) {
    std::mt19937_64 random(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    RowPair rows;
    for (std::int64_t j = 0; j < n; ++j) {
        rows.truth.push_back(center + spread * u(random));
        rows.prediction.push_back(rows.truth.back() + noise * u(random));
    }
    return rows;
}

TEST(FixedPointRows, DoubleRowsSumAsThePerRowPath) {
    for (const std::int64_t n : {1, 7, 1440, 2048, 2049, 4100}) {
        const std::string size = std::to_string(n) + " points";
        // Values of 53 significant bits in a narrow range (a packed field decoded to double): every case takes the
        // fixed-point path.
        const RowPair packed_like = random_rows(n, 5500.0, 400.0, 3.0, 1);
        EXPECT_EQ(agreeing_cases(packed_like.truth, packed_like.prediction, "narrow, " + size), 12) << size;
        // Values whose sums cancel down to their last bits, and differences of one last place.
        std::vector<double> cancelling(static_cast<std::size_t>(n));
        std::vector<double> next(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) {
            const double v = j % 2 == 0 ? 4096.0 + static_cast<double>(2 * (j % 89) + 1) * 0x1p-40 : -4096.5;
            cancelling[static_cast<std::size_t>(j)] = v;
            next[static_cast<std::size_t>(j)] = std::nextafter(v, 0.0);
        }
        EXPECT_EQ(agreeing_cases(cancelling, next, "cancelling, " + size), 12) << size;
        // Magnitudes over 20 binades (around zero), with NaN and an infinity in the prediction: propagate and
        // skip_nan leave the pairs with NaN or the infinity to the per-row path, skip_invalid_pairs keeps them.
        RowPair wide = random_rows(n, 0.0, 1e3, 1e-3, 2);
        wide.truth[0] = 1e-3;
        wide.prediction[static_cast<std::size_t>(n / 2)] = std::numeric_limits<double>::quiet_NaN();
        (void)agreeing_cases(wide.truth, wide.prediction, "wide, " + size);
        wide.prediction[static_cast<std::size_t>(n - 1)] = std::numeric_limits<double>::infinity();
        (void)agreeing_cases(wide.truth, wide.prediction, "wide with an infinity, " + size);
        // Subnormal values (grids at 2^-1074; squares and products underflow to zero).
        const RowPair subnormal = random_rows(n, 0.0, 1e-310, 1e-312, 3);
        EXPECT_GT(agreeing_cases(subnormal.truth, subnormal.prediction, "subnormal, " + size), 0) << size;
    }
}

TEST(FixedPointRows, DoubleRowsOutsideTheGridsTakeThePerRowPath) {
    const std::int64_t n = 100;
    // Magnitudes 30 binades apart: the values fit their grid, the squares and products do not.
    RowPair spread = random_rows(n, 1.0, 0.5, 0.1, 4);
    spread.truth[3] = 1e-9;
    EXPECT_EQ(agreeing_cases(spread.truth, spread.prediction, "30 binades"), 6);  // the cases without moments
    // Magnitudes 60 binades apart: neither fits.
    spread.truth[5] = 1e-18;
    EXPECT_EQ(agreeing_cases(spread.truth, spread.prediction, "60 binades"), 0);
    // Values whose squares would pass the top of double's range.
    const RowPair huge = random_rows(n, 1e200, 1e199, 1e197, 5);
    EXPECT_EQ(agreeing_cases(huge.truth, huge.prediction, "huge"), 6);
    // Differences 40 binades apart: the differences' squares do not fit (the others would).
    RowPair close = random_rows(n, 1000.0, 10.0, 1.0, 6);
    close.prediction[7] = std::nextafter(close.truth[7], 0.0);
    EXPECT_EQ(agreeing_cases(close.truth, close.prediction, "close differences"), 9);
    // An infinity under propagate and skip_nan, a NaN under propagate.
    RowPair special = random_rows(n, 10.0, 1.0, 0.1, 7);
    special.truth[9] = std::numeric_limits<double>::infinity();
    EXPECT_EQ(agreeing_cases(special.truth, special.prediction, "infinity"), 4);  // skip_invalid_pairs' cases
    special.truth[9] = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(agreeing_cases(special.truth, special.prediction, "NaN"), 8);  // skip_nan's and skip_invalid_pairs'
}

TEST(FixedPointRows, FloatRowsSumAsThePerRowPath) {
    for (const std::int64_t n : {5, 1440, 4100}) {
        const RowPair values = random_rows(n, 280.0, 40.0, 1.0, 8);
        const std::vector<float> x(values.truth.begin(), values.truth.end());
        const std::vector<float> y(values.prediction.begin(), values.prediction.end());
        EXPECT_EQ(agreeing_cases(x, y, std::to_string(n) + " float points"), 12);
    }
}

}  // namespace
}  // namespace gridshard::detail
