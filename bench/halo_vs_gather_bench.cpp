// The halo path against today's gather path for gradient_magnitude_percent_diff on a process mesh
// (`mpirun -n 4 halo_vs_gather_bench --mesh 1x2x2`):
//
//  halo:   gradient_magnitude_percent_diff on each rank's shards (one-cell halos, one allreduce).
//  gather: gather truth, prediction and the per-point weights to every spatial rank with gather_spatial,
//          then compute on the whole field in each process (a 1x1x1 mesh over MPI_COMM_SELF): what a
//          code without halos does.
//
// Each repetition times both paths: barrier, run, elapsed time, then the maximum over ranks (the
// slowest rank is when the result is ready everywhere). Medians over repetitions. Bytes sent per rank
// come from the library's own geometry (halo_bytes_per_channel, gather_bytes_per_channel) plus the
// allreduce payloads. Rank 0 writes JSON.

#include <mpi.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_support.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/halo_geometry.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string out = "halo_vs_gather.json";
    std::string mesh = "1x2x2";
    int repetitions = 9;
    std::int64_t channels = 3;
};

// One agree_or_throw with a single agreed value: an allreduce of 1 + 2*1 int64.
constexpr std::int64_t argument_check_bytes = 3 * 8;

double max_over_ranks(double value) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return value;
}

double min_over_ranks(double value) {
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    return value;
}

int run(const Options& options) {
    const ProcessMesh mesh(Communicator::world(), parse_mesh_shape(options.mesh));
    // As the tool does: the node's cores shared between its ranks, so 4 ranks on 2 cores run a thread each.
    (void)use_cores_of_this_rank(mesh.world());
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const GridShape g = quarter_degree;
    const ShardedGrid grid(mesh, g);
    const ShardedGrid whole(alone, g);
    const Box& box = grid.box();
    const std::int64_t channels = options.channels;

    const FieldPair shard = make_fields(g, box, channels);
    const std::vector<double> lat_deg = latitudes_deg(g);
    const AreaWeights row_weights = cos_lat_weights(lat_deg, g.nlon, box.lat);
    // The gather path carries weights as a full (rows, cols) field, as codes without per-row weights do.
    std::vector<double> point_weights;
    point_weights.reserve(static_cast<std::size_t>(box.area()));
    for (double a : row_weights.values) {
        point_weights.insert(point_weights.end(), static_cast<std::size_t>(box.lon.size()), a);
    }

    auto halo_path = [&] {
        return gradient_magnitude_percent_diff<float>(grid, {shard.truth, channels}, {shard.prediction, channels},
                                                      row_weights.view());
    };
    double gather_comm_s = 0.0;  // the gathers alone, of the last gather_path call on this rank
    auto gather_path = [&] {
        const double t0 = now_s();
        const auto truth = gather_spatial<float>(mesh, grid.decomposition(), shard.truth, channels);
        const auto prediction = gather_spatial<float>(mesh, grid.decomposition(), shard.prediction, channels);
        const auto weights = gather_spatial<double>(mesh, grid.decomposition(), point_weights, 1);
        gather_comm_s = now_s() - t0;
        return gradient_magnitude_percent_diff<float>(whole, {truth, channels}, {prediction, channels},
                                                      Weights{weights, true});
    };

    // Warm-up (first-touch of the gather buffers, MPI connection set-up), and the two answers compared.
    const std::vector<double> halo_result = halo_path();
    const std::vector<double> gather_result = gather_path();
    double worst = 0.0;
    for (std::size_t c = 0; c < halo_result.size(); ++c) {
        worst = std::max(worst, std::abs(halo_result[c] - gather_result[c]) / std::abs(gather_result[c]));
    }

    std::vector<double> halo_s;
    std::vector<double> gather_s;
    std::vector<double> gather_comm_samples_s;
    for (int r = 0; r < options.repetitions; ++r) {
        mesh.world().barrier();
        double t0 = now_s();
        (void)halo_path();
        halo_s.push_back(max_over_ranks(now_s() - t0));
        mesh.world().barrier();
        t0 = now_s();
        (void)gather_path();
        gather_s.push_back(max_over_ranks(now_s() - t0));
        gather_comm_samples_s.push_back(max_over_ranks(gather_comm_s));
    }

    // Bytes this rank sends. The halo exchange of gradient_magnitude_percent_diff is open in longitude
    // (the default GradientOptions) and carries both fields; then one allreduce of 1 + 3C exact sums (the
    // total weight; per channel the weight of the valid pairs and both magnitude sums), and one argument
    // check (the exchange's folded into the metric's).
    const Decomposition& d = grid.decomposition();
    const auto halo_strip_bytes = static_cast<double>(
        halo_bytes_per_channel(d, mesh.coords(), 1, {.lat = false, .lon = false}, 4) * channels * 2);
    const auto allreduce_bytes =
        static_cast<double>((1 + 3 * channels) * static_cast<std::int64_t>(ExactSum::wire_size) * 8);
    const double halo_bytes = halo_strip_bytes + allreduce_bytes + argument_check_bytes;
    // Gather: truth and prediction (float32) and the per-point weights (float64), each with its check.
    const auto gather_bytes =
        static_cast<double>(gather_bytes_per_channel(d, mesh.coords(), 4) * channels * 2 +
                            gather_bytes_per_channel(d, mesh.coords(), 8) + 3 * argument_check_bytes);

    const double t_halo = median(halo_s);
    const double t_gather = median(gather_s);
    nlohmann::ordered_json report = {
        {"mesh", options.mesh},
        {"ranks", mesh.world().size()},
        {"shape", {channels, g.nlat, g.nlon}},
        {"repetitions", options.repetitions},
        {"t_halo_s", t_halo},
        {"t_gather_s", t_gather},
        {"t_gather_communication_s", median(gather_comm_samples_s)},
        {"speedup", t_gather / t_halo},
        {"halo_bytes_per_rank_max", max_over_ranks(halo_bytes)},
        {"halo_strip_bytes_per_rank_max", max_over_ranks(halo_strip_bytes)},
        {"halo_allreduce_bytes_per_rank", allreduce_bytes},
        {"gather_bytes_per_rank_max", max_over_ranks(gather_bytes)},
        {"gather_bytes_per_rank_min", min_over_ranks(gather_bytes)},
        {"bytes_fraction_max_over_ranks", max_over_ranks(halo_bytes / gather_bytes)},
        {"halo_vs_gather_result_max_relative_difference", max_over_ranks(worst)},
        {"result", halo_result},
        {"samples_halo_s", halo_s},
        {"samples_gather_s", gather_s},
    };
    if (mesh.world().rank() == 0) {
        std::ofstream(options.out) << report.dump(2) << "\n";
    }
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    gridshard::MpiEnvironment mpi(&argc, &argv);
    gridshard::bench::Options options;
    CLI::App app{"gridshard halo path against gather path, gradient_magnitude_percent_diff on a process mesh"};
    app.add_option("--out", options.out, "JSON file to write (world rank 0)");
    app.add_option("--mesh", options.mesh, "process mesh DxHxW; its size must be the number of ranks");
    app.add_option("--repetitions", options.repetitions, "timed repetitions (medians are reported)")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    try {
        return gridshard::bench::run(options);
    } catch (const std::exception& error) {
        std::cerr << "halo_vs_gather_bench: error: " << error.what() << "\n";
        gridshard::MpiEnvironment::abort(1);
    }
}
