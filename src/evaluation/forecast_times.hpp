#pragma once
// The times of a forecast's files as ACE's climate families take them: each pair's valid time, the one timestep,
// ACE's gates on a run's length, and the ENSO coefficient's index per pair. Internal to the evaluation layer. No MPI
// calls.

#include <string>
#include <vector>

#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/io/forecast_source.hpp"

namespace gridshard::detail {

/// `value` in up to 10 significant digits, for messages.
[[nodiscard]] std::string number_text(double value);

/// The valid times of the source's (initial condition, lead) pairs (initial time plus lead) in the files' calendar:
/// seconds from 2000-01-01 00:00:00 (fme's trend.py takes its times so), year and month. Throws ArgumentError naming
/// `setting` for a forecast without initial times or lead times.
[[nodiscard]] std::vector<ValidTime> valid_times(const io::ForecastSource& source, const char* setting);

/// The source's timestep in seconds: its lead times' one spacing (ACE's run has one timestep). Throws ArgumentError
/// naming `setting` for fewer than two lead times or uneven spacing.
[[nodiscard]] double lead_timestep_seconds(const io::ForecastSource& source, const char* setting);

/// The source's timestep (lead_timestep_seconds) of a run ACE's `setting` metric takes: longer than `least_days` (fme's
/// metric configs' builds). Throws ArgumentError naming the setting and `what` needs it otherwise.
double longer_than_days(const io::ForecastSource& source, double least_days, const char* setting, const char* what);

/// longer_than_days of 730 days: fme's AnnualMetricConfig and EnsoIndexMetricConfig builds.
double longer_than_two_years(const io::ForecastSource& source, const char* setting, const char* what);

/// ACE's ENSO coefficient index per (initial condition, lead), initial condition slowest: the reference index at
/// `path` over each initial condition's run (io::sample_index_series: its initial time, the files' timestep, as many
/// forward steps as the last lead time holds), at each lead time; NaN throughout an initial condition it does not
/// cover. A run of more than 1800 days (fme's EnsoCoefficientMetricConfig build). Throws ArgumentError naming
/// `enso_coefficient_index`.
[[nodiscard]] std::vector<double> enso_coefficient_index(const io::ForecastSource& source, const std::string& path);

}  // namespace gridshard::detail
