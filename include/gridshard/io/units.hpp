#pragma once
/// @file
/// Units through UDUNITS-2: whether two variables carry the same unit, and whether two files' time axes
/// are the same instants. No MPI calls.

#include <string>

#include "gridshard/io/grid_info.hpp"

namespace gridshard::io {

/// Whether `a` and `b` name the same unit: the same text, or units UDUNITS-2 finds identical ("m/s" and
/// "m s-1", "K" and "kelvin"; not "K" and "degC", which differ by an offset). Text that UDUNITS-2 cannot
/// parse is the same only as the same text. Throws SystemError when the unit database cannot be loaded.
[[nodiscard]] bool same_units(const std::string& a, const std::string& b);

/// Why the time coordinates of `a` and `b` are not the same instants, or "" when they are (or when
/// either file has no time coordinate). Values are compared after converting `b`'s units to `a`'s
/// ("6 hours since 2000-01-01" is "0.25 days since 2000-01-01") to within a millisecond; the same units
/// text, even unreadable or empty, compares the values as they are. Calendars must agree ("standard" and
/// "gregorian" are one). UDUNITS-2 counts in the standard (mixed Julian-Gregorian) calendar, so different
/// reference dates are converted there, in "proleptic_gregorian" when both are after 1582-10-15, and in
/// other calendars not at all (reported instead). Names the files by `a_name` and `b_name`.
[[nodiscard]] std::string time_mismatch(const GridInfo& a, const std::string& a_name, const GridInfo& b,
                                        const std::string& b_name);

}  // namespace gridshard::io
