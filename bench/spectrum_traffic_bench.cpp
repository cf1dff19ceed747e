// The bytes a spherical power spectrum moves, counted where they move: this program defines the MPI collectives the
// library calls (MPI's profiling interface: each counts, then calls PMPI_), so the library, linked statically, sends
// through them. Each rank counts what it receives from other ranks (all-to-alls, all-gathers, point-to-point) and
// the payload of its all-reduces; the figure is the busiest rank's bytes over what an all-gather of the fields would
// bring each rank ((P - 1) / P of every field). Under mpirun:
//
//   mpirun -n 16 spectrum_traffic_bench --mesh 1x4x4 --channels 16 [--nlat 721 --nlon 1440] [--json OUT]

#include <mpi.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_support.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/metrics/spectrum.hpp"

namespace {

std::int64_t received_bytes = 0;  // from other ranks, by this rank
bool counting = false;

std::int64_t type_bytes(MPI_Datatype type) {
    int size = 0;
    PMPI_Type_size(type, &size);
    return size;
}

int self_of(MPI_Comm comm) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

// Counts what a collective with `receive_counts` per rank of `comm` brings this rank from the others.
void count_received(const int receive_counts[], MPI_Datatype type, MPI_Comm comm) {
    if (!counting) {
        return;
    }
    int size = 0;
    PMPI_Comm_size(comm, &size);
    const int me = self_of(comm);
    for (int r = 0; r < size; ++r) {
        received_bytes += r == me ? 0 : receive_counts[r] * type_bytes(type);
    }
}

}  // namespace

extern "C" {

int MPI_Alltoallv(const void* send, const int send_counts[], const int send_displacements[], MPI_Datatype send_type,
                  void* receive, const int receive_counts[], const int receive_displacements[],
                  MPI_Datatype receive_type, MPI_Comm comm) {
    count_received(receive_counts, receive_type, comm);
    return PMPI_Alltoallv(send, send_counts, send_displacements, send_type, receive, receive_counts,
                          receive_displacements, receive_type, comm);
}

int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* receive, const int receive_counts[],
                   const int displacements[], MPI_Datatype receive_type, MPI_Comm comm) {
    count_received(receive_counts, receive_type, comm);
    return PMPI_Allgatherv(send, send_count, send_type, receive, receive_counts, displacements, receive_type, comm);
}

int MPI_Allreduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    int size = 0;
    PMPI_Comm_size(comm, &size);
    if (counting && size > 1) {
        received_bytes += count * type_bytes(type);  // the payload, once (a ring moves about twice that)
    }
    return PMPI_Allreduce(send, receive, count, type, op, comm);
}

int MPI_Irecv(void* buffer, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* request) {
    if (counting && source != self_of(comm)) {
        received_bytes += count * type_bytes(type);
    }
    return PMPI_Irecv(buffer, count, type, source, tag, comm, request);
}

}  // extern "C"

int main(int argc, char** argv) {
    CLI::App app("Bytes a spherical power spectrum moves per rank, against an all-gather of the fields");
    std::string mesh_text = "1x2x2";
    std::int64_t channels = 1;
    std::int64_t nlat = 721;
    std::int64_t nlon = 1440;
    std::string json_path;
    app.add_option("--mesh", mesh_text);
    app.add_option("--channels", channels);
    app.add_option("--nlat", nlat);
    app.add_option("--nlon", nlon);
    app.add_option("--json", json_path);
    CLI11_PARSE(app, argc, argv);
    using namespace gridshard;
    MpiEnvironment environment(&argc, &argv);
    const ProcessMesh mesh(Communicator::world(), parse_mesh_shape(mesh_text));
    const GridShape shape{nlat, nlon};
    const ShardedGrid grid(mesh, shape);
    const std::vector<float> shard = bench::make_fields(shape, grid.box(), channels).truth;
    counting = true;
    const std::vector<double> power = spherical_power_spectrum(grid, FieldShard<float>{shard, channels});
    counting = false;
    const int ranks = mesh.spatial().size();
    std::int64_t busiest = received_bytes;
    PMPI_Allreduce(MPI_IN_PLACE, &busiest, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    const double allgather = static_cast<double>(ranks - 1) / ranks * static_cast<double>(channels * nlat * nlon) * 4.0;
    if (mesh.world().rank() == 0) {
        const nlohmann::json out = {{"mesh", mesh_text},
                                    {"channels", channels},
                                    {"grid", {nlat, nlon}},
                                    {"busiest_rank_bytes", busiest},
                                    {"allgather_bytes_per_rank", allgather},
                                    {"fraction_of_allgather", static_cast<double>(busiest) / allgather},
                                    {"degrees", static_cast<std::int64_t>(power.size()) / channels}};
        std::cout << out.dump() << "\n";
        if (!json_path.empty()) {
            std::ofstream(json_path) << out.dump() << "\n";
        }
    }
    return 0;
}
