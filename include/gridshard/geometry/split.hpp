#pragma once
/// @file
/// Splitting one dimension into contiguous parts (docs/design.md §2). No MPI calls.
///
/// @code
///   auto sizes = gridshard::split_sizes(721, 4, gridshard::SplitRule::balanced);  // 181,180,180,180
///   gridshard::Range r = gridshard::split_range(721, 4, gridshard::SplitRule::div_up, 3);  // [543, 721)
/// @endcode

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gridshard {

/// How a dimension of n points is split into parts.
enum class SplitRule {
    /// q, r = divmod(n, parts); the first r parts get q+1. n < parts is an error.
    balanced,
    /// Every part gets ceil(n/parts), the last the rest; if the rest would be <= 0, every part gets
    /// floor(n/parts) and the last takes the rest. May leave parts empty (ACE, torch-harmonics 0.8).
    div_up,
};

/// "balanced" or "div_up".
[[nodiscard]] std::string_view to_string(SplitRule rule) noexcept;

/// Parses "balanced" or "div_up"; throws ArgumentError naming the value otherwise.
[[nodiscard]] SplitRule parse_split_rule(std::string_view text);

/// A half-open index range [begin, end).
struct Range {
    std::int64_t begin = 0;
    std::int64_t end = 0;

    [[nodiscard]] constexpr std::int64_t size() const noexcept { return end - begin; }
    [[nodiscard]] constexpr bool empty() const noexcept { return end <= begin; }
    [[nodiscard]] constexpr bool contains(std::int64_t index) const noexcept { return index >= begin && index < end; }
    friend constexpr bool operator==(const Range&, const Range&) = default;
};

/// The sizes of the `parts` parts of a dimension of `n` points under `rule`.
/// Throws ArgumentError for n < 0, parts < 1, or (balanced) n < parts. No MPI calls.
[[nodiscard]] std::vector<std::int64_t> split_sizes(std::int64_t n, int parts, SplitRule rule);

/// The range of part `index` (0-based) of the split of `n` points into `parts` parts. No MPI calls.
[[nodiscard]] Range split_range(std::int64_t n, int parts, SplitRule rule, int index);

/// The block of `n` data-parallel samples held by data rank `index` of `parts`: equal contiguous
/// blocks. When `n` is not divisible by `parts` this is an ArgumentError unless `allow_uneven`,
/// in which case the blocks follow the balanced rule (and may be empty). No MPI calls.
[[nodiscard]] Range data_block(std::int64_t n, int parts, int index, bool allow_uneven = false);

}  // namespace gridshard
