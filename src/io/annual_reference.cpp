// ACE's monthly reference data of its annual metric: one variable's box, its counts and the first sample's years.

#include "gridshard/io/annual_reference.hpp"

#include <algorithm>
#include <span>

#include "gridshard/core/error.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/netcdf_reader.hpp"

namespace gridshard::io {

std::optional<AnnualReference> read_annual_reference(const std::string& path, const std::string& name, const Box& box,
                                                     std::int64_t nlat, std::int64_t nlon) {
    const std::string flag = setting_name("annual_reference_data") + " '" + path + "'";
    const NetcdfReader file(path);
    const std::vector<std::string> fields = file.field_variables();
    if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
        return std::nullopt;
    }
    const VariableShape shape = file.variable(name);
    if (shape.nlat != nlat || shape.nlon != nlon) {
        throw ArgumentError(flag + ": its grid is " + std::to_string(shape.nlat) + " x " + std::to_string(shape.nlon) +
                            ", the run's " + std::to_string(nlat) + " x " + std::to_string(nlon));
    }
    if (shape.dim_names.size() != 4 || shape.dim_names[0] != "sample" || shape.dim_names[1] != "time") {
        throw ArgumentError(flag + ": variable '" + name + "' is not over (sample, time, lat, lon)");
    }
    AnnualReference out;
    out.samples = shape.dim_sizes[0];
    out.times = shape.dim_sizes[1];
    const auto whole = [&](const char* what) {
        std::optional<WholeVariable> v = file.whole_variable(what);
        if (!v || v->dims != std::vector<std::string>{"sample", "time"} ||
            static_cast<std::int64_t>(v->values.size()) != out.samples * out.times) {
            throw ArgumentError(flag + ": no '" + what + "' over (sample, time) of " + std::to_string(out.samples) +
                                " x " + std::to_string(out.times));
        }
        return *std::move(v);
    };
    out.counts = whole("counts").values;
    const WholeVariable valid_time = whole("valid_time");
    const TimeAxis axis = parse_time_units(valid_time.units, valid_time.calendar);
    for (std::int64_t s = 1; s < out.samples; ++s) {  // ACE's process_monthly_reference
        if (!std::equal(valid_time.values.begin(), valid_time.values.begin() + out.times,
                        valid_time.values.begin() + s * out.times)) {
            throw ArgumentError(flag + ": All time axes must be the same (sample " + std::to_string(s) +
                                "'s valid_time is not sample 0's)");
        }
    }
    for (std::int64_t t = 0; t < out.times; ++t) {
        out.years.push_back(axis.date_at(valid_time.values[static_cast<std::size_t>(t)]).year);
    }
    VariableReader reader = file.reader(name, box, {"sample", "time"});
    const std::size_t per_field = reader.values_per_step();
    out.values.resize(per_field * static_cast<std::size_t>(out.samples * out.times));
    for (std::int64_t s = 0; s < out.samples; ++s) {
        for (std::int64_t t = 0; t < out.times; ++t) {
            const std::int64_t position[] = {s, t};
            reader.read_at(position, std::span<double>(out.values)
                                         .subspan(static_cast<std::size_t>(s * out.times + t) * per_field, per_field));
        }
    }
    return out;
}

}  // namespace gridshard::io
