// Uses the installed headers and library: the decomposition of the 0.25-degree grid, and the netCDF
// layer (so the installed package must bring netCDF's link line along). No MPI calls.
#include <gridshard/gridshard.hpp>  // every public header must compile from the installed tree

#include <cstdio>

int main() {
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
    return (b.lat.begin == 361 && b.lon.end == 1440 && netcdf_error) ? 0 : 1;
}
