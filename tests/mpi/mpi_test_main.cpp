// The GoogleTest main of every MPI test binary.
// - MPI is initialised once; errors come back as codes and become gridshard::MpiError.
// - Only world rank 0 prints the usual output; other ranks print only their failures, tagged by rank.
// - After each test the ranks combine their results, so a failure on any rank fails the test on all,
//   and every rank exits with the same status.
// - A watchdog ends a run in which a test does not finish on every rank within the deadline
//   (GRIDSHARD_TEST_DEADLINE_S, default 60 s): a deadlock fails fast instead of hanging CI.

#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "gridshard/comm/environment.hpp"
#include "mpi_test_support.hpp"

namespace gridshard::mpitest {
namespace {

MeshShape g_mesh_shape;
int g_world_rank = 0;

class Watchdog {
  public:
    explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
    ~Watchdog() {
        stop_ = true;
        thread_.join();
    }
    void arm(std::string name) {
        name_ = std::move(name);
        deadline_ = std::chrono::steady_clock::now() + limit_;
        armed_ = true;
    }
    void disarm() { armed_ = false; }

  private:
    void watch() {
        while (!stop_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (armed_ && std::chrono::steady_clock::now() > deadline_.load()) {
                std::fprintf(stderr, "[rank %d] DEADLOCK: test %s did not finish on every rank within %lld s\n",
                             g_world_rank, name_.c_str(), static_cast<long long>(limit_.count()));
                std::fflush(stderr);
                std::_Exit(3);  // mpirun then ends the other ranks
            }
        }
    }

    std::chrono::seconds limit_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> armed_{false};
    std::atomic<std::chrono::steady_clock::time_point> deadline_{};
    std::string name_;
    std::thread thread_;
};

// Combines each test's result over all ranks, under the watchdog.
class CombineResults : public ::testing::EmptyTestEventListener {
  public:
    explicit CombineResults(Watchdog& watchdog) : watchdog_(watchdog) {}

    void OnTestStart(const ::testing::TestInfo& info) override {
        watchdog_.arm(std::string(info.test_suite_name()) + "." + info.name());
    }

    void OnTestEnd(const ::testing::TestInfo& info) override {
        int failed_here = info.result()->Failed() ? 1 : 0;
        int failed_ranks = 0;
        MPI_Allreduce(&failed_here, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        watchdog_.disarm();
        if (failed_ranks > 0 && !failed_here) {
            // Record the failure here too, so every rank's result and exit status agree.
            ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " failed on " << failed_ranks
                          << " other rank(s)";
        }
    }

  private:
    Watchdog& watchdog_;
};

// Prints only failed assertions, tagged with the rank; used on ranks other than 0.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  public:
    void OnTestPartResult(const ::testing::TestPartResult& result) override {
        if (result.failed()) {
            std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", g_world_rank,
                         result.file_name() ? result.file_name() : "?", result.line_number(), result.message());
        }
    }
};

std::chrono::seconds deadline_from_environment() {
    const char* text = std::getenv("GRIDSHARD_TEST_DEADLINE_S");
    const long seconds = text ? std::strtol(text, nullptr, 10) : 60;
    return std::chrono::seconds(seconds > 0 ? seconds : 60);
}

}  // namespace

const MeshShape& mesh_shape() {
    return g_mesh_shape;
}

std::vector<GridShape> test_grids(const MeshShape& mesh, SplitRule rule) {
    const std::int64_t h = mesh.lat;
    const std::int64_t w = mesh.lon;
    const GridShape candidates[] = {
        {h, w},                  // one cell per shard
        {h + 1, w + 2},          // uneven by one or two
        {2 * h + 1, 3 * w + 2},  // sizes that do not divide
        {13, 7},
        {3, 5},  // smaller than some meshes: div_up leaves shards empty, balanced refuses
        {2, 2},
    };
    std::vector<GridShape> grids;
    for (const GridShape& g : candidates) {
        if (rule == SplitRule::balanced && (g.nlat < h || g.nlon < w)) {
            continue;
        }
        grids.push_back(g);
    }
    return grids;
}

}  // namespace gridshard::mpitest

int main(int argc, char** argv) {
    gridshard::MpiEnvironment environment(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &gridshard::mpitest::g_world_rank);
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);

    ::testing::InitGoogleTest(&argc, argv);
    gridshard::mpitest::g_mesh_shape = {1, 1, world_size};
    for (int k = 1; k < argc; ++k) {
        const std::string_view arg = argv[k];
        if (arg.starts_with("--mesh=")) {
            gridshard::mpitest::g_mesh_shape = gridshard::parse_mesh_shape(arg.substr(7));
        }
    }
    if (gridshard::mpitest::g_world_rank == 0) {
        std::printf("MPI test run: %d ranks, mesh %s\n", world_size,
                    gridshard::to_string(gridshard::mpitest::g_mesh_shape).c_str());
    }

    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (gridshard::mpitest::g_world_rank != 0) {
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new gridshard::mpitest::RankFailurePrinter);
    }
    gridshard::mpitest::Watchdog watchdog(gridshard::mpitest::deadline_from_environment());
    listeners.Append(new gridshard::mpitest::CombineResults(watchdog));

    const int local_status = RUN_ALL_TESTS();
    int status = 0;
    MPI_Allreduce(&local_status, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
}
