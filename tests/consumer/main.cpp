// Uses the installed headers and library: the decomposition of the 0.25-degree grid. No MPI calls.
#include <gridshard/geometry/decomposition.hpp>

#include <cstdio>

int main() {
    const gridshard::Decomposition d({721, 1440}, gridshard::parse_mesh_shape("1x2x2"));
    const gridshard::Box b = d.box({0, 1, 1});
    std::printf("lat [%lld, %lld) lon [%lld, %lld)\n", static_cast<long long>(b.lat.begin),
                static_cast<long long>(b.lat.end), static_cast<long long>(b.lon.begin),
                static_cast<long long>(b.lon.end));
    return (b.lat.begin == 361 && b.lon.end == 1440) ? 0 : 1;
}
