// One-rank figures for `make bench`, each ratio timed within this one process on the same buffers:
//
//  suite:   Evaluator::evaluate<float> (reproducible and fast summation, gradient on) on (8, 721, 1440)
//           against a plain read of the same two buffers; the read sets the memory-bound floor.
//  gradmag: gradient_magnitude_percent_diff<float> on the first 3 channels of those buffers, against a
//           plain read of those channels of both fields; the data (and weights) are also written as .npy
//           so the torch and numpy pipelines (torch_gradmag.py, numpy_gradmag.py) time the same numbers.
//
// The three suite timings are interleaved within each repetition, so slow drifts of the shared VM hit
// them alike; medians keep one noisy repetition from moving a figure. Writes JSON (seconds, GB/s).

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_main.hpp"
#include "bench_support.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string out = "single_rank.json";
    std::string data_dir = ".";
    int repetitions = 9;
    std::int64_t suite_channels = 8;
    std::int64_t gradmag_channels = 3;
    std::string only;  // "suite" or "gradmag" to time one of them (for a profiler); empty: both
};

// Largest relative difference between two score vectors: the fast and reproducible modes must agree to
// rounding, or the timing compares different work.
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0.0;
    for (std::size_t k = 0; k < a.size(); ++k) {
        worst = std::max(worst, std::abs(a[k] - b[k]) / std::max(std::abs(b[k]), 1e-300));
    }
    return worst;
}

double max_relative_difference(const Scores& a, const Scores& b) {
    double worst = 0.0;
    for (const char* name : {"mean_truth", "mean_pred", "rmse", "std_truth", "grad_mag_percent_diff"}) {
        worst = std::max(worst, max_relative_difference(a[name], b[name]));
    }
    return worst;
}

nlohmann::ordered_json suite_figures(const Options& options, const ShardedGrid& grid, const FieldPair& fields,
                                     const AreaWeights& weights) {
    const std::int64_t channels = options.suite_channels;
    const FieldShard<float> truth{fields.truth, channels};
    const FieldShard<float> prediction{fields.prediction, channels};
    Evaluator reproducible(grid, channels, weights.view());
    EvaluationOptions fast_options;
    fast_options.summation = Summation::fast;
    Evaluator fast(grid, channels, weights.view(), fast_options);
    const auto n = static_cast<std::int64_t>(fields.truth.size());

    // Warm-up: page in both buffers, fill the Evaluators' halo buffers, settle the clock frequency.
    volatile float sink = read_both(fields.truth.data(), fields.prediction.data(), n);
    const Scores reproducible_scores = reproducible.evaluate(truth, prediction);
    const Scores fast_scores = fast.evaluate(truth, prediction);

    std::vector<double> read_s;
    std::vector<double> reproducible_s;
    std::vector<double> fast_s;
    for (int r = 0; r < options.repetitions; ++r) {
        double t0 = now_s();
        sink = read_both(fields.truth.data(), fields.prediction.data(), n);
        read_s.push_back(now_s() - t0);
        t0 = now_s();
        (void)reproducible.evaluate(truth, prediction);
        reproducible_s.push_back(now_s() - t0);
        t0 = now_s();
        (void)fast.evaluate(truth, prediction);
        fast_s.push_back(now_s() - t0);
    }
    (void)sink;
    const double t_read = median(read_s);
    const double t_reproducible = median(reproducible_s);
    const double t_fast = median(fast_s);
    const double bytes = 2.0 * static_cast<double>(n) * sizeof(float);
    return {
        {"shape", {channels, grid.grid().nlat, grid.grid().nlon}},
        {"repetitions", options.repetitions},
        {"bytes_read", bytes},
        {"t_read_s", t_read},
        {"t_suite_reproducible_s", t_reproducible},
        {"t_suite_fast_s", t_fast},
        {"read_bandwidth_gb_s", bytes / t_read * 1e-9},
        {"suite_reproducible_gb_s", bytes / t_reproducible * 1e-9},
        {"suite_fast_gb_s", bytes / t_fast * 1e-9},
        {"ns_per_point_reproducible", t_reproducible / static_cast<double>(n) * 1e9},
        {"ns_per_point_fast", t_fast / static_cast<double>(n) * 1e9},
        {"fraction_reproducible", t_read / t_reproducible},
        {"fraction_fast", t_read / t_fast},
        {"reproducible_overhead", t_reproducible / t_fast - 1.0},
        {"fast_vs_reproducible_max_relative_difference", max_relative_difference(fast_scores, reproducible_scores)},
        {"samples_read_s", read_s},
        {"samples_suite_reproducible_s", reproducible_s},
        {"samples_suite_fast_s", fast_s},
    };
}

