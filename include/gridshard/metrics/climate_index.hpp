#pragma once
/// @file
/// ACE's regional climate index from a series of regional means (fme's RegionalIndexAggregator, its Niño 3.4 index):
/// per sample the anomalies from the sample's own monthly climatology, their monthly means over the run's calendar
/// months, and an n-month running mean of those; then ACE's summaries of the index: the mean over samples of its
/// standard deviation over time, and the band power of its mean power spectrum. Series arithmetic on values every rank
/// holds alike: no MPI calls, and the same bits wherever it runs.
///
/// @code
///   // Per (sample, step) regional means and each step's calendar year and month: ACE's index and its spread.
///   double nino34_spread(std::span<const double> means, std::span<const std::int64_t> years,
///                        std::span<const int> months, std::int64_t samples) {
///       const gridshard::MonthlyIndex index = gridshard::monthly_index(means, years, months, samples, 5);
///       return gridshard::index_std(index);   // ACE's <sst>_nino34_index_std
///   }
/// @endcode

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace gridshard {

/// An index per sample and calendar month: `years` and `months` (1 to 12) the run's distinct calendar months in
/// order, `values` (sample slowest, then month), NaN where the running mean has no value.
struct MonthlyIndex {
    std::vector<std::int64_t> years;
    std::vector<int> months;
    std::int64_t samples = 0;
    std::vector<double> values;
};

/// ACE's index of `series` (samples x steps, sample slowest; NaN allowed) whose steps fall in calendar `years` and
/// `months` (per step and sample alike, samples x steps; month 0: a step not in the series): per sample and calendar
/// month of the year its climatology, the sum of its values that are not NaN over its steps (NaN among them
/// included in the count, as fme's anomalies_from_monthly_climo), subtracted; the mean of the anomalies per sample
/// and distinct (year, month) of the run (NaN skipped; NaN when none); and at the k-th distinct month from the
/// `running_months`-th on, the mean of the last `running_months` monthly means that are not NaN (fme's
/// running_monthly_mean; NaN before). Throws ArgumentError for sizes that do not fit or running_months < 1.
[[nodiscard]] MonthlyIndex monthly_index(std::span<const double> series, std::span<const std::int64_t> years,
                                         std::span<const int> months, std::int64_t samples,
                                         std::int64_t running_months);

/// ACE's mean over samples of the index's standard deviation over time (numpy's nanstd, ddof 0), and with `reference`
/// of the ratio of each sample's to the reference's (fme's _compute_sample_mean_std). NaN without values.
[[nodiscard]] double index_std(const MonthlyIndex& index, const MonthlyIndex* reference = nullptr);

/// ACE's mean power spectrum of an index (fme's _calculate_power_spectrum_by_sample and
/// compute_power_spectrum_by_sample): each sample's values without NaN, cut to the shortest sample's length n, their
/// discrete Fourier transform's one-sided power |X_k|^2 / (12 n) (doubled but at 0 and at n/2), averaged over samples;
/// `frequencies` in cycles per year (k * 12 / n). Empty when no sample has a value.
struct IndexSpectrum {
    std::vector<double> frequencies, power;
};
[[nodiscard]] IndexSpectrum index_power_spectrum(const MonthlyIndex& index);

/// A digital filter's transfer function: numerator `b` and denominator `a` (a[0] = 1), lowest power first.
struct DigitalFilter {
    std::vector<double> b, a;
};

/// scipy's cheby1(order, ripple_db, cutoff) low-pass design (its analog prototype, cutoff prewarped, bilinear
/// transform; `cutoff` a fraction of the Nyquist frequency, in (0, 1)), as fme's IPO index designs its filter.
/// Throws ArgumentError for an order below 1 or a cutoff outside (0, 1).
[[nodiscard]] DigitalFilter chebyshev1_lowpass(int order, double ripple_db, double cutoff);

/// scipy's filtfilt(b, a, x) with its defaults: `x` extended at each end by its odd reflection of 3 max(len(a),
/// len(b)) values, filtered forward and backward from lfilter_zi's steady state, the extension cut off. Throws
/// ArgumentError for a series not longer than the extension.
[[nodiscard]] std::vector<double> filtfilt(const DigitalFilter& filter, std::span<const double> x);

/// fme's IPO index's filtered index (PairedIPOIndexAggregator._apply_filter_to_samples): per sample its values without
/// NaN, low-pass filtered (a 5th-order Chebyshev filter of 0.5 dB ripple and a cutoff of `cutoff_years`, filtfilt) and
/// trimmed by a cutoff period at each end; none when a sample has fewer than `min_months` values. The samples' series
/// are NaN-padded to the longest (its `years` and `months` are left empty).
[[nodiscard]] std::optional<MonthlyIndex> low_pass_filtered(const MonthlyIndex& index, double cutoff_years,
                                                            std::int64_t min_months);

/// ACE's band power (fme's compute_psd_band_power): the trapezoid integral of `spectrum` over the frequencies from
/// 1 / `longest_period` to 1 / `shortest_period` (years), bounds included; NaN with fewer than two such frequencies.
[[nodiscard]] double band_power(const IndexSpectrum& spectrum, double shortest_period, double longest_period);

}  // namespace gridshard
