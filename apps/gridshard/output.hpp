#pragma once
// The outputs of `gridshard eval`: the table on stdout, the JSON report and the zonal-mean file. The table
// and the JSON iterate the report's score registry (metrics/scores.hpp), so a registered score reaches
// both. Files go through io::AtomicOutput (a temporary in the same folder, renamed into place once every
// output is complete), so a failed run leaves none. No MPI calls: world rank 0 writes.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "field_source.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/metrics/scores.hpp"

namespace gridshard::cli {

struct VariableReport {
    std::string name;
    std::vector<std::vector<double>> per_time;  // per score of Report::scores, ntime values each
    double rmse_of_time_mean = 0.0;
    double time_and_global_mean_bias = 0.0;
};

struct Report {
    MeshShape mesh;
    std::string split;
    std::string weights;
    std::string summation;
    std::string policy;
    GridShape grid;
    std::int64_t ntime = 0;
    std::vector<ScoreDefinition> scores = evaluation_scores();  // what per_time holds, in order
    std::vector<VariableReport> variables;
    /// With --timings: every rank's seconds per phase, `names.size()` values a rank in world-rank order, and
    /// the steps each rank scored (per variable, summed).
    struct Timings {
        std::vector<std::string> names;
        std::vector<double> per_rank;
        std::int64_t steps = 0;
    } timings{};
};

/// The plain mean over steps (NaN when any step is NaN).
[[nodiscard]] double time_mean(const std::vector<double>& per_time);

/// One line per variable with the time means of the scores, then the time-mean scores.
void print_table(const Report& report, std::ostream& out);

/// The JSON document of the eval contract (written with nlohmann-json): numbers in the shortest form
/// that reads back to the same double, NaN and infinities as null.
void write_json(const Report& report, std::ostream& out);

/// The keys every report of `gridshard eval` opens with, in order: gridshard (the version), mesh, split,
/// weights, summation, policy, grid.
[[nodiscard]] nlohmann::ordered_json json_header(const MeshShape& mesh, const std::string& split,
                                                 const std::string& weights, const std::string& summation,
                                                 const std::string& policy, const GridShape& grid);

/// Writes `document` compactly with a newline; bytes of a name that are not UTF-8 (a netCDF name is bytes)
/// are replaced rather than failing the report.
void dump_json(const nlohmann::ordered_json& document, std::ostream& out);

/// The zonal means as CF netCDF into `output`'s temporary: one (time, lat) variable per entry of `fields`.
void write_zonal_file(io::AtomicOutput& output, const SourceGrid& grid,
                      const std::vector<std::pair<std::string, std::vector<double>>>& fields);

}  // namespace gridshard::cli
