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

namespace {

/// The coefficients of the monic polynomial with `roots` (numpy's poly), lowest power last as numpy's.
std::vector<std::complex<double>> poly(const std::vector<std::complex<double>>& roots) {
    std::vector<std::complex<double>> c{1.0};
    for (const std::complex<double>& r : roots) {
        std::vector<std::complex<double>> next(c.size() + 1, 0.0);
        for (std::size_t k = 0; k < c.size(); ++k) {
            next[k] += c[k];
            next[k + 1] -= r * c[k];
        }
        c = std::move(next);
    }
    return c;
}

/// scipy's lfilter(b, a, x, zi) in direct form II transposed (a[0] = 1): y and the final state.
std::vector<double> lfilter(const DigitalFilter& f, std::span<const double> x, std::vector<double> z) {
    const std::size_t n = f.a.size();
    std::vector<double> y(x.size());
    for (std::size_t t = 0; t < x.size(); ++t) {
        const double out = f.b[0] * x[t] + z[0];
        for (std::size_t i = 0; i + 2 < n; ++i) {
            z[i] = f.b[i + 1] * x[t] + z[i + 1] - f.a[i + 1] * out;
        }
        z[n - 2] = f.b[n - 1] * x[t] - f.a[n - 1] * out;
        y[t] = out;
    }
    return y;
}

/// scipy's lfilter_zi(b, a): the state of a step response's steady state, (I - companion(a)^T) zi = b[1:] - a[1:] b[0]
/// solved by Gaussian elimination with partial pivoting.
std::vector<double> lfilter_zi(const DigitalFilter& f) {
    const std::size_t n = f.a.size() - 1;
    std::vector<std::vector<double>> m(n, std::vector<double>(n + 1, 0.0));
    for (std::size_t i = 0; i < n; ++i) {
        // companion(a): first row -a[1:], ones below the diagonal; its transpose: first column -a[1:], ones above
        m[i][0] += f.a[i + 1];
        m[i][i] += 1.0;
        if (i + 1 < n) {
            m[i][i + 1] -= 1.0;
        }
        m[i][n] = f.b[i + 1] - f.a[i + 1] * f.b[0];
    }
    for (std::size_t col = 0; col < n; ++col) {
        std::size_t pivot = col;
        for (std::size_t r = col + 1; r < n; ++r) {
            if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) {
                pivot = r;
            }
        }
        std::swap(m[col], m[pivot]);
        for (std::size_t r = col + 1; r < n; ++r) {
            const double factor = m[r][col] / m[col][col];
            for (std::size_t k = col; k <= n; ++k) {
                m[r][k] -= factor * m[col][k];
            }
        }
    }
    std::vector<double> zi(n);
    for (std::size_t r = n; r-- > 0;) {
        double v = m[r][n];
        for (std::size_t k = r + 1; k < n; ++k) {
            v -= m[r][k] * zi[k];
        }
        zi[r] = v / m[r][r];
    }
    return zi;
}

}  // namespace

DigitalFilter chebyshev1_lowpass(int order, double ripple_db, double cutoff) {
    if (order < 1 || !(cutoff > 0.0 && cutoff < 1.0)) {
        throw ArgumentError("chebyshev1_lowpass: order " + std::to_string(order) + " and cutoff " +
                            std::to_string(cutoff) + " (a fraction of the Nyquist frequency in (0, 1))");
    }
    // scipy's cheb1ap: the analog prototype's poles and gain
    const double eps = std::sqrt(std::pow(10.0, 0.1 * ripple_db) - 1.0);
    const double mu = std::asinh(1.0 / eps) / order;
    std::vector<std::complex<double>> poles;
    std::complex<double> gain_product = 1.0;
    for (int m = -order + 1; m < order; m += 2) {
        const double theta = std::numbers::pi * m / (2.0 * order);
        const std::complex<double> p = -std::sinh(std::complex<double>(mu, theta));
        poles.push_back(p);
        gain_product *= -p;
    }
    double k = gain_product.real();
    if (order % 2 == 0) {
        k /= std::sqrt(1.0 + eps * eps);
    }
    // iirfilter: the cutoff prewarped (fs = 2), lp2lp_zpk, then bilinear_zpk
    const double fs = 2.0;
    const double warped = 2.0 * fs * std::tan(std::numbers::pi * cutoff / fs);
    for (std::complex<double>& p : poles) {
        p *= warped;
    }
    k *= std::pow(warped, static_cast<double>(poles.size()));
    const double fs2 = 2.0 * fs;
    std::complex<double> denominator = 1.0;
    std::vector<std::complex<double>> zeros(poles.size(), -1.0);
    for (std::complex<double>& p : poles) {
        denominator *= fs2 - p;
        p = (fs2 + p) / (fs2 - p);
    }
    k *= (1.0 / denominator).real();
    // zpk2tf
    const std::vector<std::complex<double>> b = poly(zeros), a = poly(poles);
    DigitalFilter out;
    for (const std::complex<double>& c : b) {
        out.b.push_back(k * c.real());
    }
    for (const std::complex<double>& c : a) {
        out.a.push_back(c.real());
    }
    return out;
}

