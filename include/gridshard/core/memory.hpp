#pragma once
/// @file
/// How much memory this process may still use, and allocations that fail with a message instead of a bare
/// std::bad_alloc. No MPI calls.

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gridshard/core/error.hpp"

namespace gridshard {

/// The bytes of memory this process may still use: MemAvailable from /proc/meminfo, lowered to what the
/// process's cgroup still allows (cgroup v2 memory.max - memory.current, or the v1 limit - usage) when it
/// has a limit. Nothing when neither can be read. Reads files; no MPI calls.
[[nodiscard]] std::optional<std::uint64_t> available_memory_bytes();

/// "1.50 GiB", "312 KiB", "17 bytes".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

namespace detail {
/// Memory of `bytes` zero bytes, untouched: anonymous pages of its own where large, else calloc's. Null when the
/// system has none (or `bytes` is 0); freed by its owner. No MPI calls.
struct ZeroedMemoryRelease {
    std::size_t bytes;
    void operator()(void* p) const noexcept;
};
using ZeroedMemory = std::unique_ptr<void, ZeroedMemoryRelease>;
[[nodiscard]] ZeroedMemory zeroed_memory(std::size_t bytes);
}  // namespace detail

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

/// `count` zero values of a trivial type whose memory is not touched until written: the pages of a large array
/// (anonymous memory of its own) come from the system as they are first written, so parts never written cost neither
/// time nor resident memory (sums whose error terms stay 0, for example). Copies copy the values. No MPI calls.
template <class T>
class ZeroedArray {
    static_assert(std::is_trivially_copyable_v<T>, "ZeroedArray holds trivially copyable values");

  public:
    ZeroedArray() = default;
    /// Throws SystemError as allocate_vector does when the memory cannot be had.
    ZeroedArray(std::size_t count, std::string_view what) : size_(count) {
        if (count > std::vector<T>().max_size()) {
            throw_out_of_memory(count, what);
        }
        values_ = detail::zeroed_memory(count * sizeof(T));
        if (count != 0 && values_ == nullptr) {
            throw_out_of_memory(count, what);
        }
    }
    ZeroedArray(const ZeroedArray& other) : ZeroedArray(other.size_, "a copy of an array") {
        if (size_ != 0) {
            std::memcpy(values_.get(), other.values_.get(), size_ * sizeof(T));
        }
    }
    ZeroedArray& operator=(const ZeroedArray& other) {
        if (this != &other) {
            *this = ZeroedArray(other);
        }
        return *this;
    }
    ZeroedArray(ZeroedArray&& other) noexcept
        : values_(std::move(other.values_)), size_(std::exchange(other.size_, 0)) {}
    ZeroedArray& operator=(ZeroedArray&& other) noexcept {
        values_ = std::move(other.values_);
        size_ = std::exchange(other.size_, 0);
        return *this;
    }
    ~ZeroedArray() = default;

    [[nodiscard]] T* data() noexcept { return static_cast<T*>(values_.get()); }
    [[nodiscard]] const T* data() const noexcept { return static_cast<const T*>(values_.get()); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] T& operator[](std::size_t k) noexcept { return data()[k]; }
    [[nodiscard]] const T& operator[](std::size_t k) const noexcept { return data()[k]; }

  private:
    [[noreturn]] static void throw_out_of_memory(std::size_t count, std::string_view what) {
        throw SystemError("out of memory allocating " + std::string(what) + ": " +
                          format_bytes(static_cast<std::uint64_t>(count) * sizeof(T)) + " (" + std::to_string(count) +
                          " values of " + std::to_string(sizeof(T)) + " bytes)");
    }

    detail::ZeroedMemory values_;
    std::size_t size_ = 0;
};

}  // namespace gridshard
