#pragma once
/// @file
/// A small CF netCDF dataset written whole through AtomicOutput: named dims with optional coordinate
/// values (one of them may be the record dim), and float64 variables over them, NaN written as `_FillValue`
/// (9.96920996838687e+36, netCDF's default for double: the one fill value of every file gridshard writes). The
/// forecast evaluation's diagnostics files and the zonal-mean file are written with it. No MPI calls: call it on
/// the writing rank.
///
/// @code
///   gridshard::io::Dataset d;
///   d.dims.push_back({"forecast_step", 3, {0, 1, 2}, {{"long_name", "forecast step"}}});
///   d.variables.push_back({"weighted_rmse-t2m", {"forecast_step"}, {0.0, 0.5, 0.7}, {{"units", "K"}}});
///   gridshard::io::AtomicOutput out("mean_diagnostics.nc");   // a temporary beside the target
///   gridshard::io::write_dataset(out, d);
///   out.commit();                                             // renamed over the target
/// @endcode

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gridshard/io/output_file.hpp"

namespace gridshard::io {

using Attributes = std::vector<std::pair<std::string, std::string>>;

/// A dim of `size` entries; with `coordinate` values (as many), a float64 coordinate variable of its name, or with
/// `labels` (as many) a string coordinate: a char variable over (NAME, stringN), N the longest label, with
/// `_Encoding = "utf-8"` so that xarray reads strings (ACE's `source` of its spectrum file). An `unlimited` dim is
/// the file's record dim, and `size` the records written.
struct DatasetDim {
    std::string name;
    std::int64_t size = 0;
    std::vector<double> coordinate{};
    Attributes attributes{};  ///< of the coordinate variable
    bool unlimited = false;
    std::vector<std::string> labels{};
};

/// A float64 variable over `dims` (names of Dataset::dims), row-major values, NaN where undefined.
struct DatasetVariable {
    std::string name;
    std::vector<std::string> dims;
    std::vector<double> values;
    Attributes attributes{};
    /// The part of the variable `values` cover, per dim: empty for the whole variable (the only choice of
    /// write_dataset); in write_dataset_collectively (parallel_io.hpp) each rank's own box, count 0 for none.
    std::vector<std::int64_t> start{};
    std::vector<std::int64_t> count{};
    /// Whether it has a `_FillValue` (written where a value is NaN); false for values never missing (bounds).
    bool fill = true;
};

struct Dataset {
    std::vector<DatasetDim> dims;
    std::vector<DatasetVariable> variables;
    Attributes global_attributes{};  ///< besides Conventions = CF-1.8
};

/// Writes `dataset` as netCDF (64-bit offset classic format) into `output`'s temporary; the caller commits
/// it. Throws ArgumentError for an unknown dim, a size that does not match or a name netCDF refuses, and
/// SystemError when the system fails (a full disk).
void write_dataset(AtomicOutput& output, const Dataset& dataset);

}  // namespace gridshard::io
