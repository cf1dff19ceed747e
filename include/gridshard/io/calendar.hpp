#pragma once
/// @file
/// CF time coordinates as dates: "UNIT since REFERENCE" units, the CF calendars, and the day of the year
/// and hour of an instant, for climatologies indexed by day of year. No MPI calls.
///
/// @code
///   auto axis = gridshard::io::parse_time_units("microseconds since 1970-01-01", "julian");
///   gridshard::io::DateTime t = axis.date_at(1.5778368e15);   // 2020-01-01 00:00 in the Julian calendar
///   int doy = t.day_of_year;                                   // 1
/// @endcode

#include <cstdint>
#include <string>

namespace gridshard::io {

/// The CF calendars: standard (= gregorian; only dates from 1582-10-15 on), proleptic_gregorian, julian,
/// noleap (= 365_day), all_leap (= 366_day) and 360_day.
enum class Calendar { proleptic_gregorian, standard, julian, noleap, all_leap, days360 };

/// Parses a calendar name (empty is "standard", as CF says); throws ArgumentError naming it otherwise.
[[nodiscard]] Calendar parse_calendar(const std::string& name);

/// A date of a calendar, with the day of its year (1 on 1 January).
struct DateTime {
    std::int64_t year = 1970;
    int month = 1;
    int day = 1;
    int hour = 0;
    int minute = 0;
    double second = 0.0;
    int day_of_year = 1;
};

/// The seconds of one unit of time ("microseconds", "s", "hours", "days", ...), or 0 for a text that is not
/// a unit of time. Months and years are refused (their length varies).
[[nodiscard]] double seconds_per_unit(const std::string& unit);

/// A time axis: `value` units since `reference`, in `calendar`.
struct TimeAxis {
    double seconds_per_unit = 1.0;
    DateTime reference;
    Calendar calendar = Calendar::standard;

    /// The date `value` units after the reference. Throws ArgumentError before 1582-10-15 in the standard
    /// calendar (where it is Julian) and for values that are not finite.
    [[nodiscard]] DateTime date_at(double value) const;
    /// The date `seconds` after the instant `value` (a valid time: an initial time plus a lead), as date_at.
    [[nodiscard]] DateTime date_after(double value, double seconds) const;
};

/// Whether `a` and `b` are the same instant to within `tolerance_s` seconds, counting days in `calendar` (so
/// 23:59:59.999999 and the next day's 00:00:00 are the same instant: the time value of a valid time in "days
/// since 1850" carries a rounding of about a microsecond). The default millisecond lies far above that
/// rounding and far below any time step. Dates of two calendars are compared as they read: 2021-02-26 of
/// `noleap` is not 2021-02-13 of `standard`.
[[nodiscard]] bool same_date(const DateTime& a, const DateTime& b, Calendar calendar, double tolerance_s = 1e-3);

/// Whether `d`'s date is one of `calendar`'s: month 1 to 12, a day its month has (29 February only in a leap year,
/// 31 never in 360_day), and in the standard calendar not before 1582-10-15 (where it is Julian). No MPI calls.
[[nodiscard]] bool date_in_calendar(const DateTime& d, Calendar calendar);

/// The seconds from `origin` to `d`, counting days in `calendar` (negative before it). No MPI calls.
[[nodiscard]] double seconds_between(const DateTime& origin, const DateTime& d, Calendar calendar);

/// `d` as "YYYY-MM-DD HH:MM:SS", with the fraction of a second when there is one.
[[nodiscard]] std::string to_string(const DateTime& d);

/// Parses CF time units "UNIT since YYYY-M-D[ H:M[:S]]" (a "T" may separate date and time; a trailing "Z"
/// or "UTC" is allowed) in `calendar`; throws ArgumentError naming the text otherwise.
[[nodiscard]] TimeAxis parse_time_units(const std::string& units, const std::string& calendar);

}  // namespace gridshard::io
