#include "gridshard/metrics/climate_index.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {
namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

/// The mean of the values of `values` that are not NaN (an exact sum, rounded once), NaN when none.
double nan_mean(std::span<const double> values) {
    ExactSum sum;
    std::int64_t kept = 0;
    for (const double v : values) {
        if (!std::isnan(v)) {
            sum.add(v);
            ++kept;
        }
    }
    return kept == 0 ? not_a_number : sum.to_double() / static_cast<double>(kept);
}

/// numpy's nanstd (ddof 0) of `values`: the root of the mean squared distance from the mean, NaN skipped.
double nan_std(std::span<const double> values) {
    const double mean = nan_mean(values);
    std::vector<double> squares;
    for (const double v : values) {
        squares.push_back(std::isnan(v) ? not_a_number : (v - mean) * (v - mean));
    }
    return std::sqrt(nan_mean(squares));
}

}  // namespace

MonthlyIndex monthly_index(std::span<const double> series, std::span<const std::int64_t> years,
                           std::span<const int> months, std::int64_t samples, std::int64_t running_months) {
    const auto size = static_cast<std::int64_t>(series.size());
    if (samples < 1 || size % samples != 0 || years.size() != series.size() || months.size() != series.size() ||
        running_months < 1) {
        throw ArgumentError("monthly_index: " + std::to_string(series.size()) + " values, " +
                            std::to_string(years.size()) + " years and " + std::to_string(months.size()) +
                            " months for " + std::to_string(samples) + " samples, running over " +
                            std::to_string(running_months) + " months");
    }
    const std::int64_t steps = size / samples;
    MonthlyIndex index;
    index.samples = samples;
    std::vector<std::pair<std::int64_t, int>> distinct;
    for (std::size_t k = 0; k < series.size(); ++k) {
        if (months[k] != 0) {
            distinct.emplace_back(years[k], months[k]);
        }
    }
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (const auto& [year, month] : distinct) {
        index.years.push_back(year);
        index.months.push_back(month);
    }
    const auto nmonths = static_cast<std::int64_t>(distinct.size());
    index.values.assign(static_cast<std::size_t>(samples * nmonths), not_a_number);
    std::vector<double> anomalies(static_cast<std::size_t>(steps));
    std::vector<double> monthly(static_cast<std::size_t>(nmonths));
    std::vector<double> chosen;
    for (std::int64_t s = 0; s < samples; ++s) {
        const auto at = [&](std::int64_t t) { return static_cast<std::size_t>(s * steps + t); };
        // The anomalies from this sample's climatology of each month of the year.
        for (int month = 1; month <= 12; ++month) {
            ExactSum sum;
            std::int64_t count = 0;
            for (std::int64_t t = 0; t < steps; ++t) {
                if (months[at(t)] == month) {
                    ++count;
                    if (!std::isnan(series[at(t)])) {
                        sum.add(series[at(t)]);
                    }
                }
            }
            const double climatology = count == 0 ? not_a_number : sum.to_double() / static_cast<double>(count);
            for (std::int64_t t = 0; t < steps; ++t) {
                if (months[at(t)] == month) {
                    anomalies[static_cast<std::size_t>(t)] = series[at(t)] - climatology;
                }
            }
        }
        // Their means per calendar month of the run, and the running mean of those.
        for (std::int64_t m = 0; m < nmonths; ++m) {
            chosen.clear();
            for (std::int64_t t = 0; t < steps; ++t) {
                if (years[at(t)] == index.years[static_cast<std::size_t>(m)] &&
                    months[at(t)] == index.months[static_cast<std::size_t>(m)]) {
                    chosen.push_back(anomalies[static_cast<std::size_t>(t)]);
                }
            }
            monthly[static_cast<std::size_t>(m)] = nan_mean(chosen);
            if (m >= running_months - 1) {
                index.values[static_cast<std::size_t>(s * nmonths + m)] = nan_mean(std::span<const double>(
                    monthly.data() + (m - running_months + 1), static_cast<std::size_t>(running_months)));
            }
        }
    }
    return index;
}

