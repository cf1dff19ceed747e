#pragma once
/// @file
/// A reference index (ACE's historical Niño 3.4 index of its enso_coefficient metric, or any other): values at dates
/// of its calendar, read from a netCDF file, and its series over one sample's run as ACE's get_sample_index_series
/// forms it. No MPI calls.
///
/// @code
///   #include "gridshard/io/reference_index.hpp"
///   void series_of(const gridshard::io::DateTime& initial) {
///       const gridshard::io::ReferenceIndex index = gridshard::io::read_reference_index("nino34.nc");
///       // 7300 steps of 6 hours from `initial`, in the run's noleap calendar: 7301 values, or none
///       std::vector<double> w = gridshard::io::sample_index_series(index, initial,
///                                                                   gridshard::io::Calendar::noleap, 21600.0, 7300);
///   }
/// @endcode

#include <cstdint>
#include <string>
#include <vector>

#include "gridshard/io/calendar.hpp"

namespace gridshard::io {

/// An index: its values at increasing dates of its calendar.
struct ReferenceIndex {
    Calendar calendar = Calendar::standard;
    std::vector<DateTime> dates;
    std::vector<double> values;
};

/// Reads the index at `path`: a netCDF file with a `time` coordinate (CF units and calendar) of at least two
/// increasing times and one numeric variable over (time) alone, the index. Throws ArgumentError naming
/// `enso_coefficient_index` and the file for another layout, a value that is not finite, or a date the calendar lacks;
/// NetcdfError when netCDF fails.
[[nodiscard]] ReferenceIndex read_reference_index(const std::string& path);

/// The index over one sample's run, as ACE's get_sample_index_series (fme's enso_coefficient.py) forms it: the index's
/// dates read in the run's `calendar` (a date that calendar lacks, such as 29 February in noleap, dropped, as xarray's
/// convert_calendar drops it); the dates within half the index's first spacing of the run, which starts at `initial`
/// and lasts `forward_steps` steps of `timestep_s`; at each of the run's times from `initial` on, the value at the
/// nearest of those dates (the later at a tie); less the mean of those values, summed as numpy sums (pairwise), so the
/// series is ACE's to the bit. Empty when the dates cover no more than 90% of the run's times (ACE's overlap
/// threshold). ACE refuses a 360_day run (xarray asks how to align its dates); here its dates are read as they are, as
/// for every other calendar. Throws ArgumentError naming `enso_coefficient_index` when a date or time is not one of its
/// calendar, the dates and values differ in number, the dates do not increase or fewer than two remain, or the step
/// is not a positive whole number of seconds (ACE's date range takes whole seconds).
[[nodiscard]] std::vector<double> sample_index_series(const ReferenceIndex& index, const DateTime& initial,
                                                      Calendar calendar, double timestep_s, std::int64_t forward_steps);

}  // namespace gridshard::io
