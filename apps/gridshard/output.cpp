#include "output.hpp"

#include <cmath>
#include <cstdio>

#include "gridshard/io/zonal_writer.hpp"

namespace gridshard::cli {
namespace {

std::string number(double value) {
    if (!std::isfinite(value)) {
        return "null";
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out + "\"";
}

}  // namespace

double time_mean(const std::vector<double>& per_time) {
    double sum = 0.0;
    for (double v : per_time) {
        sum += v;
    }
    return per_time.empty() ? std::nan("") : sum / static_cast<double>(per_time.size());
}

void print_table(const Report& report, std::ostream& out) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "gridshard eval: grid %lld x %lld, %lld steps, mesh %s, split %s, weights %s, %s sums\n",
                  static_cast<long long>(report.grid.nlat), static_cast<long long>(report.grid.nlon),
                  static_cast<long long>(report.ntime), to_string(report.mesh).c_str(), report.split.c_str(),
                  report.weights.c_str(), report.summation.c_str());
    out << line << "time means over the steps:\n";
    std::snprintf(line, sizeof line, "%-12s %14s %14s %12s %12s %12s %12s %12s %12s %12s\n", "variable", "mean_truth",
                  "mean_pred", "bias", "rmse", "std_truth", "std_pred", "grad_%diff", "rmse(tmean)", "bias(tmean)");
    out << line;
    for (const VariableReport& v : report.variables) {
        std::snprintf(line, sizeof line, "%-12s %14.6g %14.6g %12.4g %12.4g %12.4g %12.4g %12.4g %12.4g %12.4g\n",
                      v.name.c_str(), time_mean(v.per_time[0]), time_mean(v.per_time[1]), time_mean(v.per_time[2]),
                      time_mean(v.per_time[3]), time_mean(v.per_time[4]), time_mean(v.per_time[5]),
                      time_mean(v.per_time[6]), v.rmse_of_time_mean, v.time_and_global_mean_bias);
        out << line;
    }
}

void write_json(const Report& report, std::ostream& out) {
    out << "{\"gridshard\": " << quoted(GRIDSHARD_VERSION) << ", \"mesh\": {\"data\": " << report.mesh.data
        << ", \"lat\": " << report.mesh.lat << ", \"lon\": " << report.mesh.lon
        << "}, \"split\": " << quoted(report.split) << ", \"weights\": " << quoted(report.weights)
        << ", \"summation\": " << quoted(report.summation) << ", \"grid\": {\"nlat\": " << report.grid.nlat
        << ", \"nlon\": " << report.grid.nlon << "}, \"ntime\": " << report.ntime << ", \"variables\": {";
    for (std::size_t n = 0; n < report.variables.size(); ++n) {
        const VariableReport& v = report.variables[n];
        out << (n ? ", " : "") << quoted(v.name) << ": {\"per_time\": {";
        for (std::size_t k = 0; k < score_count; ++k) {
            out << (k ? ", " : "") << quoted(score_names[k]) << ": [";
            for (std::size_t s = 0; s < v.per_time[k].size(); ++s) {
                out << (s ? ", " : "") << number(v.per_time[k][s]);
            }
            out << "]";
        }
        out << "}, \"time_mean\": {";
        for (std::size_t k = 0; k < score_count; ++k) {
            out << (k ? ", " : "") << quoted(score_names[k]) << ": " << number(time_mean(v.per_time[k]));
        }
        out << "}, \"rmse_of_time_mean\": " << number(v.rmse_of_time_mean)
            << ", \"time_and_global_mean_bias\": " << number(v.time_and_global_mean_bias) << "}";
    }
    out << "}}\n";
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
