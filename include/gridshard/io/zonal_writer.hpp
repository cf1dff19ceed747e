#pragma once
/// @file
/// The zonal-mean output file of `gridshard eval`, CF netCDF: a dataset of the one dataset writer
/// (dataset_writer.hpp), written through AtomicOutput, or collectively (parallel_io.hpp). No MPI calls.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/grid_info.hpp"
#include "gridshard/io/output_file.hpp"

namespace gridshard::io {

/// One variable of the zonal-mean file: (ntime, nlat) values, row-major, NaN where undefined.
struct ZonalVariable {
    std::string name;
    std::vector<double> values;
    std::string units{};      ///< written when not empty
    std::string long_name{};  ///< written when not empty
};

/// The global attributes of the zonal-mean file besides Conventions.
struct ZonalFileAttributes {
    std::string title = "gridshard zonal means";
    std::string history = "written by gridshard";  ///< e.g. the command line
};

/// Writes the zonal means as a CF-1.8 netCDF file (64-bit offset classic format): dims time
/// (unlimited) and the grid's latitude dim; the latitude coordinate with the grid's values and bounds;
/// a time coordinate with `time_values` (or, when not given, the grid's time values, which must then
/// number `ntime`) and the grid's units and calendar, or no time coordinate when there are no values;
/// one float64 (time, lat) variable per entry with `_FillValue` 9.96920996838687e+36 written wherever
/// the value is NaN, and cell_methods "longitude: mean". The file is written into `output`'s temporary;
/// the caller commits it (with other outputs: see write_outputs_atomically). Throws ArgumentError for sizes
/// that do not match and SystemError when netCDF or the file system fails. No MPI calls: call it on one rank.
void write_zonal_means(AtomicOutput& output, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes = {},
                       const std::optional<std::vector<double>>& time_values = std::nullopt);

/// The dataset write_zonal_means writes (dataset_writer.hpp), for a collective write (parallel_io.hpp); `path`
/// names the file in its errors. Throws ArgumentError as write_zonal_means. No MPI calls.
[[nodiscard]] Dataset zonal_means_dataset(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                                          const std::vector<ZonalVariable>& variables,
                                          const ZonalFileAttributes& attributes = {},
                                          const std::optional<std::vector<double>>& time_values = std::nullopt);

/// The same into `path`, committed at once: the file appears complete or not at all.
void write_zonal_means(const std::string& path, const GridInfo& grid, std::int64_t ntime,
                       const std::vector<ZonalVariable>& variables, const ZonalFileAttributes& attributes = {},
                       const std::optional<std::vector<double>>& time_values = std::nullopt);

}  // namespace gridshard::io
