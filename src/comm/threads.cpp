#include "gridshard/comm/threads.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gridshard {
namespace {

std::atomic<std::int64_t> fewest_points_per_thread{std::int64_t{1} << 15};

}  // namespace

void set_min_points_per_thread(std::int64_t points) noexcept {
    fewest_points_per_thread.store(std::max<std::int64_t>(1, points), std::memory_order_relaxed);
}

std::int64_t min_points_per_thread() noexcept {
    return fewest_points_per_thread.load(std::memory_order_relaxed);
}

int use_cores_of_this_rank(const Communicator& comm) {
    const Communicator node = comm.split_shared_memory();
#if defined(_OPENMP)
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
        cpu_set_t mask;
        CPU_ZERO(&mask);
        const int allowed = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
        const int share = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / node.size();
        omp_set_num_threads(std::max(1, std::min(allowed, share)));
    }
    return omp_get_max_threads();
#else
    return 1;
#endif
}

}  // namespace gridshard
