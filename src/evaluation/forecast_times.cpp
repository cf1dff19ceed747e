// The times of a forecast's files as ACE's climate families take them (forecast_times.hpp).

#include "forecast_times.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "gridshard/core/error.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/reference_index.hpp"

namespace gridshard::detail {

std::string number_text(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", value);
    return text;
}

std::vector<ValidTime> valid_times(const io::ForecastSource& source, const char* setting) {
    const io::LeadTimes& t = source.lead_times();
    const io::ForecastLayout& layout = source.layout();
    if (t.init_times.size() != static_cast<std::size_t>(layout.initial_conditions) ||
        t.values.size() != static_cast<std::size_t>(layout.lead_times)) {
        throw ArgumentError(setting_name(setting) +
                            ": needs each initial condition's time and each lead time; the prediction has " +
                            std::to_string(t.init_times.size()) + " initial times for " +
                            std::to_string(layout.initial_conditions) + " initial conditions and " +
                            std::to_string(t.values.size()) + " lead times for " + std::to_string(layout.lead_times));
    }
    const io::TimeAxis axis = io::parse_time_units(t.init_time_units, t.calendar);
    const double lead_unit = io::seconds_per_unit(t.units);
    if (!(lead_unit > 0.0)) {
        throw ArgumentError(setting_name(setting) + ": the lead times' units '" + t.units + "' are not a unit of time");
    }
    const io::DateTime origin{.year = 2000, .month = 1, .day = 1};
    std::vector<ValidTime> times;
    for (std::int64_t i = 0; i < layout.initial_conditions; ++i) {
        for (std::int64_t l = 0; l < layout.lead_times; ++l) {
            const io::DateTime valid = axis.date_after(t.init_times[static_cast<std::size_t>(i)],
                                                       t.values[static_cast<std::size_t>(l)] * lead_unit);
            times.push_back({io::seconds_between(origin, valid, axis.calendar), valid.year, valid.month});
        }
    }
    return times;
}

double lead_timestep_seconds(const io::ForecastSource& source, const char* setting) {
    const io::LeadTimes& t = source.lead_times();
    const double unit = io::seconds_per_unit(t.units);
    const double step = t.values.size() >= 2 ? (t.values[1] - t.values[0]) * unit : 0.0;
    for (std::size_t k = 1; k < t.values.size(); ++k) {
        if ((t.values[k] - t.values[k - 1]) * unit != step) {
            throw ArgumentError(setting_name(setting) + ": the lead times are not evenly spaced (" +
                                number_text(t.values[k - 1]) + " to " + number_text(t.values[k]) + " " + t.units +
                                ", the first step is " + number_text(step) + " s)");
        }
    }
    if (!(step > 0.0)) {
        throw ArgumentError(setting_name(setting) + ": needs two increasing lead times to know the timestep, got " +
                            std::to_string(t.values.size()));
    }
    return step;
}

double longer_than_days(const io::ForecastSource& source, double least_days, const char* setting, const char* what) {
    const double step = lead_timestep_seconds(source, setting);
    const auto steps = static_cast<std::int64_t>(source.lead_times().values.size());
    const double days = static_cast<double>(steps) * step / 86400.0;
    if (!(days > least_days)) {
        throw ArgumentError(setting_name(setting) + ": ACE's " + what + " a run of more than " +
                            number_text(least_days) + " days, this one is " + number_text(days) + " days (" +
                            std::to_string(steps) + " steps)");
    }
    return step;
}

double longer_than_two_years(const io::ForecastSource& source, const char* setting, const char* what) {
    return longer_than_days(source, 730.0, setting, what);
}

std::vector<double> enso_coefficient_index(const io::ForecastSource& source, const std::string& path) {
    const char* setting = "enso_coefficient_index";
    const double step = longer_than_days(source, 1800.0, setting, "ENSO coefficient needs");
    static_cast<void>(valid_times(source, setting));  // the initial and lead times, checked
    const io::LeadTimes& t = source.lead_times();
    const io::TimeAxis axis = io::parse_time_units(t.init_time_units, t.calendar);
    const double unit = io::seconds_per_unit(t.units);
    std::vector<std::int64_t> steps;  // each lead time's step from the initial time
    for (double lead : t.values) {
        const double k = lead * unit / step;
        if (!(k >= 0.0) || k != std::round(k)) {
            throw ArgumentError(setting_name(setting) + ": lead time " + number_text(lead) + " " + t.units +
                                " is not a whole number of steps of " + number_text(step) + " s from the start");
        }
        steps.push_back(static_cast<std::int64_t>(k));
    }
    const io::ReferenceIndex reference = io::read_reference_index(path);
    std::vector<double> index;
    for (double init : t.init_times) {
        const std::vector<double> series =
            io::sample_index_series(reference, axis.date_at(init), axis.calendar, step, steps.back());
        for (std::int64_t k : steps) {
            index.push_back(series.empty() ? std::numeric_limits<double>::quiet_NaN()
                                           : series[static_cast<std::size_t>(k)]);
        }
    }
    return index;
}

}  // namespace gridshard::detail
