#include "gridshard/io/units.hpp"

#include <udunits2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "gridshard/core/error.hpp"

namespace gridshard::io {
namespace {

// The unit database, loaded once (its XML files come with Debian's libudunits2-data).
const ut_system* unit_system() {
    static const ut_system* const system = [] {
        ut_set_error_message_handler(ut_ignore);
        return ut_read_xml(nullptr);
    }();
    if (system == nullptr) {
        throw SystemError("cannot load the UDUNITS-2 unit database (libudunits2-data; UDUNITS2_XML_PATH)");
    }
    return system;
}

struct UnitDeleter {
    void operator()(ut_unit* unit) const noexcept { ut_free(unit); }
};
using Unit = std::unique_ptr<ut_unit, UnitDeleter>;

struct ConverterDeleter {
    void operator()(cv_converter* converter) const noexcept { cv_free(converter); }
};
using Converter = std::unique_ptr<cv_converter, ConverterDeleter>;

Unit parse(const std::string& text) {
    std::string trimmed = text;
    return Unit(ut_parse(unit_system(), ut_trim(trimmed.data(), UT_UTF8), UT_UTF8));
}

std::string calendar_of(const GridInfo& grid) {
    std::string calendar;
    for (const char c : grid.time_calendar) {
        calendar += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return calendar.empty() || calendar == "gregorian" ? "standard" : calendar;
}

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", value);
    return text;
}

}  // namespace

bool same_units(const std::string& a, const std::string& b) {
    if (a == b) {
        return true;
    }
    const Unit ua = parse(a);
    const Unit ub = parse(b);
    if (!ua || !ub || ut_are_convertible(ua.get(), ub.get()) == 0) {
        return false;
    }
    const Converter converter(ut_get_converter(ua.get(), ub.get()));
    return converter && cv_convert_double(converter.get(), 0.0) == 0.0 &&
           cv_convert_double(converter.get(), 1.0) == 1.0;
}

std::string time_mismatch(const GridInfo& a, const std::string& a_name, const GridInfo& b, const std::string& b_name) {
    if (a.time_values.empty() || b.time_values.empty()) {
        return {};
    }
    if (a.time_values.size() != b.time_values.size()) {
        return a_name + " has " + std::to_string(a.time_values.size()) + " times, " + b_name + " " +
               std::to_string(b.time_values.size());
    }
    const std::string a_calendar = calendar_of(a);
    const std::string b_calendar = calendar_of(b);
    if (a_calendar != b_calendar) {
        return "the time calendars differ: '" + a.time_calendar + "' in " + a_name + ", '" + b.time_calendar + "' in " +
               b_name;
    }
    // Both in `a`'s units; the tolerance is a millisecond in those units (the same units, unreadable or
    // absent, are compared as they are, to a relative 1e-12).
    double scale = 1.0;
    double offset = 0.0;
    double tolerance = 0.0;
    const Unit ua = parse(a.time_units);
    const Unit ub = parse(b.time_units);
    const Unit seconds = parse("seconds since 1970-01-01");
    const auto describe = [&](const GridInfo& g, const std::string& name) {
        return "'" + g.time_units + "' of " + name;
    };
    const auto is_time = [&](const Unit& u) { return u && ut_are_convertible(u.get(), seconds.get()) != 0; };
    if (a.time_units != b.time_units || is_time(ua)) {
        if (!is_time(ua)) {
            return "cannot read the time units " + describe(a, a_name);
        }
        if (!is_time(ub)) {
            return "cannot read the time units " + describe(b, b_name);
        }
        const Converter to_seconds(ut_get_converter(ua.get(), seconds.get()));
        const double seconds_per_unit =
            cv_convert_double(to_seconds.get(), 1.0) - cv_convert_double(to_seconds.get(), 0.0);
        tolerance = 1e-3 / std::abs(seconds_per_unit);
    }
    if (a.time_units != b.time_units) {
        const Converter b_to_a(ut_get_converter(ub.get(), ua.get()));
        offset = cv_convert_double(b_to_a.get(), 0.0);
        scale = cv_convert_double(b_to_a.get(), 1.0) - offset;
        // UDUNITS-2 counts days in CF's "standard" calendar (Julian before 1582-10-15, Gregorian after).
        // A proleptic Gregorian calendar agrees with it once both reference dates are past the switch;
        // other calendars (noleap, 360_day, julian, ...) only when the reference dates are the same.
        const auto after_switch = [&](const Unit& u) {
            const Unit gregorian = parse("seconds since 1582-10-15 00:00:00");
            const Converter c(ut_get_converter(u.get(), gregorian.get()));
            return cv_convert_double(c.get(), 0.0) >= 0.0;
        };
        const bool convertible = a_calendar == "standard" ||
                                 (a_calendar == "proleptic_gregorian" && after_switch(ua) && after_switch(ub)) ||
                                 std::abs(offset) <= tolerance;
        if (!convertible) {
            return "the time units " + describe(a, a_name) + " and " + describe(b, b_name) +
                   " have different reference dates in calendar '" + a.time_calendar + "', which cannot be converted";
        }
    }
    for (std::size_t k = 0; k < a.time_values.size(); ++k) {
        const double ta = a.time_values[k];
        const double tb = b.time_values[k] * scale + offset;
        if (!(std::abs(ta - tb) <= tolerance + 1e-12 * std::max(std::abs(ta), std::abs(tb)))) {
            return "the times differ at step " + std::to_string(k) + ": " + number(a.time_values[k]) + " " +
                   a.time_units + " in " + a_name + ", " + number(b.time_values[k]) + " " + b.time_units + " in " +
                   b_name;
        }
    }
    return {};
}

}  // namespace gridshard::io
