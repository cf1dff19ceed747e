// A reference index's series over each sample's run (io/reference_index.hpp), for the ACE drop-in's ENSO coefficient
// and for tests: the library's rule, so the drop-in and `gridshard eval` form the same index. No MPI calls.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/io/reference_index.hpp"

namespace gridshard::python {

namespace py = pybind11;

namespace {

/// (year, month, day, hour, minute, second) as a date (its day of the year unused here).
using DateTuple = std::tuple<std::int64_t, int, int, int, int, double>;

io::DateTime date_of(const DateTuple& t) {
    const auto [year, month, day, hour, minute, second] = t;
    return io::DateTime{.year = year, .month = month, .day = day, .hour = hour, .minute = minute, .second = second};
}

}  // namespace

void bind_reference_index(py::module_& m) {
    m.def(
        "sample_index_series",
        [](const std::vector<DateTuple>& dates, const std::vector<double>& values, const std::string& index_calendar,
           const std::vector<DateTuple>& initial_times, const std::string& calendar, double timestep_seconds,
           std::int64_t forward_steps) {
            if (dates.size() != values.size()) {
                throw ArgumentError("sample_index_series: " + std::to_string(dates.size()) + " dates for " +
                                    std::to_string(values.size()) + " values");
            }
            io::ReferenceIndex index{.calendar = io::parse_calendar(index_calendar), .dates = {}, .values = values};
            for (const DateTuple& d : dates) {
                index.dates.push_back(date_of(d));
            }
            const io::Calendar run_calendar = io::parse_calendar(calendar);
            const auto width = static_cast<py::ssize_t>(forward_steps + 1);
            py::array_t<double> out({static_cast<py::ssize_t>(initial_times.size()), width});
            auto rows = out.mutable_unchecked<2>();
            for (std::size_t i = 0; i < initial_times.size(); ++i) {
                const std::vector<double> series = io::sample_index_series(
                    index, date_of(initial_times[i]), run_calendar, timestep_seconds, forward_steps);
                for (py::ssize_t k = 0; k < width; ++k) {
                    rows(static_cast<py::ssize_t>(i), k) =
                        series.empty() ? std::numeric_limits<double>::quiet_NaN() : series[static_cast<std::size_t>(k)];
                }
            }
            return out;
        },
        py::arg("dates"), py::arg("values"), py::arg("index_calendar"), py::arg("initial_times"), py::arg("calendar"),
        py::arg("timestep_seconds"), py::arg("forward_steps"),
        "A reference index (`values` at `dates`, (year, month, day, hour, minute, second) of `index_calendar`) over "
        "the run of each of `initial_times` (dates of the run's `calendar`), `forward_steps` steps of "
        "`timestep_seconds`: an array (initial times, forward_steps + 1), the index as ACE's get_sample_index_series "
        "forms it (io::sample_index_series), a row of NaN where the index does not cover the run. No MPI calls.");
}

}  // namespace gridshard::python
