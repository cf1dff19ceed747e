#include "gridshard/geometry/work_split.hpp"

#include <algorithm>
#include <string>

#include "gridshard/core/error.hpp"

namespace gridshard {

std::string_view to_string(DataSplit split) noexcept {
    switch (split) {
        case DataSplit::initial_conditions:
            return "initial-conditions";
        case DataSplit::lead_times:
            return "lead-times";
        case DataSplit::members:
            return "members";
    }
    return "initial-conditions";
}

DataSplit parse_data_split(std::string_view text, std::string_view option) {
    for (const DataSplit split : {DataSplit::initial_conditions, DataSplit::lead_times, DataSplit::members}) {
        if (text == to_string(split)) {
            return split;
        }
    }
    throw ArgumentError(std::string(option) + ": '" + std::string(text) +
                        "' is not a data split (initial-conditions, lead-times or members)");
}

WorkShare share_work(std::optional<DataSplit> requested, const ForecastExtent& extent, int data_ranks, int data_rank) {
    const DataSplit split = requested                                               ? *requested
                            : extent.initial_conditions >= data_ranks               ? DataSplit::initial_conditions
                            : extent.lead_times >= data_ranks || extent.members < 2 ? DataSplit::lead_times
                                                                                    : DataSplit::members;
    if (split == DataSplit::members && extent.members < 2) {
        throw ArgumentError(setting_name("data_split") + " members: the forecast has " +
                            std::to_string(extent.members) + " member per initial condition");
    }
    WorkShare share{{0, extent.initial_conditions}, {0, extent.lead_times}, {0, extent.members}, split};
    switch (split) {
        case DataSplit::initial_conditions:
            share.initial_conditions = data_block(extent.initial_conditions, data_ranks, data_rank, true);
            break;
        case DataSplit::lead_times:
            share.leads = data_block(extent.lead_times, data_ranks, data_rank, true);
            break;
        case DataSplit::members:
            share.members = data_block(extent.members, data_ranks, data_rank, true);
            break;
    }
    return share;
}

std::int64_t read_rounds(DataSplit split, const ForecastExtent& extent, int data_ranks) {
    std::int64_t rounds = 0;
    for (int d = 0; d < data_ranks; ++d) {
        rounds = std::max(rounds, share_work(split, extent, data_ranks, d).pairs());
    }
    return rounds;
}

}  // namespace gridshard