nlohmann::ordered_json gradmag_figures(const Options& options, const ShardedGrid& grid, const FieldPair& fields,
                                       const AreaWeights& weights) {
    const std::int64_t channels = options.gradmag_channels;
    const GridShape g = grid.grid();
    const auto n = static_cast<std::size_t>(channels * g.nlat * g.nlon);
    // The leading channels of the suite's buffers: (channels, nlat, nlon) is a prefix of (8, nlat, nlon).
    const FieldShard<float> truth{std::span<const float>(fields.truth).first(n), channels};
    const FieldShard<float> prediction{std::span<const float>(fields.prediction).first(n), channels};

    const std::filesystem::path dir(options.data_dir);
    write_npy((dir / "gradmag_truth.npy").string(), std::vector<float>(truth.values.begin(), truth.values.end()),
              {channels, g.nlat, g.nlon}, "<f4");
    write_npy((dir / "gradmag_prediction.npy").string(),
              std::vector<float>(prediction.values.begin(), prediction.values.end()), {channels, g.nlat, g.nlon},
              "<f4");
    write_npy((dir / "gradmag_weights.npy").string(), weights.values, {g.nlat}, "<f8");

    const std::vector<double> result = gradient_magnitude_percent_diff<float>(grid, truth, prediction, weights.view());
    const std::vector<double> fast_result =
        gradient_magnitude_percent_diff<float>(grid, truth, prediction, weights.view(), {}, Summation::fast);
    std::vector<double> read_s;
    std::vector<double> reproducible_s;
    std::vector<double> fast_s;
    volatile float sink = 0.0F;
    for (int r = 0; r < options.repetitions; ++r) {
        double t0 = now_s();
        sink = read_both(truth.values.data(), prediction.values.data(), static_cast<std::int64_t>(n));
        read_s.push_back(now_s() - t0);
        t0 = now_s();
        (void)gradient_magnitude_percent_diff<float>(grid, truth, prediction, weights.view());
        reproducible_s.push_back(now_s() - t0);
        t0 = now_s();
        (void)gradient_magnitude_percent_diff<float>(grid, truth, prediction, weights.view(), {}, Summation::fast);
        fast_s.push_back(now_s() - t0);
    }
    (void)sink;
    return {
        {"shape", {channels, g.nlat, g.nlon}},
        {"repetitions", options.repetitions},
        {"t_read_s", median(read_s)},
        {"fraction_of_read", median(read_s) / median(reproducible_s)},
        {"t_gridshard_s", median(reproducible_s)},
        {"t_gridshard_fast_s", median(fast_s)},
        {"ns_per_point", median(reproducible_s) / static_cast<double>(n) * 1e9},
        {"result", result},
        {"result_fast", fast_result},
        {"samples_read_s", read_s},
        {"samples_gridshard_s", reproducible_s},
        {"samples_gridshard_fast_s", fast_s},
    };
}

int run(const Options& options) {
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ShardedGrid grid(alone, quarter_degree);
    const FieldPair fields = make_fields(quarter_degree, grid.box(), options.suite_channels);
    const AreaWeights weights = cos_lat_weights(latitudes_deg(quarter_degree), quarter_degree.nlon, grid.box().lat);

    nlohmann::ordered_json report;
    if (options.only != "gradmag") {
        report["suite"] = suite_figures(options, grid, fields, weights);
    }
    if (options.only != "suite") {
        report["gradmag"] = gradmag_figures(options, grid, fields, weights);
    }
    std::ofstream(options.out) << report.dump(2) << "\n";
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    using gridshard::bench::Options;
    return gridshard::bench::bench_main<Options>(
        argc, argv, "single_rank_bench",
        "gridshard one-rank benchmarks: fused suite vs read bandwidth, gradient metric timings",
        [](CLI::App& app, Options& options) {
            app.add_option("--out", options.out, "JSON file to write");
            app.add_option("--data-dir", options.data_dir, "where to write the .npy inputs of the numpy comparison");
            app.add_option("--repetitions", options.repetitions, "timed repetitions per figure (medians are reported)")
                ->check(CLI::PositiveNumber);
            app.add_option("--only", options.only, "time only these figures (to profile one of them)")
                ->check(CLI::IsMember({"suite", "gradmag"}));
        },
        [](const Options& options) { return gridshard::bench::run(options); });
}
