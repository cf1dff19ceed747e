#include "output.hpp"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gridshard/io/zonal_writer.hpp"

namespace gridshard::cli {

double time_mean(const std::vector<double>& per_time) {
    double sum = 0.0;
    for (double v : per_time) {
        sum += v;
    }
    return per_time.empty() ? std::nan("") : sum / static_cast<double>(per_time.size());
}

void print_table(const Report& report, std::ostream& out) {
    char cell[512];
    std::snprintf(cell, sizeof cell,
                  "gridshard eval: grid %lld x %lld, %lld steps, mesh %s, split %s, weights %s, %s sums, %s\n",
                  static_cast<long long>(report.grid.nlat), static_cast<long long>(report.grid.nlon),
                  static_cast<long long>(report.ntime), to_string(report.mesh).c_str(), report.split.c_str(),
                  report.weights.c_str(), report.summation.c_str(), report.policy.c_str());
    out << cell << "time means over the steps:\n";
    std::snprintf(cell, sizeof cell, "%-12s", "variable");
    out << cell;
    for (const ScoreDefinition& score : report.scores) {
        std::snprintf(cell, sizeof cell, " %*s", score.table_width, score.label.c_str());
        out << cell;
    }
    std::snprintf(cell, sizeof cell, " %12s %12s\n", "rmse(tmean)", "bias(tmean)");
    out << cell;
    for (const VariableReport& v : report.variables) {
        std::snprintf(cell, sizeof cell, "%-12s", v.name.c_str());
        out << cell;
        for (std::size_t k = 0; k < report.scores.size(); ++k) {
            std::snprintf(cell, sizeof cell, " %*.*g", report.scores[k].table_width, report.scores[k].table_digits,
                          time_mean(v.per_time[k]));
            out << cell;
        }
        std::snprintf(cell, sizeof cell, " %12.4g %12.4g\n", v.rmse_of_time_mean, v.time_and_global_mean_bias);
        out << cell;
    }
}

void write_json(const Report& report, std::ostream& out) {
    using json = nlohmann::ordered_json;
    json variables = json::object();
    for (const VariableReport& v : report.variables) {
        json per_time = json::object();
        json means = json::object();
        for (std::size_t k = 0; k < report.scores.size(); ++k) {
            per_time[report.scores[k].name] = v.per_time[k];
            means[report.scores[k].name] = time_mean(v.per_time[k]);
        }
        variables[v.name] = {{"per_time", per_time},
                             {"time_mean", means},
                             {"rmse_of_time_mean", v.rmse_of_time_mean},
                             {"time_and_global_mean_bias", v.time_and_global_mean_bias}};
    }
    json document =
        json_header(report.mesh, report.split, report.weights, report.summation, report.policy, report.grid);
    document["ntime"] = report.ntime;
    document["variables"] = variables;
    if (!report.timings.names.empty()) {
        json ranks = json::array();
        const std::size_t width = report.timings.names.size();
        for (std::size_t r = 0; r * width < report.timings.per_rank.size(); ++r) {
            json one = json::object();
            for (std::size_t k = 0; k < width; ++k) {
                one[report.timings.names[k]] = report.timings.per_rank[r * width + k];
            }
            ranks.push_back(one);
        }
        document["timings"] = {{"seconds_per_rank", ranks}, {"steps_per_rank", report.timings.steps}};
    }
    dump_json(document, out);
}

nlohmann::ordered_json json_header(const MeshShape& mesh, const std::string& split, const std::string& weights,
                                   const std::string& summation, const std::string& policy, const GridShape& grid) {
    return {
        {"gridshard", GRIDSHARD_VERSION},
        {"mesh", {{"data", mesh.data}, {"lat", mesh.lat}, {"lon", mesh.lon}}},
        {"split", split},
        {"weights", weights},
        {"summation", summation},
        {"policy", policy},
        {"grid", {{"nlat", grid.nlat}, {"nlon", grid.nlon}}},
    };
}

void dump_json(const nlohmann::ordered_json& document, std::ostream& out) {
    out << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

void write_zonal_file(io::AtomicOutput& output, const SourceGrid& grid,
                      const std::vector<std::pair<std::string, std::vector<double>>>& fields) {
    std::vector<io::ZonalVariable> variables;
    for (const auto& [name, values] : fields) {
        variables.push_back({name, values, "", "zonal mean of " + name});
    }
    io::write_zonal_means(output, grid, grid.ntime, variables);
}

}  // namespace gridshard::cli