std::vector<double> filtfilt(const DigitalFilter& filter, std::span<const double> x) {
    const std::size_t pad = 3 * std::max(filter.a.size(), filter.b.size());
    const std::size_t n = x.size();
    if (n <= pad) {
        throw ArgumentError("filtfilt: a series of " + std::to_string(n) + " values is not longer than the " +
                            std::to_string(pad) + " of its extension");
    }
    std::vector<double> ext;
    ext.reserve(n + 2 * pad);
    for (std::size_t k = pad; k >= 1; --k) {
        ext.push_back(2.0 * x[0] - x[k]);
    }
    ext.insert(ext.end(), x.begin(), x.end());
    for (std::size_t k = 1; k <= pad; ++k) {
        ext.push_back(2.0 * x[n - 1] - x[n - 1 - k]);
    }
    const std::vector<double> zi = lfilter_zi(filter);
    const auto scaled = [&](double by) {
        std::vector<double> z = zi;
        for (double& v : z) {
            v *= by;
        }
        return z;
    };
    std::vector<double> y = lfilter(filter, ext, scaled(ext.front()));
    std::reverse(y.begin(), y.end());
    y = lfilter(filter, y, scaled(y.front()));
    std::reverse(y.begin(), y.end());
    return {y.begin() + static_cast<std::ptrdiff_t>(pad), y.end() - static_cast<std::ptrdiff_t>(pad)};
}

std::optional<MonthlyIndex> low_pass_filtered(const MonthlyIndex& index, double cutoff_years, std::int64_t min_months) {
    const auto nmonths = static_cast<std::int64_t>(index.years.size());
    const DigitalFilter filter = chebyshev1_lowpass(5, 0.5, (1.0 / cutoff_years) / (0.5 * 12.0));
    const auto trim = static_cast<std::size_t>(cutoff_years * 12.0);
    std::vector<std::vector<double>> filtered;
    std::size_t longest = 0;
    for (std::int64_t s = 0; s < index.samples; ++s) {
        std::vector<double> kept;
        for (std::int64_t m = 0; m < nmonths; ++m) {
            const double v = index.values[static_cast<std::size_t>(s * nmonths + m)];
            if (!std::isnan(v)) {
                kept.push_back(v);
            }
        }
        if (static_cast<std::int64_t>(kept.size()) < min_months || kept.size() <= 2 * trim) {
            return std::nullopt;
        }
        std::vector<double> y = filtfilt(filter, kept);
        filtered.emplace_back(y.begin() + static_cast<std::ptrdiff_t>(trim),
                              y.end() - static_cast<std::ptrdiff_t>(trim));
        longest = std::max(longest, filtered.back().size());
    }
    MonthlyIndex out;
    out.samples = index.samples;
    for (std::vector<double>& series : filtered) {
        series.resize(longest, not_a_number);
        out.values.insert(out.values.end(), series.begin(), series.end());
    }
    out.years.assign(longest, 0);  // index_std's length of a row; no calendar months of their own
    out.months.assign(longest, 0);
    return out;
}

}  // namespace gridshard
