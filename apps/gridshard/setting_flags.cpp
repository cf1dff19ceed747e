#include "setting_flags.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace gridshard::cli {

namespace {

// Each library setting the tool sets, beside its flag (apps/gridshard/eval_command.cpp declares the flags).
constexpr std::array<std::pair<std::string_view, std::string_view>, 29> flags{{
    {"variables", "--vars"},
    {"regions", "--region"},
    {"climatology", "--climatology"},
    {"normalization", "--normalize"},
    {"normalize_means", "--normalize MEANS"},
    {"normalize_stds", "--normalize STDS"},
    {"spectrum", "--spectrum"},
    {"near_zero_fraction", "--near-zero-fraction"},
    {"trend", "--trend"},
    {"video", "--video"},
    {"annual", "--annual"},
    {"annual_reference_data", "--annual-reference-data"},
    {"seasonal", "--seasonal"},
    {"enso_index", "--enso-index"},
    {"ipo_index", "--ipo-index"},
    {"enso_coefficient_index", "--enso-coefficient-index"},
    {"histogram", "--histogram"},
    {"quantiles", "--quantiles"},
    {"forward_steps_in_memory", "--forward-steps-in-memory"},
    {"data_split", "--data-split"},
    {"ensemble_dim", "--ensemble-dim"},
    {"ensemble_size", "--ensemble-size"},
    {"allow_time_mismatch", "--allow-time-mismatch"},
    {"nlat", "--nlat"},
    {"nlon", "--nlon"},
    {"ntime", "--ntime"},
    {"initial_conditions", "--initial-conditions"},
    {"members", "--ensemble-size"},
    {"lead_times", "--ntime"},
}};

}  // namespace

std::string with_flags(std::string_view message) {
    std::string out;
    out.reserve(message.size());
    std::size_t at = 0;
    while (at < message.size()) {
        const std::size_t open = message.find('`', at);
        const std::size_t close = open == std::string_view::npos ? open : message.find('`', open + 1);
        if (close == std::string_view::npos) {
            break;
        }
        const std::string_view name = message.substr(open + 1, close - open - 1);
        const auto* flag = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == name; });
        out.append(message.substr(at, open - at));
        if (flag == flags.end()) {
            out.append(message.substr(open, close + 1 - open));
        } else {
            out.append(flag->second);
        }
        at = close + 1;
    }
    out.append(message.substr(at));
    return out;
}

}  // namespace gridshard::cli