double index_std(const MonthlyIndex& index, const MonthlyIndex* reference) {
    const auto nmonths = static_cast<std::int64_t>(index.years.size());
    if (index.samples == 0 || (reference != nullptr && (reference->samples != index.samples ||
                                                        reference->years.size() != index.years.size()))) {
        return not_a_number;
    }
    ExactSum sum;
    for (std::int64_t s = 0; s < index.samples; ++s) {
        const auto row = [&](const MonthlyIndex& i) {
            return std::span<const double>(i.values.data() + s * nmonths, static_cast<std::size_t>(nmonths));
        };
        const double spread = nan_std(row(index));
        sum.add(reference == nullptr ? spread : spread / nan_std(row(*reference)));
    }
    return sum.to_double() / static_cast<double>(index.samples);  // NaN when any sample's is (numpy's mean)
}

IndexSpectrum index_power_spectrum(const MonthlyIndex& index) {
    const auto nmonths = static_cast<std::int64_t>(index.years.size());
    std::vector<std::vector<double>> kept(static_cast<std::size_t>(index.samples));
    std::size_t n = std::numeric_limits<std::size_t>::max();
    for (std::int64_t s = 0; s < index.samples; ++s) {
        for (std::int64_t m = 0; m < nmonths; ++m) {
            const double v = index.values[static_cast<std::size_t>(s * nmonths + m)];
            if (!std::isnan(v)) {
                kept[static_cast<std::size_t>(s)].push_back(v);
            }
        }
        n = std::min(n, kept[static_cast<std::size_t>(s)].size());
    }
    IndexSpectrum out;
    if (index.samples == 0 || n == 0) {
        return out;
    }
    const std::size_t bins = n / 2 + 1;
    const auto length = static_cast<double>(n);
    std::vector<ExactSum> power(bins);
    for (const std::vector<double>& values : kept) {
        for (std::size_t k = 0; k < bins; ++k) {
            // The discrete Fourier transform at frequency k, by direct sums (an index has at most a few thousand
            // months); the angle reduced modulo n exactly before the cosine and sine.
            std::complex<long double> x = 0;
            for (std::size_t t = 0; t < n; ++t) {
                const auto angle = -2.0L * std::numbers::pi_v<long double> * static_cast<long double>((k * t) % n) /
                                   static_cast<long double>(n);
                x += static_cast<long double>(values[t]) * std::complex<long double>(std::cos(angle), std::sin(angle));
            }
            const double doubled = k == 0 || (n % 2 == 0 && k == n / 2) ? 1.0 : 2.0;
            power[k].add(doubled * static_cast<double>(std::norm(x)) / (length * 12.0));
        }
    }
    for (std::size_t k = 0; k < bins; ++k) {
        out.frequencies.push_back(static_cast<double>(k) / length * 12.0);
        out.power.push_back(power[k].to_double() / static_cast<double>(index.samples));
    }
    return out;
}

double band_power(const IndexSpectrum& spectrum, double shortest_period, double longest_period) {
    const double low = 1.0 / longest_period;
    const double high = 1.0 / shortest_period;
    std::vector<std::pair<double, double>> band;
    for (std::size_t k = 0; k < spectrum.frequencies.size(); ++k) {
        if (spectrum.frequencies[k] >= low && spectrum.frequencies[k] <= high) {
            band.emplace_back(spectrum.frequencies[k], spectrum.power[k]);
        }
    }
    if (band.size() < 2) {
        return not_a_number;
    }
    double integral = 0.0;  // numpy's trapezoid, in order
    for (std::size_t k = 1; k < band.size(); ++k) {
        integral += (band[k].first - band[k - 1].first) * (band[k].second + band[k - 1].second) / 2.0;
    }
    return integral;
}

}  // namespace gridshard
