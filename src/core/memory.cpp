#include "gridshard/core/memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gridshard {
namespace {

// The first number in a file such as /sys/fs/cgroup/memory.max; nothing for "max" or a missing file.
std::optional<std::uint64_t> read_number(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") {
        return std::nullopt;
    }
    try {
        std::size_t used = 0;
        const unsigned long long value = std::stoull(text, &used);
        return used == text.size() ? std::optional<std::uint64_t>(value) : std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::optional<std::uint64_t> meminfo_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib) {
        std::getline(in, unit);
        if (key == "MemAvailable:") {
            return kib * 1024;
        }
    }
    return std::nullopt;
}

// The cgroup this process belongs to, from /proc/self/cgroup ("0::/path" for v2, "N:memory:/path" for v1).
std::optional<std::uint64_t> cgroup_available() {
    std::ifstream in("/proc/self/cgroup");
    std::optional<std::uint64_t> best;
    for (std::string line; std::getline(in, line);) {
        const auto first = line.find(':');
        const auto second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) {
            continue;
        }
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::string path = line.substr(second + 1);
        std::optional<std::uint64_t> limit;
        std::optional<std::uint64_t> usage;
        if (controllers.empty()) {  // v2: the limit of this cgroup (a parent's may be lower; the nearest counts)
            limit = read_number("/sys/fs/cgroup" + path + "/memory.max");
            usage = read_number("/sys/fs/cgroup" + path + "/memory.current");
            if (!limit) {
                limit = read_number("/sys/fs/cgroup/memory.max");
                usage = read_number("/sys/fs/cgroup/memory.current");
            }
        } else if (controllers.find("memory") != std::string::npos) {
            limit = read_number("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
            usage = read_number("/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes");
            if (!limit) {
                limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
                usage = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
            }
        }
        if (limit && *limit < (std::uint64_t{1} << 62)) {  // v1 reports "no limit" as a huge number
            const std::uint64_t free = *limit > usage.value_or(0) ? *limit - usage.value_or(0) : 0;
            best = best ? std::min(*best, free) : free;
        }
    }
    return best;
}

}  // namespace

std::optional<std::uint64_t> available_memory_bytes() {
    const auto system = meminfo_available();
    const auto group = cgroup_available();
    if (system && group) {
        return std::min(*system, *group);
    }
    return system ? system : group;
}

std::string format_bytes(std::uint64_t bytes) {
    if (bytes < 1024) {
        return std::to_string(bytes) + " bytes";
    }
    const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = static_cast<double>(bytes) / 1024.0;
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text,
                  value < 10.0    ? "%.2f %s"
                  : value < 100.0 ? "%.1f %s"
                                  : "%.0f %s",
                  value, units[unit]);
    return text;
}

namespace detail {
namespace {

// From this size on, memory of its own: a heap chunk that was freed and is reused would have to be cleared.
constexpr std::size_t own_mapping_bytes = std::size_t{1} << 16;

}  // namespace

void ZeroedMemoryRelease::operator()(void* p) const noexcept {
    if (bytes >= own_mapping_bytes) {
        munmap(p, bytes);
    } else {
        std::free(p);
    }
}

ZeroedMemory zeroed_memory(std::size_t bytes) {
    if (bytes == 0) {
        return ZeroedMemory(nullptr, ZeroedMemoryRelease{0});
    }
    if (bytes < own_mapping_bytes) {
        return ZeroedMemory(std::calloc(1, bytes), ZeroedMemoryRelease{bytes});
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return ZeroedMemory(p == MAP_FAILED ? nullptr : p, ZeroedMemoryRelease{bytes});
}

}  // namespace detail
}  // namespace gridshard
