// The library's side of the CLI's bit-identity test: reads one variable of a truth and a prediction file
// with the io layer and scores every step with the library's masked metrics under a policy (by default the
// eval's, skip_invalid_pairs) and the eval's default weights (cos_lat), on one process. Prints one JSON
// object, {"bias": [...], "rmse": [...], "mean_truth": [...]}, each number as C's %a (exact), one per step.
//
// Usage: library_scores TRUTH.nc PREDICTION.nc VARIABLE [POLICY]

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gridshard/comm/environment.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace {

void print_series(const char* name, const std::vector<double>& values, bool last) {
    std::printf("\"%s\": [", name);
    for (std::size_t k = 0; k < values.size(); ++k) {
        std::printf("%s\"%a\"", k == 0 ? "" : ", ", values[k]);
    }
    std::printf("]%s", last ? "" : ", ");
}

int run(const std::string& truth_path, const std::string& prediction_path, const std::string& name,
        gridshard::ValidityPolicy policy) {
    using namespace gridshard;
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const io::NetcdfReader truth_file(truth_path);
    const io::NetcdfReader prediction_file(prediction_path);
    const GridShape shape = truth_file.grid().shape();
    const ShardedGrid grid(alone, shape);
    const Box& box = grid.box();
    const AreaWeights weights = cos_lat_weights(truth_file.grid().lat_deg, shape.nlon, box.lat);
    io::VariableReader truth_reader = truth_file.reader(name, box);
    io::VariableReader prediction_reader = prediction_file.reader(name, box);
    const auto channels = static_cast<std::int64_t>(truth_reader.values_per_step()) / box.area();
    std::vector<float> t(truth_reader.values_per_step());
    std::vector<float> p(prediction_reader.values_per_step());
    std::vector<double> bias_values;
    std::vector<double> rmse_values;
    std::vector<double> mean_values;
    for (std::int64_t step = 0; step < truth_file.grid().ntime; ++step) {
        truth_reader.read_step(step, t);
        prediction_reader.read_step(step, p);
        const FieldShard<float> ts{t, channels};
        const FieldShard<float> ps{p, channels};
        bias_values.push_back(masked_bias<float>(grid, ts, ps, weights.view(), policy)[0]);
        rmse_values.push_back(masked_rmse<float>(grid, ts, ps, weights.view(), policy)[0]);
        mean_values.push_back(masked_weighted_mean<float>(grid, ts, weights.view(), policy)[0]);
    }
    std::printf("{");
    print_series("bias", bias_values, false);
    print_series("rmse", rmse_values, false);
    print_series("mean_truth", mean_values, true);
    std::printf("}\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    gridshard::MpiEnvironment mpi(&argc, &argv);
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: library_scores TRUTH.nc PREDICTION.nc VARIABLE [POLICY]\n");
        return 2;
    }
    try {
        const auto policy =
            argc == 5 ? gridshard::parse_validity_policy(argv[4]) : gridshard::ValidityPolicy::skip_invalid_pairs;
        return run(argv[1], argv[2], argv[3], policy);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "library_scores: %s\n", error.what());
        return 1;
    }
}
