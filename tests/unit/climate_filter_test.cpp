// The IPO index's low-pass filter (metrics/climate_index.hpp): scipy's cheby1 design and filtfilt, checked by the
// properties every such design and zero-phase filter has (the ACE test checks the numbers against ACE's scipy).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/metrics/climate_index.hpp"

namespace gridshard {
namespace {

/// |H(e^{i w})| of a filter at `w` radians per sample.
double gain(const DigitalFilter& f, double w) {
    std::complex<double> b = 0.0, a = 0.0;
    const std::complex<double> z = std::polar(1.0, -w);
    std::complex<double> power = 1.0;
    for (std::size_t k = 0; k < std::max(f.a.size(), f.b.size()); ++k) {
        if (k < f.b.size()) {
            b += f.b[k] * power;
        }
        if (k < f.a.size()) {
            a += f.a[k] * power;
        }
        power *= z;
    }
    return std::abs(b / a);
}

TEST(ClimateFilter, ChebyshevDesignHasItsRippleAndCutoff) {
    for (const int order : {1, 2, 4, 5}) {
        const double cutoff = (1.0 / 13.0) / 6.0;  // fme's IPO filter: 13 years of monthly values
        const DigitalFilter f = chebyshev1_lowpass(order, 0.5, cutoff);
        ASSERT_EQ(f.a.size(), static_cast<std::size_t>(order + 1));
        EXPECT_EQ(f.a[0], 1.0);
        // Type I: the gain at the cutoff is the ripple's, 1 at DC for an odd order, 10^(-rp/20) for an even one
        EXPECT_NEAR(gain(f, std::numbers::pi * cutoff), std::pow(10.0, -0.5 / 20.0), 1e-7) << order;
        EXPECT_NEAR(gain(f, 0.0), order % 2 == 1 ? 1.0 : std::pow(10.0, -0.5 / 20.0), 1e-7) << order;
        if (order == 5) {  // fme's order, well past the cutoff: stopped (a 2-year period: 1.5e-5, as scipy's freqz)
            EXPECT_LT(gain(f, std::numbers::pi * 4 * cutoff), 0.01);
            EXPECT_NEAR(gain(f, 2 * std::numbers::pi / 24.0), 1.5444e-5, 1e-8);
        }
    }
    EXPECT_THROW((void)chebyshev1_lowpass(0, 0.5, 0.1), ArgumentError);
    EXPECT_THROW((void)chebyshev1_lowpass(5, 0.5, 1.0), ArgumentError);
}

TEST(ClimateFilter, FiltfiltKeepsSlowSignalsAndRemovesFastOnes) {
    const DigitalFilter f = chebyshev1_lowpass(5, 0.5, (1.0 / 13.0) / 6.0);
    std::vector<double> constant(400, 2.5), slow, fast, mixed;
    for (int t = 0; t < 1200; ++t) {
        slow.push_back(std::sin(2 * std::numbers::pi * t / 600.0));  // a 50-year period
        fast.push_back(std::sin(2 * std::numbers::pi * t / 24.0));   // a 2-year period
        mixed.push_back(slow.back() + fast.back());
    }
    for (const double v : filtfilt(f, constant)) {
        // the steady state from lfilter_zi and the odd extension of a constant keep it, to the rounding of the
        // coefficients' DC gain: sum(b) / sum(a) cancels to 1e-8 in this design (scipy's is 1 - 5.2e-8)
        EXPECT_NEAR(v, 2.5, 2.5e-6);
    }
    const std::vector<double> filtered = filtfilt(f, mixed);
    ASSERT_EQ(filtered.size(), mixed.size());
    const std::vector<double> fast_only = filtfilt(f, fast);
    for (std::size_t t = 156; t + 156 < filtered.size(); ++t) {  // past the trimmed edges, as fme's index
        // zero phase: the slow wave without lag, scaled by the passband's ripple twice (0.5 dB each way: 0.89 to 1)
        EXPECT_NEAR(filtered[t], slow[t], 0.115) << t;
        if (t >= 400 && t < 800) {  // the fast wave stopped (scipy's filtfilt leaves 0.014 of the edges' transients)
            EXPECT_LT(std::fabs(fast_only[t]), 0.02) << t;
        }
    }
    EXPECT_THROW((void)filtfilt(f, std::vector<double>(18, 1.0)), ArgumentError);  // not longer than the padding
}

TEST(ClimateFilter, FilteredIndexNeedsEverySampleLongEnough) {
    MonthlyIndex index;
    index.samples = 2;
    for (int m = 0; m < 1000; ++m) {
        index.years.push_back(2000 + m / 12);
        index.months.push_back(1 + m % 12);
    }
    for (int s = 0; s < 2; ++s) {
        for (int m = 0; m < 1000; ++m) {
            index.values.push_back(std::sin(m / (40.0 + s)) + (m < 3 ? std::nan("") : 0.0));
        }
    }
    const auto filtered = low_pass_filtered(index, 13.0, 960);
    ASSERT_TRUE(filtered.has_value());
    EXPECT_EQ(filtered->values.size(), 2u * (997 - 2 * 156));       // NaN dropped, 13 years trimmed at each end
    EXPECT_FALSE(low_pass_filtered(index, 13.0, 998).has_value());  // 997 months without NaN
}

}  // namespace
}  // namespace gridshard
