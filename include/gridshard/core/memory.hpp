#pragma once
/// @file
/// How much memory this process may still use, and allocations that fail with a message instead of a bare
/// std::bad_alloc. No MPI calls.

#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/core/error.hpp"

namespace gridshard {

/// The bytes of memory this process may still use: MemAvailable from /proc/meminfo, lowered to what the
/// process's cgroup still allows (cgroup v2 memory.max - memory.current, or the v1 limit - usage) when it
/// has a limit. Nothing when neither can be read. Reads files; no MPI calls.
[[nodiscard]] std::optional<std::uint64_t> available_memory_bytes();

/// "1.50 GiB", "312 KiB", "17 bytes".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

/// `count` value-initialised elements for `what` (e.g. "truth buffer of 't2m'"). A std::bad_alloc or a
/// count beyond the address space becomes SystemError "out of memory allocating WHAT: N bytes", so the
/// message says what was being allocated and how big. No MPI calls.
template <class T>
[[nodiscard]] std::vector<T> allocate_vector(std::size_t count, std::string_view what) {
    const auto fail = [&] {
        throw SystemError("out of memory allocating " + std::string(what) + ": " +
                          format_bytes(static_cast<std::uint64_t>(count) * sizeof(T)) + " (" + std::to_string(count) +
                          " values of " + std::to_string(sizeof(T)) + " bytes)");
    };
    if (count > std::vector<T>().max_size()) {
        fail();
    }
    try {
        return std::vector<T>(count);
    } catch (const std::bad_alloc&) {
        fail();
    }
    return {};  // not reached
}

}  // namespace gridshard
