// A reference index read from netCDF, and its series over one sample's run as ACE's get_sample_index_series forms it.

#include "gridshard/io/reference_index.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include "gridshard/core/error.hpp"
#include "gridshard/io/netcdf_error.hpp"
#include "netcdf_handle.hpp"

namespace gridshard::io {
namespace {

std::string index_setting(const std::string& path) {
    return setting_name("enso_coefficient_index") + " '" + path + "'";
}

/// numpy's sum of float64 values (its pairwise summation: blocks of up to 128 in eight running sums, halves above),
/// so that a mean is numpy's (and xarray's) to the bit.
double numpy_pairwise_sum(std::span<const double> a) {
    const std::size_t n = a.size();
    if (n < 8) {
        double sum = 0.0;
        for (double v : a) {
            sum += v;
        }
        return sum;
    }
    if (n <= 128) {
        double r[8];
        std::copy_n(a.begin(), 8, r);
        std::size_t i = 8;
        for (; i < n - n % 8; i += 8) {
            for (std::size_t j = 0; j < 8; ++j) {
                r[j] += a[i + j];
            }
        }
        double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) {
            sum += a[i];
        }
        return sum;
    }
    std::size_t half = n / 2;
    half -= half % 8;
    return numpy_pairwise_sum(a.first(half)) + numpy_pairwise_sum(a.subspan(half));
}

}  // namespace

ReferenceIndex read_reference_index(const std::string& path) {
    const std::string file = index_setting(path);
    const detail::NetcdfHandle nc(path);
    const std::optional<int> time = nc.find_var("time");
    if (!time || nc.var_dims(*time).size() != 1) {
        throw ArgumentError(file + ": no 'time' coordinate over one dim");
    }
    const int time_dim = nc.var_dims(*time).front();
    const auto count = static_cast<std::size_t>(nc.dim_length(time_dim));
    const std::optional<std::string> units = nc.text_attribute(*time, "units");
    if (!units) {
        throw ArgumentError(file + ": 'time' has no units");
    }
    // The calendar's and the units' own errors, with the file named.
    const auto named = [&file](const auto& make) {
        try {
            return make();
        } catch (const NetcdfError&) {
            throw;
        } catch (const ArgumentError& error) {
            throw ArgumentError(file + ": " + error.what());
        }
    };
    const TimeAxis axis =
        named([&] { return parse_time_units(*units, nc.text_attribute(*time, "calendar").value_or("")); });
    std::vector<int> candidates;
    for (int v = 0; v < nc.nvars(); ++v) {
        if (v != *time && detail::is_numeric(nc.var_type(v)) && nc.var_dims(v) == std::vector<int>{time_dim}) {
            candidates.push_back(v);
        }
    }
    if (candidates.size() != 1) {
        std::string names;
        for (int v : candidates) {
            names += (names.empty() ? "" : ", ") + nc.var_name(v);
        }
        throw ArgumentError(file + ": needs one variable over (time) alone, the index; it has " +
                            std::to_string(candidates.size()) + (names.empty() ? "" : " (" + names + ")"));
    }
    ReferenceIndex out{.calendar = axis.calendar, .dates = {}, .values = nc.read_all(candidates.front(), count)};
    const std::vector<double> times = nc.read_all(*time, count);
    for (std::size_t k = 0; k < count; ++k) {
        if (!std::isfinite(out.values[k])) {
            throw ArgumentError(file + ": index value " + std::to_string(k) + " is not finite");
        }
        out.dates.push_back(named([&] { return axis.date_at(times[k]); }));
        if (k > 0 && !(times[k] > times[k - 1])) {
            throw ArgumentError(file + ": its times do not increase at index " + std::to_string(k));
        }
    }
    if (count < 2) {
        throw ArgumentError(file + ": needs at least two times, has " + std::to_string(count));
    }
    return out;
}

