#pragma once
// The outputs of `gridshard eval`, written from what the library's evaluation gives back
// (gridshard/evaluation/evaluate.hpp): the table on stdout, the JSON report, and the netCDF files (the --zonal
// file of a pair; ACE's mean_diagnostics.nc, zonal_mean_diagnostics.nc, time_mean_diagnostics.nc and
// near_zero_fraction_diagnostics.nc, trend_diagnostics.nc, video_diagnostics.nc, annual_diagnostics.nc,
// enso_index_diagnostics.nc, ipo_index_diagnostics.nc, histogram_diagnostics.nc and
// enso_coefficient_diagnostics.nc of a forecast, and
// power_spectrum_diagnostics.nc of either, in --diagnostics). The table and the JSON iterate the scores the result
// carries, which come from the score registry, so a registered score reaches both. Every file is complete or absent:
// all are written to temporaries, then renamed. World rank 0 writes them, or (--io collective) every rank the netCDF
// files together.

#include <ostream>
#include <string>
#include <vector>

#include "gridshard/evaluation/evaluate.hpp"
#include "gridshard/io/output_file.hpp"

namespace gridshard::cli {

/// Where the outputs go: the JSON report, the --zonal file, and the diagnostics folder's files (empty: none).
struct OutputPaths {
    std::string json;
    std::string zonal;
    std::string mean;
    std::string zonal_mean;
    std::string time_mean;
    std::string spectrum;          ///< power_spectrum_diagnostics.nc
    std::string near_zero;         ///< near_zero_fraction_diagnostics.nc
    std::string trend;             ///< trend_diagnostics.nc
    std::string video;             ///< video_diagnostics.nc
    std::string annual;            ///< annual_diagnostics.nc
    std::string enso_index;        ///< enso_index_diagnostics.nc
    std::string ipo_index;         ///< ipo_index_diagnostics.nc
    std::string histogram;         ///< histogram_diagnostics.nc
    std::string enso_coefficient;  ///< enso_coefficient_diagnostics.nc
    std::string seasonal;          ///< seasonal_diagnostics.nc
    /// Every path, named for io::check_output_paths.
    [[nodiscard]] std::vector<io::NamedPath> named() const;
};

/// Which diagnostics files a run writes: a forecast's three (mean, zonal mean, time mean), the power spectra's (a
/// pair's only file), and a forecast's file of each climate family it scores (the near-zero fractions' with their
/// maps only).
struct DiagnosticsFiles {
    bool forecast = false;
    bool spectrum = false;
    bool near_zero_maps = false;
    bool trend = false;
    bool video = false;
    bool annual = false;
    bool seasonal = false;
    bool enso_index = false;
    bool ipo_index = false;
    bool histogram = false;
    bool enso_coefficient = false;
};

/// The paths of `json`, `zonal` and the diagnostics files `files` in `folder` (none when empty).
[[nodiscard]] OutputPaths output_paths(const std::string& json, const std::string& zonal, const std::string& folder,
                                       const DiagnosticsFiles& files);

/// Throws ArgumentError unless `folder` is empty or an existing directory.
void check_diagnostics_folder(const std::string& folder);

/// The table: a header, then per channel (and region) the time means of the table's scores.
void print_table(const EvaluationResult& result, std::ostream& out);

/// The JSON document of the eval contract (docs/cli.md, docs/forecast.md), written with nlohmann-json: numbers in
/// the shortest form that reads back to the same double, NaN and infinities as null.
void write_json(const EvaluationResult& result, std::ostream& out);

/// The table on `table`, then every file of `paths`. No MPI calls: world rank 0 calls it, with every map whole.
void write_outputs(const EvaluationResult& result, const OutputPaths& paths, std::ostream& table);

/// The same outputs, written by every rank of the result's world together (--io collective): rank 0 prints the
/// table and writes the JSON report, and every rank writes the netCDF files collectively, the maps from its own
/// box (the result's maps hold data rank 0's boxes). The same bytes as write_outputs. Collective over the world.
void write_outputs_collectively(const EvaluationResult& result, const OutputPaths& paths, std::ostream& table);

}  // namespace gridshard::cli
