// Uses the installed headers and library: the decomposition of the 0.25-degree grid, the netCDF layer (so the
// installed package must bring netCDF's link line along), and the evaluation layer: one process scores the built-in
// forecast through evaluate() and reads a score by its registry entry. MPI starts as a singleton.
#include <gridshard/gridshard.hpp>  // every public header must compile from the installed tree

#include <cmath>
#include <cstdio>

int main(int argc, char** argv) {
    const gridshard::MpiEnvironment mpi(&argc, &argv);
    const gridshard::Decomposition d({721, 1440}, gridshard::parse_mesh_shape("1x2x2"));
    const gridshard::Box b = d.box({0, 1, 1});
    std::printf("lat [%lld, %lld) lon [%lld, %lld)\n", static_cast<long long>(b.lat.begin),
                static_cast<long long>(b.lat.end), static_cast<long long>(b.lon.begin),
                static_cast<long long>(b.lon.end));
    bool netcdf_error = false;
    try {
        const gridshard::io::NetcdfReader reader("/nonexistent/gridshard_consumer.nc");
    } catch (const gridshard::io::NetcdfError& e) {
        std::printf("%s\n", e.what());
        netcdf_error = true;
    }

    gridshard::EvaluationPlan plan;
    plan.scoring.report = gridshard::ReportKind::forecast;
    const auto source = gridshard::io::make_builtin_forecast(19, 36, 2, 3, 3);
    const gridshard::EvaluationResult result = gridshard::evaluate(plan, *source, gridshard::Communicator::world());
    double crps = NAN;
    for (const gridshard::ScoreValue& v : result.channels.front().regions.front().time_means) {
        if (v.score->key == "crps") {
            crps = v.value;
        }
    }
    std::printf("%s crps %.6g over %zu channels\n", result.channels.front().name.c_str(), crps, result.channels.size());
    return (b.lat.begin == 361 && b.lon.end == 1440 && netcdf_error && std::isfinite(crps) && crps > 0) ? 0 : 1;
}