std::vector<double> sample_index_series(const ReferenceIndex& index, const DateTime& initial, Calendar calendar,
                                        double timestep_s, std::int64_t forward_steps) {
    if (!(timestep_s >= 1.0) || timestep_s != std::floor(timestep_s) || forward_steps < 0) {
        throw ArgumentError(setting_name("enso_coefficient_index") + ": the run's step of " +
                            std::to_string(timestep_s) + " s is not a positive whole number of seconds, or its " +
                            std::to_string(forward_steps) + " forward steps are negative");
    }
    const auto check_date = [](const DateTime& d, Calendar of, const std::string& what) {
        if (!date_in_calendar(d, of) || d.hour < 0 || d.hour > 23 || d.minute < 0 || d.minute > 59 ||
            !(d.second >= 0.0 && d.second < 60.0)) {
            throw ArgumentError(setting_name("enso_coefficient_index") + ": " + what + " " + to_string(d) +
                                " is not a date and time of its calendar");
        }
    };
    check_date(initial, calendar, "the run's initial time");
    if (index.dates.size() != index.values.size()) {
        throw ArgumentError(setting_name("enso_coefficient_index") + ": " + std::to_string(index.dates.size()) +
                            " dates for " + std::to_string(index.values.size()) + " values");
    }
    for (const DateTime& d : index.dates) {
        check_date(d, index.calendar, "the index's date");
    }
    // The index's dates in the run's calendar (xarray's convert_calendar: the same date, or none), as seconds from
    // the initial time.
    std::vector<double> at;
    std::vector<double> values;
    for (std::size_t k = 0; k < index.dates.size(); ++k) {
        if (date_in_calendar(index.dates[k], calendar)) {
            at.push_back(seconds_between(initial, index.dates[k], calendar));
            values.push_back(index.values[k]);
        }
    }
    for (std::size_t k = 1; k < at.size(); ++k) {
        if (!(at[k] > at[k - 1])) {
            throw ArgumentError(setting_name("enso_coefficient_index") + ": its dates do not increase at date " +
                                std::to_string(k) + " (in the run's calendar)");
        }
    }
    if (at.size() < 2) {
        throw ArgumentError(setting_name("enso_coefficient_index") + ": " + std::to_string(at.size()) +
                            " of its dates are dates of the run's calendar; its spacing needs two");
    }
    // The dates within half the index's spacing of the run [0, end] (xarray's sel of a slice: both ends in).
    const double half = (at[1] - at[0]) / 2.0;
    const double end = static_cast<double>(forward_steps) * timestep_s;
    const auto first = std::lower_bound(at.begin(), at.end(), -half);
    const auto last = std::upper_bound(first, at.end(), end + half);
    if (first == last) {
        return {};
    }
    const auto times = static_cast<std::size_t>(forward_steps) + 1;
    const double earliest = *first;
    const double latest = *(last - 1);
    std::size_t covered = 0;
    for (std::size_t k = 0; k < times; ++k) {
        const double t = static_cast<double>(k) * timestep_s;
        covered += t >= earliest && t <= latest ? 1 : 0;
    }
    if (!(static_cast<double>(covered) > static_cast<double>(times) * 0.9)) {
        return {};  // ACE's OVERLAP_THRESHOLD
    }
    // The nearest date's value at each of the run's times (pandas' reindex "nearest": the later at a tie).
    std::vector<double> series(times);
    const auto from = static_cast<std::size_t>(first - at.begin());
    const auto to = static_cast<std::size_t>(last - at.begin());
    std::size_t right = from;  // the first selected date at or after t
    for (std::size_t k = 0; k < times; ++k) {
        const double t = static_cast<double>(k) * timestep_s;
        while (right < to && at[right] < t) {
            ++right;
        }
        std::size_t pick = right;
        if (right == to) {
            pick = to - 1;
        } else if (right > from && t - at[right - 1] < at[right] - t) {
            pick = right - 1;
        }
        series[k] = values[pick];
    }
    const double mean = numpy_pairwise_sum(series) / static_cast<double>(times);
    for (double& v : series) {
        v -= mean;
    }
    return series;
}

}  // namespace gridshard::io
