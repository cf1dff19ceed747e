// The C++ side of `python_overhead_small_us` (`make bench`): the time of one small call of
// gridshard::weighted_mean<float> on one rank, one channel of an (8, 16) grid with per-row cos-lat
// weights, as python_overhead.py times `Distributed().weighted_mean` on the same numbers. What Python
// adds per call is the difference of the two.
//
// Like gridshard.Distributed: a 1x1x1 mesh over MPI_COMM_WORLD (run with mpirun -n 1), its ranks' threads
// set by use_cores_of_this_rank, the grid built once, reproducible sums. Each sample times `--calls`
// calls; the median over `--repetitions` samples, after one untimed sample, is reported per call. Writes
// JSON (microseconds per call, and the result for the agreement check).

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_main.hpp"
#include "bench_support.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string out = "small_call.json";
    int repetitions = 21;
    int calls = 20000;
};

// The small grid of the figure: 8 latitudes from pole to pole, 16 longitudes. python_overhead.py builds
// the same latitudes (numpy.linspace(-90, 90, 8)) and values.
constexpr GridShape small_grid{8, 16};

// x[i, j] = 1 + (16 i + j) / 4, exact in float, as python_overhead.py.
std::vector<float> small_field() {
    std::vector<float> x(static_cast<std::size_t>(small_grid.nlat * small_grid.nlon));
    for (std::size_t k = 0; k < x.size(); ++k) {
        x[k] = 1.0F + static_cast<float>(k) * 0.25F;
    }
    return x;
}

int run(const Options& options) {
    const ProcessMesh mesh(Communicator::world(), {1, 1, 1});
    const int threads = use_cores_of_this_rank(mesh.world());
    const ShardedGrid grid(mesh, small_grid);
    std::vector<double> lat(static_cast<std::size_t>(small_grid.nlat));
    for (std::int64_t i = 0; i < small_grid.nlat; ++i) {
        lat[static_cast<std::size_t>(i)] = -90.0 + 180.0 * static_cast<double>(i) / 7.0;
    }
    const AreaWeights weights = cos_lat_weights(lat, small_grid.nlon, grid.box().lat);
    const std::vector<float> x = small_field();
    const FieldShard<float> field{x, 1};

    const std::vector<double> result = weighted_mean(grid, field, weights.view());
    double sink = 0.0;
    auto sample = [&] {
        const double t0 = now_s();
        for (int k = 0; k < options.calls; ++k) {
            sink += weighted_mean(grid, field, weights.view())[0];
        }
        return (now_s() - t0) / options.calls;
    };
    (void)sample();  // warm-up: caches, clock frequency
    std::vector<double> per_call_s;
    for (int r = 0; r < options.repetitions; ++r) {
        per_call_s.push_back(sample());
    }
    std::vector<double> samples_us;
    for (const double s : per_call_s) {
        samples_us.push_back(s * 1e6);
    }
    const nlohmann::ordered_json report = {
        {"shape", {1, small_grid.nlat, small_grid.nlon}},
        {"weights", "cos_lat per row"},
        {"threads", threads},
        {"calls_per_sample", options.calls},
        {"repetitions", options.repetitions},
        {"t_call_us", median(per_call_s) * 1e6},
        {"result", result},
        {"checksum", sink},
        {"samples_call_us", samples_us},
    };
    std::ofstream(options.out) << report.dump(2) << "\n";
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    using gridshard::bench::Options;
    return gridshard::bench::bench_main<Options>(
        argc, argv, "small_call_bench", "gridshard: the time of one small weighted_mean call in C++, one rank",
        [](CLI::App& app, Options& options) {
            app.add_option("--out", options.out, "JSON file to write");
            app.add_option("--repetitions", options.repetitions, "timed samples (the median is reported)")
                ->check(CLI::PositiveNumber);
            app.add_option("--calls", options.calls, "calls per sample")->check(CLI::PositiveNumber);
        },
        [](const Options& options) { return gridshard::bench::run(options); });
}
