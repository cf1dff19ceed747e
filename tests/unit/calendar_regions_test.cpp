// The CF calendars (io/calendar.hpp) on dates whose calendar facts are known, and the regions
// (geometry/regions.hpp): parsing, the date line, and the weights they give.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/reference_index.hpp"

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

TEST(Calendar, DatesInACalendar) {
    using io::Calendar;
    EXPECT_TRUE(io::date_in_calendar({.year = 2001, .month = 2, .day = 29}, Calendar::all_leap));
    EXPECT_FALSE(io::date_in_calendar({.year = 2001, .month = 2, .day = 29}, Calendar::julian));
    EXPECT_TRUE(io::date_in_calendar({.year = 1900, .month = 2, .day = 29}, Calendar::julian));
    EXPECT_FALSE(io::date_in_calendar({.year = 1900, .month = 2, .day = 29}, Calendar::proleptic_gregorian));
    EXPECT_TRUE(io::date_in_calendar({.year = 2001, .month = 2, .day = 30}, Calendar::days360));
    EXPECT_FALSE(io::date_in_calendar({.year = 2001, .month = 1, .day = 31}, Calendar::days360));
    EXPECT_FALSE(io::date_in_calendar({.year = 1582, .month = 10, .day = 14}, Calendar::standard));
    EXPECT_FALSE(io::date_in_calendar({.year = 2001, .month = 13, .day = 1}, Calendar::noleap));
}

// ACE's get_sample_index_series on an index whose answer is known by hand (tests/ace checks ACE's own to the bit):
// the dates within half a spacing of the run, the nearest one's value (the later at a tie), less their mean.
TEST(ReferenceIndex, TheNearestDateLessTheMean) {
    using io::Calendar;
    io::ReferenceIndex index{.calendar = Calendar::noleap, .dates = {}, .values = {}};
    for (int day = 1; day <= 10; ++day) {  // daily values 1, 2, 4, ... 512 at noon of 1 to 10 January 2001
        index.dates.push_back({.year = 2001, .month = 1, .day = day, .hour = 12});
        index.values.push_back(std::ldexp(1.0, day - 1));
    }
    const io::DateTime start{.year = 2001, .month = 1, .day = 3};  // midnight: the dates either side tie
    // 4 steps of a day: at 3, 4, 5, 6 and 7 January, midnight, each the later noon: 3 to 7 January's values
    const std::vector<double> series = io::sample_index_series(index, start, Calendar::noleap, 86400.0, 4);
    const double mean = (4.0 + 8.0 + 16.0 + 32.0 + 64.0) / 5.0;
    ASSERT_EQ(series.size(), 5U);
    for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(series[static_cast<std::size_t>(k)], std::ldexp(1.0, k + 2) - mean) << k;
    }
    // 4 steps of 18 hours from the 3rd's midnight: a tie (the 3rd), 18:00 (the 3rd's noon, 6 hours off), the 4th's
    // noon, 06:00 on the 5th (the 5th's) and the 6th's midnight (a tie: the 6th's).
    const std::vector<double> uneven = io::sample_index_series(index, start, Calendar::noleap, 64800.0, 4);
    const double uneven_mean = (4.0 + 4.0 + 8.0 + 16.0 + 32.0) / 5.0;
    EXPECT_EQ(uneven, (std::vector<double>{4.0 - uneven_mean, 4.0 - uneven_mean, 8.0 - uneven_mean, 16.0 - uneven_mean,
                                           32.0 - uneven_mean}));
    // Covered at no more than 90% of the run's times (ACE's threshold): none. 20 days from the 1st: 9 of 21.
    EXPECT_TRUE(
        io::sample_index_series(index, {.year = 2001, .month = 1, .day = 1}, Calendar::noleap, 86400.0, 20).empty());
    EXPECT_TRUE(
        io::sample_index_series(index, {.year = 2002, .month = 1, .day = 1}, Calendar::noleap, 86400.0, 3).empty());
    // A 29 February of the index is dropped in a noleap run, as xarray's convert_calendar drops it.
    const io::ReferenceIndex leap{.calendar = Calendar::all_leap,
                                  .dates = {{.year = 2001, .month = 2, .day = 28},
                                            {.year = 2001, .month = 2, .day = 29},
                                            {.year = 2001, .month = 3, .day = 1},
                                            {.year = 2001, .month = 3, .day = 2}},
                                  .values = {1.0, 100.0, 3.0, 5.0}};
    EXPECT_EQ(io::sample_index_series(leap, {.year = 2001, .month = 2, .day = 28}, Calendar::noleap, 86400.0, 2),
              (std::vector<double>{-2.0, 0.0, 2.0}));
    EXPECT_THROW(static_cast<void>(io::sample_index_series(index, start, Calendar::noleap, 0.5, 4)), ArgumentError);
    EXPECT_THROW(static_cast<void>(io::sample_index_series(index, {.year = 2001, .month = 2, .day = 29},
                                                           Calendar::noleap, 86400.0, 4)),
                 ArgumentError);  // no such initial date
    io::ReferenceIndex shuffled = index;
    std::swap(shuffled.dates[3], shuffled.dates[4]);
    EXPECT_THROW(static_cast<void>(io::sample_index_series(shuffled, start, Calendar::noleap, 86400.0, 4)),
                 ArgumentError);  // dates that do not increase
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
