#pragma once
// The outputs of the forecast evaluation: the table on stdout, the JSON report, and ACE's diagnostics
// files (mean_diagnostics.nc, zonal_mean_diagnostics.nc, time_mean_diagnostics.nc) in --diagnostics.
// Every file is complete or absent: all are written to temporaries, then renamed. World rank 0 writes them,
// or (--io collective) every rank the diagnostics files together.

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "field_source.hpp"
#include "forecast_source.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard::cli {

/// The scores of one channel over one region: per score a value per lead time, and the time means.
struct RegionForecast {
    std::string name;
    std::vector<std::pair<std::string, std::vector<double>>> per_step;
    std::vector<std::pair<std::string, double>> time_mean;
};

/// One channel of a variable: its regions (global first), its zonal means (lead, lat) of the prediction
/// and of the error, averaged over samples, and (with --diagnostics) its time-mean maps: whole on world rank
/// 0, or with --io collective each data rank 0's own box.
struct ChannelForecast {
    std::string name;
    std::vector<RegionForecast> regions;
    std::vector<double> zonal_gen;
    std::vector<double> zonal_error;
    std::vector<double> gen_map;
    std::vector<double> bias_map;
};

struct ForecastReport {
    MeshShape mesh;
    std::string split;
    std::string weights;
    std::string summation;
    std::string policy;
    SourceGrid grid;
    ForecastLayout layout;
    LeadTimes lead_times;
    std::string data_split;
    TimeMeanRows time_means;
    std::string climatology;
    std::vector<ChannelForecast> variables;
};

/// The diagnostics files in a folder (empty paths without --diagnostics).
struct ForecastOutputPaths {
    std::string mean;
    std::string zonal;
    std::string time_mean;
    /// These and the JSON report, named for io::check_output_paths.
    [[nodiscard]] std::vector<io::NamedPath> named(const std::string& json) const;
};

[[nodiscard]] ForecastOutputPaths forecast_output_paths(const std::string& folder);

/// Throws ArgumentError unless `folder` is empty or an existing directory.
void check_diagnostics_folder(const std::string& folder);

/// The table on `table`, then the JSON report (when `json` is not empty) and the diagnostics files. No MPI
/// calls: world rank 0 calls it, with every map whole.
void write_forecast_outputs(const ForecastReport& report, const std::string& json, const ForecastOutputPaths& paths,
                            std::ostream& table);

/// The same outputs, written by every rank of `grid`'s world together (--io collective): rank 0 prints the
/// table and writes the JSON report, and every rank writes the diagnostics files collectively, the maps
/// from its own box (the report's maps hold data rank 0's boxes; no rank holds a whole map). The files are
/// the same bytes write_forecast_outputs writes. Collective over the world.
void write_forecast_outputs_collectively(const ForecastReport& report, const std::string& json,
                                         const ForecastOutputPaths& paths, std::ostream& table,
                                         const ShardedGrid& grid);

}  // namespace gridshard::cli
