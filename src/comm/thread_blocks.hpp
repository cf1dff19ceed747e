#pragma once
// Threads within a rank: the metrics share their (channel, row) work, and the io layer its decoding, between OpenMP
// threads when the library is built with OpenMP (GRIDSHARD_OPENMP), and run serially otherwise. Internal; no MPI calls.

#include <algorithm>
#include <cstdint>

#include "gridshard/comm/threads.hpp"

#if defined(_OPENMP)
#include <omp.h>
#define GRIDSHARD_PRAGMA(text) _Pragma(#text)
#else
#define GRIDSHARD_PRAGMA(text)
#endif

namespace gridshard::detail {

/// The threads to use for `items` independent pieces of work of `points_per_item` points each: OpenMP's
/// current default (OMP_NUM_THREADS, or what use_cores_of_this_rank set), never more than the items nor
/// than one per min_points_per_thread() points (comm/threads.hpp); 1 without OpenMP. Results are the same
/// bits for any count.
[[nodiscard]] inline int threads_for(std::int64_t items, std::int64_t points_per_item) noexcept {
#if defined(_OPENMP)
    const std::int64_t by_work = std::max<std::int64_t>(1, items * points_per_item / min_points_per_thread());
    return static_cast<int>(std::clamp<std::int64_t>(std::min(items, by_work), 1, omp_get_max_threads()));
#else
    (void)items;
    (void)points_per_item;
    return 1;
#endif
}

/// This thread's index within the current parallel region (0 outside one, or without OpenMP).
[[nodiscard]] inline int thread_index() noexcept {
#if defined(_OPENMP)
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/// The points of one block of for_each_block (the last may hold fewer); every block starts on a multiple of it.
constexpr std::int64_t thread_block_points = 65536;

/// Calls `f(begin, count)` for the blocks of at most thread_block_points points that cover points [0, n), the blocks
/// shared between threads (threads_for, each block `thread_block_points x work_per_point` points of work). Each point's
/// result must not depend on its block's neighbours, so that the bits are the same for any thread count.
template <class F>
void for_each_block(std::int64_t n, std::int64_t work_per_point, F f) {
    constexpr std::int64_t block = thread_block_points;
    const std::int64_t blocks = (n + block - 1) / block;
    GRIDSHARD_PRAGMA(omp parallel for schedule(static) num_threads(threads_for(blocks, block * work_per_point)))
    for (std::int64_t b = 0; b < blocks; ++b) {
        f(b * block, std::min(block, n - b * block));
    }
}

}  // namespace gridshard::detail
