#include "gridshard/metrics/field.hpp"

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {

std::string_view to_string(Summation summation) noexcept {
    return summation == Summation::reproducible ? "reproducible" : "fast";
}

Summation parse_summation(std::string_view text) {
    if (text == "reproducible") {
        return Summation::reproducible;
    }
    if (text == "fast") {
        return Summation::fast;
    }
    throw ArgumentError("summation must be 'reproducible' or 'fast', got '" + std::string(text) + "'");
}

std::string_view to_string(ValidityPolicy policy) noexcept {
    switch (policy) {
        case ValidityPolicy::propagate:
            return "propagate";
        case ValidityPolicy::skip_nan:
            return "skip_nan";
        case ValidityPolicy::skip_invalid_pairs:
            break;
    }
    return "skip_invalid_pairs";
}

ValidityPolicy parse_validity_policy(std::string_view text) {
    for (ValidityPolicy p : {ValidityPolicy::propagate, ValidityPolicy::skip_nan, ValidityPolicy::skip_invalid_pairs}) {
        if (text == to_string(p)) {
            return p;
        }
    }
    throw ArgumentError("policy must be 'propagate', 'skip_nan' or 'skip_invalid_pairs', got '" + std::string(text) +
                        "'");
}

namespace {

// The decomposition, once every spatial rank has agreed on the grid and the split rule: a rank whose
// arguments differ, or cannot be split, raises on every rank instead of leaving the others waiting.
Decomposition agreed_decomposition(const ProcessMesh& mesh, GridShape grid, SplitRule rule) {
    std::string error;
    try {
        (void)Decomposition(grid, mesh.shape(), rule);
    } catch (const ArgumentError& e) {
        error = e.what();
    }
    detail::agree_or_throw(mesh.spatial(), error, {grid.nlat, grid.nlon, static_cast<std::int64_t>(rule)},
                           "grid (nlat, nlon, split rule)");
    return {grid, mesh.shape(), rule};
}

}  // namespace

ShardedGrid::ShardedGrid(const ProcessMesh& mesh, GridShape grid, SplitRule rule)
    : mesh_(mesh), decomposition_(agreed_decomposition(mesh, grid, rule)), box_(decomposition_.box(mesh.coords())) {
    // Every rank sees the same decomposition, so every rank takes the same branch here.
    try {
        validate_halo(decomposition_, 1, {.lat = false, .lon = true});
    } catch (const ArgumentError& error) {
        halo_problem_ = error.what();
        return;
    }
    open_halo_.emplace(mesh, decomposition_, 1, Periodicity{.lat = false, .lon = false});
    periodic_halo_.emplace(mesh, decomposition_, 1, Periodicity{.lat = false, .lon = true});
}

const HaloExchange& ShardedGrid::halo_plan(bool periodic_lon) const {
    if (!halo_problem_.empty()) {
        throw ArgumentError(halo_problem_);
    }
    return periodic_lon ? *periodic_halo_ : *open_halo_;
}

}  // namespace gridshard
