#include "gridshard/io/calendar.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "gridshard/core/error.hpp"

namespace gridshard::io {
namespace {

std::string lower(std::string text) {
    for (char& c : text) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return text;
}

std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t");
    const auto last = text.find_last_not_of(" \t");
    return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

bool leap_year(std::int64_t year, Calendar calendar) {
    switch (calendar) {
        case Calendar::julian:
            return year % 4 == 0;
        case Calendar::noleap:
        case Calendar::days360:
            return false;
        case Calendar::all_leap:
            return true;
        default:
            return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    }
}

int days_in_month(std::int64_t year, int month, Calendar calendar) {
    if (calendar == Calendar::days360) {
        return 30;
    }
    constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && leap_year(year, calendar) ? 29 : days[month - 1];
}

// Days from 0001-01-01 (day 0) of `calendar` to year-month-day; years may be any integer.
std::int64_t day_number(std::int64_t year, int month, int day, Calendar calendar) {
    std::int64_t y = year - 1;
    std::int64_t days = 0;
    switch (calendar) {
        case Calendar::days360:
            days = y * 360;
            break;
        case Calendar::noleap:
            days = y * 365;
            break;
        case Calendar::all_leap:
            days = y * 366;
            break;
        case Calendar::julian:
            days = y * 365 + (y >= 0 ? y / 4 : (y - 3) / 4);
            break;
        default:
            days = y * 365 + (y >= 0 ? y / 4 - y / 100 + y / 400 : (y - 3) / 4 - (y - 99) / 100 + (y - 399) / 400);
    }
    for (int m = 1; m < month; ++m) {
        days += days_in_month(year, m, calendar);
    }
    return days + day - 1;
}

DateTime date_of_day(std::int64_t number, Calendar calendar) {
    // An estimate of the year, then a step either way until it holds the day.
    const double mean_year = calendar == Calendar::days360    ? 360.0
                             : calendar == Calendar::noleap   ? 365.0
                             : calendar == Calendar::all_leap ? 366.0
                             : calendar == Calendar::julian   ? 365.25
                                                              : 365.2425;
    std::int64_t year = 1 + static_cast<std::int64_t>(std::floor(static_cast<double>(number) / mean_year));
    while (day_number(year, 1, 1, calendar) > number) {
        --year;
    }
    while (day_number(year + 1, 1, 1, calendar) <= number) {
        ++year;
    }
    DateTime d;
    d.year = year;
    std::int64_t left = number - day_number(year, 1, 1, calendar);
    d.day_of_year = static_cast<int>(left) + 1;
    d.month = 1;
    while (left >= days_in_month(year, d.month, calendar)) {
        left -= days_in_month(year, d.month, calendar);
        ++d.month;
    }
    d.day = static_cast<int>(left) + 1;
    return d;
}

bool before_gregorian_reform(std::int64_t year, int month, int day) {
    return year < 1582 || (year == 1582 && (month < 10 || (month == 10 && day < 15)));
}

}  // namespace

Calendar parse_calendar(const std::string& name) {
    const std::string n = lower(trim(name));
    if (n.empty() || n == "standard" || n == "gregorian") {
        return Calendar::standard;
    }
    if (n == "proleptic_gregorian") {
        return Calendar::proleptic_gregorian;
    }
    if (n == "julian") {
        return Calendar::julian;
    }
    if (n == "noleap" || n == "365_day") {
        return Calendar::noleap;
    }
    if (n == "all_leap" || n == "366_day") {
        return Calendar::all_leap;
    }
    if (n == "360_day") {
        return Calendar::days360;
    }
    throw ArgumentError("calendar '" + name +
                        "' is not one of standard, gregorian, proleptic_gregorian, julian, noleap, 365_day, "
                        "all_leap, 366_day, 360_day");
}

double seconds_per_unit(const std::string& unit) {
    const std::string u = lower(trim(unit));
    struct Entry {
        const char* names[5];
        double seconds;
    };
    static const Entry entries[] = {
        {{"microseconds", "microsecond", "us", "usec", nullptr}, 1e-6},
        {{"milliseconds", "millisecond", "ms", "msec", nullptr}, 1e-3},
        {{"seconds", "second", "s", "sec", "secs"}, 1.0},
        {{"minutes", "minute", "min", "mins", nullptr}, 60.0},
        {{"hours", "hour", "h", "hr", "hrs"}, 3600.0},
        {{"days", "day", "d", nullptr, nullptr}, 86400.0},
    };
    for (const Entry& e : entries) {
        for (const char* name : e.names) {
            if (name != nullptr && u == name) {
                return e.seconds;
            }
        }
    }
    return 0.0;
}

TimeAxis parse_time_units(const std::string& units, const std::string& calendar) {
    const auto bad = [&](const std::string& why) { throw ArgumentError("time units '" + units + "': " + why); };
    const std::string text = trim(units);
    const std::string lowered = lower(text);
    const auto since = lowered.find(" since ");
    if (since == std::string::npos) {
        bad("expected 'UNIT since YYYY-MM-DD[ HH:MM:SS]'");
    }
    TimeAxis axis;
    axis.calendar = parse_calendar(calendar);
    axis.seconds_per_unit = seconds_per_unit(text.substr(0, since));
    if (axis.seconds_per_unit == 0.0) {
        bad("'" + trim(text.substr(0, since)) + "' is not a unit of time (months and years vary in length)");
    }
    std::string date = trim(text.substr(since + 7));
    for (const char* suffix : {"UTC", "utc", "Z", "z"}) {
        const std::string s(suffix);
        if (date.size() > s.size() && date.compare(date.size() - s.size(), s.size(), s) == 0) {
            date = trim(date.substr(0, date.size() - s.size()));
        }
    }
    for (char& c : date) {
        if (c == 'T') {
            c = ' ';
        }
    }
    long long year = 0;
    int month = 0;
    int day = 0;
    int hour = 0;
    int minute = 0;
    double second = 0.0;
    char tail = 0;
    const int fields =
        std::sscanf(date.c_str(), "%lld-%d-%d %d:%d:%lf%c", &year, &month, &day, &hour, &minute, &second, &tail);
    if (fields < 3 || fields == 7 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
        minute > 59 || second < 0 || second >= 61) {
        bad("cannot read the reference date '" + date + "'");
    }
    if (day > days_in_month(year, month, axis.calendar)) {
        bad("day " + std::to_string(day) + " does not exist in month " + std::to_string(month));
    }
    axis.reference = {year, month, day, hour, minute, second, 1};
    axis.reference.day_of_year =
        static_cast<int>(day_number(year, month, day, axis.calendar) - day_number(year, 1, 1, axis.calendar)) + 1;
    if (axis.calendar == Calendar::standard && before_gregorian_reform(year, month, day)) {
        bad("a reference date before 1582-10-15 in the standard calendar (mixed Julian-Gregorian) is not "
            "supported; use proleptic_gregorian or julian");
    }
    return axis;
}

DateTime TimeAxis::date_at(double value) const {
    if (!std::isfinite(value)) {
        throw ArgumentError("time value " + std::to_string(value) + " is not finite");
    }
    const DateTime& r = reference;
    // Seconds since the reference day's midnight, split into whole days and the rest.
    const double seconds = value * seconds_per_unit + r.hour * 3600.0 + r.minute * 60.0 + r.second;
    const double days = std::floor(seconds / 86400.0);
    double rest = seconds - days * 86400.0;
    DateTime d = date_of_day(day_number(r.year, r.month, r.day, calendar) + static_cast<std::int64_t>(days), calendar);
    if (calendar == Calendar::standard && before_gregorian_reform(d.year, d.month, d.day)) {
        throw ArgumentError("time value " + std::to_string(value) +
                            " falls before 1582-10-15 in the standard calendar, which is not supported");
    }
    // Round to the microsecond, so that 6 hours in microseconds is hour 6, not 5:59:59.999999.
    rest = std::round(rest * 1e6) / 1e6;
    d.hour = static_cast<int>(rest / 3600.0);
    d.minute = static_cast<int>((rest - d.hour * 3600.0) / 60.0);
    d.second = rest - d.hour * 3600.0 - d.minute * 60.0;
    if (d.hour >= 24) {  // rounding reached midnight
        d = date_of_day(day_number(d.year, d.month, d.day, calendar) + 1, calendar);
    }
    return d;
}

DateTime TimeAxis::date_after(double value, double seconds) const {
    return date_at(value + seconds / seconds_per_unit);
}

bool same_date(const DateTime& a, const DateTime& b, Calendar calendar, double tolerance_s) {
    const auto seconds_of_day = [](const DateTime& d) { return d.hour * 3600.0 + d.minute * 60.0 + d.second; };
    const std::int64_t days =
        day_number(a.year, a.month, a.day, calendar) - day_number(b.year, b.month, b.day, calendar);
    if (days < -1 || days > 1) {
        return false;
    }
    return std::abs(static_cast<double>(days) * 86400.0 + seconds_of_day(a) - seconds_of_day(b)) <= tolerance_s;
}

bool date_in_calendar(const DateTime& d, Calendar calendar) {
    if (d.month < 1 || d.month > 12 || d.day < 1 || d.day > days_in_month(d.year, d.month, calendar)) {
        return false;
    }
    return calendar != Calendar::standard || !before_gregorian_reform(d.year, d.month, d.day);
}

double seconds_between(const DateTime& origin, const DateTime& d, Calendar calendar) {
    const auto seconds_of_day = [](const DateTime& t) { return t.hour * 3600.0 + t.minute * 60.0 + t.second; };
    const std::int64_t days =
        day_number(d.year, d.month, d.day, calendar) - day_number(origin.year, origin.month, origin.day, calendar);
    return static_cast<double>(days) * 86400.0 + (seconds_of_day(d) - seconds_of_day(origin));
}

std::string to_string(const DateTime& d) {
    char text[64];
    const double whole = std::floor(d.second);
    std::snprintf(text, sizeof text, "%04lld-%02d-%02d %02d:%02d:%02d", static_cast<long long>(d.year), d.month, d.day,
                  d.hour, d.minute, static_cast<int>(whole));
    std::string out = text;
    if (d.second != whole) {
        std::snprintf(text, sizeof text, "%.6f", d.second - whole);
        out += text + 1;  // ".250000" without its leading 0
    }
    return out;
}

}  // namespace gridshard::io
