// The alpha-beta figures of the communication model (docs/scaling.md), measured with MPI on this machine:
// ping-pong latency (8 bytes) and bandwidth (4 MiB) between world ranks 0 and 1, and the time of an
// allreduce over the world of the exact sums one fused evaluation of 20 channels sends (181 ExactSums,
// 207 KB), and of one 8-byte allreduce. Medians over repetitions; rank 0 writes JSON.

#include <mpi.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_support.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard::bench {
namespace {

double ping_pong(std::vector<char>& buffer, int rank, int repetitions) {
    const int count = static_cast<int>(buffer.size());
    std::vector<double> samples;
    for (int r = 0; r < repetitions; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        constexpr int rounds = 20;
        for (int k = 0; k < rounds; ++k) {
            if (rank == 0) {
                MPI_Send(buffer.data(), count, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buffer.data(), count, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buffer.data(), count, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buffer.data(), count, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
        }
        samples.push_back((MPI_Wtime() - t0) / (2.0 * rounds));  // one way
    }
    return median(samples);
}

double allreduce(std::int64_t words, int repetitions) {
    std::vector<std::int64_t> in(static_cast<std::size_t>(words), 1);
    std::vector<std::int64_t> out(in.size());
    std::vector<double> samples;
    for (int r = 0; r < repetitions; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        constexpr int rounds = 20;
        for (int k = 0; k < rounds; ++k) {
            MPI_Allreduce(in.data(), out.data(), static_cast<int>(words), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        }
        double elapsed = (MPI_Wtime() - t0) / rounds;
        MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        samples.push_back(elapsed);
    }
    return median(samples);
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    gridshard::MpiEnvironment mpi(&argc, &argv);
    std::string out = "comm_model.json";
    int repetitions = 15;
    CLI::App app{"gridshard communication-model figures: ping-pong latency and bandwidth, allreduce times"};
    app.add_option("--out", out, "JSON file to write (rank 0)");
    app.add_option("--repetitions", repetitions, "timed repetitions (medians)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        std::cerr << "comm_model_bench: needs at least 2 ranks\n";
        return 1;
    }
    using gridshard::bench::allreduce;
    using gridshard::bench::ping_pong;
    std::vector<char> small(8);
    std::vector<char> large(4 << 20);
    (void)ping_pong(large, rank, 2);  // warm-up
    const double latency = ping_pong(small, rank, repetitions);
    const double large_time = ping_pong(large, rank, repetitions);
    const std::int64_t evaluation_words = (9 * 20 + 1) * static_cast<std::int64_t>(gridshard::ExactSum::wire_size);
    const double t_allreduce_small = allreduce(1, repetitions);
    const double t_allreduce_evaluation = allreduce(evaluation_words, repetitions);
    if (rank == 0) {
        const nlohmann::ordered_json report = {
            {"ranks", size},
            {"latency_s", latency},
            {"bandwidth_bytes_per_s", static_cast<double>(large.size()) / (large_time - latency)},
            {"t_allreduce_8_bytes_s", t_allreduce_small},
            {"evaluation_allreduce_bytes", evaluation_words * 8},
            {"t_allreduce_evaluation_s", t_allreduce_evaluation},
        };
        std::ofstream(out) << report.dump(2) << "\n";
    }
    return 0;
}
