// The CF calendars (io/calendar.hpp) on dates whose calendar facts are known, and the regions
// (geometry/regions.hpp): parsing, the date line, and the weights they give.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/calendar.hpp"

namespace gridshard {
namespace {

struct Expected {
    const char* units;
    const char* calendar;
    double value;
    std::int64_t year;
    int month;
    int day;
    int hour;
    int day_of_year;
};

TEST(Calendar, DatesOfEveryCalendar) {
    const Expected cases[] = {
        // 2000 is a leap year in the Gregorian calendars; 1900 only in the Julian one.
        {"days since 2000-01-01", "proleptic_gregorian", 59, 2000, 2, 29, 0, 60},
        {"days since 2000-01-01", "standard", 60, 2000, 3, 1, 0, 61},
        {"days since 2000-01-01", "gregorian", 366, 2001, 1, 1, 0, 1},
        {"days since 1900-01-01", "proleptic_gregorian", 59, 1900, 3, 1, 0, 60},
        {"days since 1900-01-01", "julian", 59, 1900, 2, 29, 0, 60},
        {"days since 2000-01-01", "noleap", 59, 2000, 3, 1, 0, 60},
        {"days since 2000-01-01", "365_day", 364, 2000, 12, 31, 0, 365},
        {"days since 2001-01-01", "all_leap", 59, 2001, 2, 29, 0, 60},
        {"days since 2000-01-01", "360_day", 30, 2000, 2, 1, 0, 31},
        {"days since 2000-01-01", "360_day", 359, 2000, 12, 30, 0, 360},
        {"days since 2000-01-01", "360_day", 360, 2001, 1, 1, 0, 1},
        // Before the reference, and within a day.
        {"days since 2000-01-01", "standard", -1, 1999, 12, 31, 0, 365},
        {"hours since 2000-01-01 18:00:00", "standard", 7, 2000, 1, 2, 1, 2},
        {"hours since 1979-01-01T00:00:00Z", "proleptic_gregorian", -6, 1978, 12, 31, 18, 365},
        // ACE's units: 2020-01-01 is 18262 days after 1970-01-01 (Gregorian); six hours in microseconds.
        {"microseconds since 1970-01-01", "proleptic_gregorian", 18262 * 86400e6 + 6 * 3600e6, 2020, 1, 1, 6, 1},
        {"microseconds since 1970-01-01", "standard", 18262 * 86400e6 + 59 * 86400e6 - 1, 2020, 2, 28, 23, 59},
        {"seconds since 2016-12-31 23:00:00", "standard", 3600, 2017, 1, 1, 0, 1},
        {"minutes since 2004-02-28", "noleap", 24 * 60, 2004, 3, 1, 0, 60},
    };
    for (const Expected& c : cases) {
        const io::DateTime d = io::parse_time_units(c.units, c.calendar).date_at(c.value);
        const std::string what = std::string(c.units) + " " + c.calendar + " " + std::to_string(c.value);
        EXPECT_EQ(d.year, c.year) << what;
        EXPECT_EQ(d.month, c.month) << what;
        EXPECT_EQ(d.day, c.day) << what;
        EXPECT_EQ(d.hour, c.hour) << what;
        EXPECT_EQ(d.day_of_year, c.day_of_year) << what;
    }
}

TEST(Calendar, EveryDayOfAYearOnce) {
    for (const char* calendar : {"standard", "julian", "noleap", "all_leap", "360_day"}) {
        const io::TimeAxis axis = io::parse_time_units("days since 2004-01-01", calendar);
        const int length = std::string(calendar) == "360_day" ? 360 : std::string(calendar) == "noleap" ? 365 : 366;
        for (int k = 0; k < length; ++k) {
            EXPECT_EQ(axis.date_at(k).day_of_year, k + 1) << calendar << " " << k;
            EXPECT_EQ(axis.date_at(k).year, 2004) << calendar << " " << k;
        }
        EXPECT_EQ(axis.date_at(length).year, 2005) << calendar;
    }
}

TEST(Calendar, ValidTimesAreComparedAndWrittenAsDates) {
    // The same number in two calendars: 2021-02-13 (standard) is 2021-02-26 without the 13 leap days since 1970.
    const double us = 1'613'174'400e6;
    const io::DateTime standard = io::parse_time_units("microseconds since 1970-01-01", "standard").date_at(us);
    const io::DateTime noleap = io::parse_time_units("microseconds since 1970-01-01", "noleap").date_at(us);
    EXPECT_EQ(io::to_string(standard), "2021-02-13 00:00:00");
    EXPECT_EQ(io::to_string(noleap), "2021-02-26 00:00:00");
    EXPECT_FALSE(io::same_date(standard, noleap, io::Calendar::standard));
    // An initial time plus a lead of 30 hours, in other units and calendars: the same dates.
    const io::DateTime valid =
        io::parse_time_units("microseconds since 1970-01-01", "standard").date_after(us, 30 * 3600.0);
    const io::DateTime same = io::parse_time_units("hours since 2021-02-14", "proleptic_gregorian").date_at(6.0);
    EXPECT_EQ(io::to_string(valid), "2021-02-14 06:00:00");
    EXPECT_TRUE(io::same_date(valid, same, io::Calendar::standard));
    // A valid time one day on in "days since 1850", as a double rounds it: the same instant as midnight,
    // though it reads 23:59:59.999999 (a microsecond is date_at's resolution); a second off is not.
    const io::TimeAxis days = io::parse_time_units("days since 1850-01-01", "noleap");
    const io::DateTime midnight = days.date_at(62050.0);
    const io::DateTime rounded = days.date_at(62050.0 - 1.2e-11);
    EXPECT_NE(io::to_string(rounded), io::to_string(midnight));
    EXPECT_TRUE(io::same_date(rounded, midnight, io::Calendar::noleap));
    EXPECT_FALSE(io::same_date(days.date_at(62050.0 - 1.0 / 86400.0), midnight, io::Calendar::noleap));
    EXPECT_EQ(io::to_string(io::parse_time_units("seconds since 2000-01-01", "julian").date_at(1.25)),
              "2000-01-01 00:00:01.250000");
}

TEST(Calendar, BadUnitsAndCalendarsAreArgumentErrors) {
    const auto message = [](const char* units, const char* calendar) {
        try {
            (void)io::parse_time_units(units, calendar);
        } catch (const ArgumentError& error) {
            return std::string(error.what());
        }
        return std::string();
    };
    EXPECT_NE(message("months since 2000-01-01", "standard").find("not a unit of time"), std::string::npos);
    EXPECT_NE(message("days after 2000-01-01", "standard").find("UNIT since"), std::string::npos);
    EXPECT_NE(message("days since 2001-02-29", "standard").find("does not exist"), std::string::npos);
    EXPECT_NE(message("days since 2001-13-01", "standard").find("cannot read"), std::string::npos);
    EXPECT_NE(message("days since 1500-01-01", "standard").find("before 1582-10-15"), std::string::npos);
    EXPECT_NE(message("days since 2000-01-01", "lunar").find("calendar 'lunar'"), std::string::npos);
    EXPECT_THROW((void)io::parse_time_units("days since 2000-01-01", "standard").date_at(std::nan("")), ArgumentError);
    EXPECT_EQ(io::seconds_per_unit("hours"), 3600.0);
    EXPECT_EQ(io::seconds_per_unit("microseconds"), 1e-6);
    EXPECT_EQ(io::seconds_per_unit("fortnights"), 0.0);
}

TEST(Regions, NamedBoxesAndMasks) {
    const Region tropics = parse_region("tropics");
    EXPECT_EQ(tropics.box.south, -20.0);
    EXPECT_EQ(tropics.box.north, 20.0);
    EXPECT_TRUE(tropics.box.whole_longitude);
    const Region pacific = parse_region("pacific:-10,10,170,-170");
    EXPECT_FALSE(pacific.box.whole_longitude);
    EXPECT_TRUE(in_box(pacific.box, 0, 175));
    EXPECT_TRUE(in_box(pacific.box, 0, -175));
    EXPECT_TRUE(in_box(pacific.box, 0, 185));   // longitudes modulo 360
    EXPECT_TRUE(in_box(pacific.box, 10, 170));  // bounds included
    EXPECT_FALSE(in_box(pacific.box, 0, 0));
    EXPECT_FALSE(in_box(pacific.box, 11, 175));
    EXPECT_TRUE(parse_region("all:-90,90,-180,180").box.whole_longitude);
    const Region land = parse_region("land:mask.nc:lsm");
    EXPECT_EQ(land.mask_file, "mask.nc");
    EXPECT_EQ(land.mask_variable, "lsm");
    for (const char* bad : {"", "nowhere", "a:1,2,3", "a:20,10,0,1", "a:-91,0,0,1", "a:x,1,2,3", ":1,2,3,4", "a::v"}) {
        EXPECT_THROW((void)parse_region(bad), ArgumentError) << bad;
    }
}

TEST(Regions, WeightsKeepTheirFormAndZeroOutside) {
    const std::vector<double> lat = {-60, -30, 0, 30, 60};
    const std::vector<double> lon = {0, 90, 180, 270};
    const Box box{{1, 4}, {0, 4}};  // rows -30, 0, 30
    const std::vector<double> per_row = {0.5, 1.0, 0.5};
    const AreaWeights band = region_weights({per_row, false}, lat, lon, box, parse_region("tropics").box);
    EXPECT_FALSE(band.per_point);
    EXPECT_EQ(band.values, (std::vector<double>{0.0, 1.0, 0.0}));
    const AreaWeights east = region_weights({per_row, false}, lat, lon, box, parse_region("e:-45,45,80,190").box);
    ASSERT_TRUE(east.per_point);
    EXPECT_EQ(east.values, (std::vector<double>{0, 0.5, 0.5, 0, 0, 1, 1, 0, 0, 0.5, 0.5, 0}));
    const std::vector<double> mask = {1, 0, 0.5, std::nan(""), 1, 1, 1, 1, 0, 0, 0, 0};
    const AreaWeights masked = mask_weights({per_row, false}, box, mask);
    EXPECT_EQ(masked.values, (std::vector<double>{0.5, 0, 0.25, 0, 1, 1, 1, 1, 0, 0, 0, 0}));
    EXPECT_THROW((void)mask_weights({per_row, false}, box, std::vector<double>(3)), ArgumentError);
    EXPECT_THROW((void)mask_weights({per_row, false}, box, std::vector<double>(12, -1.0)), ArgumentError);
}

}  // namespace
}  // namespace gridshard
