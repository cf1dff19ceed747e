// The read `gridshard eval` makes of a CF file pair, and nothing else: the yardstick of eval_over_read_16_steps.
// Every variable, every step, the whole grid (one process), through the source eval reads with
// (io::make_netcdf_pair, opened as `--io` says, as eval opens it), into buffers of the type eval scores the variable
// in, with CF decoding (packed values, fill values to NaN): the same netCDF calls into the same buffers. Variable
// after variable, step after step, as eval reads them. Writes JSON: the wall seconds from start to the last read.

#include <CLI/CLI.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "bench_main.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "gridshard/io/io_mode.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string truth;
    std::string prediction;
    std::string io = "auto";
    std::string out = "eval_read.json";
};

template <class T>
void read_every_step(io::ForecastSteps& steps, std::int64_t plane, std::int64_t leads, double& checksum) {
    std::vector<T> truth(static_cast<std::size_t>(plane));
    std::vector<T> prediction(truth.size());
    for (std::int64_t lead = 0; lead < leads; ++lead) {
        steps.read(0, lead, {0, 1}, std::span<T>(truth), std::span<T>(prediction));
        checksum += static_cast<double>(truth[truth.size() / 2]) + static_cast<double>(prediction.front());
    }
}

int run(const Options& options) {
    const auto started = std::chrono::steady_clock::now();
    const Communicator world = Communicator::world();
    const io::InputAccess access{io::parse_io_mode(options.io, "--io"), &world};
    const std::unique_ptr<io::ForecastSource> source =
        io::make_netcdf_pair(options.truth, options.prediction, {}, false, access);
    const GridShape shape = source->grid().shape();
    const Box box{{0, shape.nlat}, {0, shape.nlon}};
    double checksum = 0.0;  // keeps the reads observable
    for (const io::SourceVariable& variable : source->variables()) {
        const std::unique_ptr<io::ForecastSteps> steps = source->open(variable, box);
        const std::int64_t plane = variable.channels * box.area();
        if (variable.type == io::ValueType::float64) {
            read_every_step<double>(*steps, plane, source->layout().lead_times, checksum);
        } else {
            read_every_step<float>(*steps, plane, source->layout().lead_times, checksum);
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::ofstream(options.out) << nlohmann::ordered_json{{"t_read_s", seconds},
                                                         {"steps", source->layout().lead_times},
                                                         {"variables", source->variables().size()},
                                                         {"checksum", checksum}}
                                      .dump(2)
                               << "\n";
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    using gridshard::bench::Options;
    return gridshard::bench::bench_main<Options>(
        argc, argv, "eval_read_bench",
        "the read gridshard eval makes of a CF file pair, alone: the yardstick of eval_over_read",
        [](CLI::App& app, Options& options) {
            app.add_option("--truth", options.truth, "truth file")->required();
            app.add_option("--pred", options.prediction, "prediction file")->required();
            app.add_option("--io", options.io, "as gridshard eval's --io");
            app.add_option("--out", options.out, "JSON file to write");
        },
        [](const Options& options) { return gridshard::bench::run(options); });
}
