#pragma once
// The outputs of `gridshard eval`: the table on stdout, the JSON report and the zonal-mean file.
// Files go through io::AtomicOutput (a temporary in the same folder, renamed into place once every
// output is complete), so a failed run leaves none. No MPI calls: world rank 0 writes.

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "field_source.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/output_file.hpp"

namespace gridshard::cli {

inline constexpr std::size_t score_count = 7;
/// The per-step scores, in report order.
inline constexpr std::array<const char*, score_count> score_names = {
    "mean_truth", "mean_pred", "bias", "rmse", "std_truth", "std_pred", "grad_mag_percent_diff"};

struct VariableReport {
    std::string name;
    std::array<std::vector<double>, score_count> per_time;  // ntime values each
    double rmse_of_time_mean = 0.0;
    double time_and_global_mean_bias = 0.0;
};

struct Report {
    MeshShape mesh;
    std::string split;
    std::string weights;
    std::string summation;
    GridShape grid;
    std::int64_t ntime = 0;
    std::vector<VariableReport> variables;
};

/// The plain mean over steps (NaN when any step is NaN).
[[nodiscard]] double time_mean(const std::vector<double>& per_time);

/// One line per variable with the time means of the scores.
void print_table(const Report& report, std::ostream& out);

/// The JSON document of the eval contract: numbers with 17 significant digits, NaN as null.
void write_json(const Report& report, std::ostream& out);

/// The zonal means as CF netCDF into `output`'s temporary: one (time, lat) variable per entry of `fields`.
void write_zonal_file(io::AtomicOutput& output, const SourceGrid& grid,
                      const std::vector<std::pair<std::string, std::vector<double>>>& fields);

}  // namespace gridshard::cli
