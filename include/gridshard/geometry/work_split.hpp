#pragma once
/// @file
/// How the data ranks of a mesh share a forecast's work: by initial condition, by lead time or by member, each
/// data rank a contiguous block (data_block, uneven allowed). Pure geometry: no MPI calls.
///
/// @code
///   const gridshard::ForecastExtent extent{.initial_conditions = 4, .members = 8, .lead_times = 9};
///   const gridshard::WorkShare mine = gridshard::share_work(std::nullopt, extent, 2, 1);  // ICs 2 and 3
///   const std::int64_t rounds = gridshard::read_rounds(mine.split, extent, 2);          // 2 for every rank
/// @endcode

#include <cstdint>
#include <optional>
#include <string_view>

#include "gridshard/geometry/split.hpp"

namespace gridshard {

/// What the data ranks split.
enum class DataSplit { initial_conditions, lead_times, members };

/// "initial-conditions", "lead-times" or "members".
[[nodiscard]] std::string_view to_string(DataSplit split) noexcept;

/// The DataSplit of `text` (as to_string writes it); throws ArgumentError naming `option` and the value.
[[nodiscard]] DataSplit parse_data_split(std::string_view text, std::string_view option);

/// A forecast's sizes: initial conditions, members per initial condition, lead times.
struct ForecastExtent {
    std::int64_t initial_conditions = 1;
    std::int64_t members = 1;
    std::int64_t lead_times = 1;
};

/// The (initial condition, lead time, member) blocks one data rank scores: every pair of `initial_conditions`
/// x `leads`, with the members of `members`.
struct WorkShare {
    Range initial_conditions;
    Range leads;
    Range members;
    DataSplit split = DataSplit::initial_conditions;
    /// The (initial condition, lead time) pairs of this share.
    [[nodiscard]] std::int64_t pairs() const noexcept { return initial_conditions.size() * leads.size(); }
};

/// The share of data rank `data_rank` of `data_ranks`: as `requested`, or by default by initial condition when
/// there are at least as many as data ranks, else by lead time when there are (or the forecast has one member),
/// else by member. Throws ArgumentError for a split by members of a forecast of one member.
[[nodiscard]] WorkShare share_work(std::optional<DataSplit> requested, const ForecastExtent& extent, int data_ranks,
                                   int data_rank);

/// The most (initial condition, lead time) pairs of any data rank under `split`: the rounds of a run whose reads
/// are collective over the world, in which every rank reads once a round (nothing once its own pairs are done).
[[nodiscard]] std::int64_t read_rounds(DataSplit split, const ForecastExtent& extent, int data_ranks);

}  // namespace gridshard
