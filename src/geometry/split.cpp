#include "gridshard/geometry/split.hpp"

#include <algorithm>
#include <numeric>

#include "gridshard/core/error.hpp"

namespace gridshard {

std::string_view to_string(SplitRule rule) noexcept {
    return rule == SplitRule::balanced ? "balanced" : "div_up";
}

SplitRule parse_split_rule(std::string_view text) {
    if (text == "balanced") {
        return SplitRule::balanced;
    }
    if (text == "div_up") {
        return SplitRule::div_up;
    }
    throw ArgumentError("split rule must be 'balanced' or 'div_up', got '" + std::string(text) + "'");
}

std::vector<std::int64_t> split_sizes(std::int64_t n, int parts, SplitRule rule) {
    if (parts < 1) {
        throw ArgumentError("split: parts must be >= 1, got parts=" + std::to_string(parts));
    }
    if (n < 0) {
        throw ArgumentError("split: n must be >= 0, got n=" + std::to_string(n));
    }
    const auto p = static_cast<std::int64_t>(parts);
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(parts));
    if (rule == SplitRule::balanced) {
        if (n < p) {
            throw ArgumentError("split balanced: n=" + std::to_string(n) + " points cannot fill parts=" +
                                std::to_string(parts) + " (every part needs at least one point)");
        }
        const std::int64_t quotient = n / p;
        const std::int64_t remainder = n % p;
        for (std::int64_t k = 0; k < p; ++k) {
            sizes[static_cast<std::size_t>(k)] = quotient + (k < remainder ? 1 : 0);
        }
        return sizes;
    }
    // div_up: ceil(n/p) each, the last the rest; fall back to floor(n/p) when the rest would be <= 0.
    std::int64_t chunk = (n + p - 1) / p;
    if (n - chunk * (p - 1) <= 0) {
        chunk = n / p;
    }
    for (std::int64_t k = 0; k + 1 < p; ++k) {
        sizes[static_cast<std::size_t>(k)] = chunk;
    }
    sizes.back() = n - chunk * (p - 1);
    return sizes;
}

Range split_range(std::int64_t n, int parts, SplitRule rule, int index) {
    if (index < 0 || index >= parts) {
        throw ArgumentError("split: index must be in [0, " + std::to_string(parts) +
                            "), got index=" + std::to_string(index));
    }
    const auto sizes = split_sizes(n, parts, rule);
    const auto i = static_cast<std::ptrdiff_t>(index);
    const std::int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + i, std::int64_t{0});
    return {begin, begin + sizes[static_cast<std::size_t>(index)]};
}

Range data_block(std::int64_t n, int parts, int index, bool allow_uneven) {
    if (parts < 1 || n < 0) {
        throw ArgumentError("data_block: need n >= 0 and parts >= 1, got n=" + std::to_string(n) +
                            " parts=" + std::to_string(parts));
    }
    if (n % parts != 0 && !allow_uneven) {
        throw ArgumentError("data-parallel dim of size " + std::to_string(n) +
                            " is not divisible by data=" + std::to_string(parts) + " ranks");
    }
    if (n < parts) {
        // Uneven blocks may leave data ranks without samples; balanced refuses that, so spell it out.
        if (index < 0 || index >= parts) {
            throw ArgumentError("data_block: index must be in [0, " + std::to_string(parts) +
                                "), got index=" + std::to_string(index));
        }
        const std::int64_t begin = std::min<std::int64_t>(index, n);
        return {begin, std::min<std::int64_t>(index + 1, n)};
    }
    return split_range(n, parts, SplitRule::balanced, index);
}

}  // namespace gridshard
