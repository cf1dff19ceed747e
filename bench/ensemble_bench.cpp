// The ensemble scores for `make bench`, timed within this one process on the same buffers:
//
//   ensemble_scores<float> (the five scores in one pass and one allreduce) on a 16-member ensemble of one
//   721 x 1440 float32 field, one rank, against a plain read of the members and the truth (the memory-bound
//   floor); the data and weights are written as .npy so numpy_ensemble.py times numpy on the same numbers.
//
// Repetitions are interleaved and medians reported. Writes JSON (seconds, results).

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_main.hpp"
#include "bench_support.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/ensemble.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string out = "ensemble.json";
    std::string data_dir = ".";
    int repetitions = 9;
    std::int64_t members = 16;
};

int run(const Options& options) {
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ShardedGrid grid(alone, quarter_degree);
    const Box& box = grid.box();
    const FieldPair fields = make_fields(quarter_degree, box, 1);
    const auto plane = static_cast<std::size_t>(box.area());
    // Members: the prediction plus an error of their own, point noise and a smooth part.
    std::vector<float> members(plane * static_cast<std::size_t>(options.members));
    for (std::int64_t m = 0; m < options.members; ++m) {
        for (std::size_t k = 0; k < plane; ++k) {
            const auto i = static_cast<std::int64_t>(k) / quarter_degree.nlon;
            const auto j = static_cast<std::int64_t>(k) % quarter_degree.nlon;
            members[static_cast<std::size_t>(m) * plane + k] = static_cast<float>(
                fields.prediction[k] + 2.0 * (hash01(m + 101, i, j) - 0.5) + (hash01(m + 7, i / 8, j / 8) - 0.5));
        }
    }
    const AreaWeights weights = cos_lat_weights(latitudes_deg(quarter_degree), quarter_degree.nlon, box.lat);
    const std::filesystem::path dir(options.data_dir);
    write_npy((dir / "ensemble_truth.npy").string(), fields.truth, {quarter_degree.nlat, quarter_degree.nlon}, "<f4");
    write_npy((dir / "ensemble_members.npy").string(), members,
              {options.members, quarter_degree.nlat, quarter_degree.nlon}, "<f4");
    write_npy((dir / "ensemble_weights.npy").string(), weights.values, {quarter_degree.nlat}, "<f8");

    const FieldShard<float> truth{fields.truth, 1};
    const EnsembleShard<float> ensemble{members, options.members, 1};
    const EnsembleScores scores = ensemble_scores<float>(grid, truth, ensemble, weights.view());
    const auto half = static_cast<std::int64_t>(members.size() / 2);
    volatile float sink = read_both(members.data(), members.data() + half, half);
    std::vector<double> read_s;
    std::vector<double> ensemble_s;
    for (int r = 0; r < options.repetitions; ++r) {
        double t0 = now_s();
        sink = read_both(members.data(), members.data() + half, half) +
               read_both(fields.truth.data(), fields.truth.data(), static_cast<std::int64_t>(plane));
        read_s.push_back(now_s() - t0);
        t0 = now_s();
        (void)ensemble_scores<float>(grid, truth, ensemble, weights.view());
        ensemble_s.push_back(now_s() - t0);
    }
    (void)sink;
    const double points = static_cast<double>(plane);
    const nlohmann::ordered_json report = {
        {"shape", {options.members, quarter_degree.nlat, quarter_degree.nlon}},
        {"repetitions", options.repetitions},
        {"t_read_s", median(read_s)},
        {"t_ensemble_s", median(ensemble_s)},
        {"fraction_of_read", median(read_s) / median(ensemble_s)},
        {"ns_per_point", median(ensemble_s) / points * 1e9},
        {"ns_per_member_value", median(ensemble_s) / (points * static_cast<double>(options.members)) * 1e9},
        {"result",
         {scores.ensemble_mean_rmse[0], scores.spread[0], scores.spread_skill_ratio[0], scores.crps[0],
          scores.fair_crps[0]}},
        {"samples_read_s", read_s},
        {"samples_ensemble_s", ensemble_s},
    };
    std::ofstream(options.out) << report.dump(2) << "\n";
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    using gridshard::bench::Options;
    return gridshard::bench::bench_main<Options>(
        argc, argv, "ensemble_bench",
        "gridshard ensemble-score benchmark: ensemble_scores against a read of the members",
        [](CLI::App& app, Options& options) {
            app.add_option("--out", options.out, "JSON file to write");
            app.add_option("--data-dir", options.data_dir, "where to write the .npy inputs of the numpy comparison");
            app.add_option("--repetitions", options.repetitions, "timed repetitions (medians are reported)")
                ->check(CLI::PositiveNumber);
            app.add_option("--members", options.members, "ensemble members")->check(CLI::Range(2, 1000));
        },
        [](const Options& options) { return gridshard::bench::run(options); });
}
