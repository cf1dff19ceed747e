#include "gridshard/geometry/halo_geometry.hpp"

#include <array>
#include <string>
#include <utility>

#include "../core/names.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

constexpr detail::NameTable<PoleRule, 3> pole_rule_names{{
    {"zero", PoleRule::zero},
    {"replicate", PoleRule::replicate},
    {"across_pole", PoleRule::across_pole},
}};

// The mesh row (or column) whose non-empty range holds global index `index`, given the ranges of `count` parts.
template <class RangeOf>
int part_holding(std::int64_t index, int count, RangeOf range_of) {
    for (int part = 0; part < count; ++part) {
        const Range r = range_of(part);
        if (index >= r.begin && index < r.end) {
            return part;
        }
    }
    return -1;  // unreachable for an index of the grid: the parts cover it
}

}  // namespace

void validate_halo(const Decomposition& decomposition, int width, const Periodicity& periodicity) {
    if (width < 1) {
        throw ArgumentError("halo width must be >= 1, got width=" + std::to_string(width));
    }
    const MeshShape& mesh = decomposition.mesh();
    if (decomposition.has_empty_box()) {
        throw ArgumentError("halo exchange needs every rank to own grid points, but split " +
                            std::string(to_string(decomposition.rule())) +
                            " of nlat=" + std::to_string(decomposition.grid().nlat) +
                            " nlon=" + std::to_string(decomposition.grid().nlon) + " over mesh " + to_string(mesh) +
                            " leaves some ranks empty");
    }
    const bool lat_exchanges = mesh.lat > 1 || periodicity.lat;
    const bool lon_exchanges = mesh.lon > 1 || periodicity.lon;
    for (int i = 0; i < mesh.lat && lat_exchanges; ++i) {
        const Range r = decomposition.lat_range(i);
        if (r.size() < width) {
            throw ArgumentError("halo width=" + std::to_string(width) + " exceeds the " + std::to_string(r.size()) +
                                " latitude rows of mesh row " + std::to_string(i));
        }
    }
    for (int j = 0; j < mesh.lon && lon_exchanges; ++j) {
        const Range r = decomposition.lon_range(j);
        if (r.size() < width) {
            throw ArgumentError("halo width=" + std::to_string(width) + " exceeds the " + std::to_string(r.size()) +
                                " longitude columns of mesh column " + std::to_string(j));
        }
    }
}

std::vector<HaloSide> halo_sides(const Decomposition& decomposition, const MeshCoords& coords, int width,
                                 const Periodicity& periodicity) {
    const Box box = decomposition.box(coords);
    std::vector<HaloSide> sides;
    for (Side side : all_sides) {
        const auto neighbour = neighbour_coords(decomposition.mesh(), coords, side, periodicity);
        if (!neighbour) {
            continue;
        }
        const bool along_lat = side == Side::lat_prev || side == Side::lat_next;
        sides.push_back({side, *neighbour, along_lat ? width : box.lat.size(), along_lat ? box.lon.size() : width,
                         *neighbour == coords});
    }
    return sides;
}

std::int64_t halo_bytes_per_channel(const Decomposition& decomposition, const MeshCoords& coords, int width,
                                    const Periodicity& periodicity, std::int64_t element_bytes) {
    std::int64_t cells = 0;
    for (const HaloSide& side : halo_sides(decomposition, coords, width, periodicity)) {
        cells += side.is_self ? 0 : side.cells();
    }
    return cells * element_bytes;
}

std::int64_t gather_bytes_per_channel(const Decomposition& decomposition, const MeshCoords& coords,
                                      std::int64_t element_bytes) {
    const std::int64_t others = decomposition.mesh().spatial_size() - 1;
    return decomposition.box(coords).area() * others * element_bytes;
}

std::string_view to_string(PoleRule rule) noexcept {
    return detail::name_of(rule, pole_rule_names);
}

PoleRule parse_pole_rule(std::string_view text) {
    return detail::parse_name(text, pole_rule_names, "pole");
}

void validate_padded_halo(const Decomposition& decomposition, const PaddedHaloSpec& spec) {
    const GridShape grid = decomposition.grid();
    const std::string width = "halo width=" + std::to_string(spec.width);
    if (spec.width < 0) {
        throw ArgumentError(width + " must be >= 0");
    }
    if (spec.width > grid.nlat) {
        throw ArgumentError(width + " exceeds the grid's nlat=" + std::to_string(grid.nlat));
    }
    if (spec.width > grid.nlon) {
        throw ArgumentError(width + " exceeds the grid's nlon=" + std::to_string(grid.nlon));
    }
    if (spec.pole == PoleRule::across_pole && grid.nlon % 2 != 0) {
        throw ArgumentError("pole=across_pole needs an even nlon (the opposite meridian), got nlon=" +
                            std::to_string(grid.nlon));
    }
}

std::vector<HaloPiece> padded_halo_pieces(const Decomposition& decomposition, int spatial_rank,
                                          const PaddedHaloSpec& spec) {
    validate_padded_halo(decomposition, spec);
    const GridShape grid = decomposition.grid();
    const MeshShape& mesh = decomposition.mesh();
    const Box box = decomposition.box_of_spatial_rank(spatial_rank);
    const std::int64_t width = spec.width;
    const std::int64_t rows = box.lat.size() + 2 * width;
    const std::int64_t cols = box.lon.size() + 2 * width;
    const auto lat_range = [&](int i) { return decomposition.lat_range(i); };
    const auto lon_range = [&](int j) { return decomposition.lon_range(j); };
    std::vector<HaloPiece> pieces;
    for (std::int64_t row = 0; row < rows; ++row) {
        const std::int64_t global_row = box.lat.begin - width + row;
        std::int64_t source_row = global_row;
        std::int64_t shift = 0;
        if (global_row < 0 || global_row >= grid.nlat) {
            if (spec.pole == PoleRule::zero) {
                continue;
            }
            if (spec.pole == PoleRule::replicate) {
                source_row = global_row < 0 ? 0 : grid.nlat - 1;
            } else {
                source_row = global_row < 0 ? -1 - global_row : 2 * grid.nlat - 1 - global_row;
                shift = grid.nlon / 2;
            }
        }
        const int source_lat = part_holding(source_row, mesh.lat, lat_range);
        const bool own_row = global_row >= box.lat.begin && global_row < box.lat.end;
        bool open = false;  // whether the next cell may extend the last piece
        for (std::int64_t col = 0; col < cols; ++col) {
            if (own_row && col == width && !box.lon.empty()) {
                col += box.lon.size() - 1;  // the box itself is not a piece
                open = false;
                continue;
            }
            std::int64_t global_col = box.lon.begin - width + col;
            if (global_col < 0 || global_col >= grid.nlon) {
                if (!spec.periodic_lon) {
                    open = false;
                    continue;
                }
                global_col = (global_col % grid.nlon + grid.nlon) % grid.nlon;
            }
            const std::int64_t source_col = (global_col + shift) % grid.nlon;
            const int source = source_lat * mesh.lon + part_holding(source_col, mesh.lon, lon_range);
            if (open && pieces.back().source == source && pieces.back().source_col + pieces.back().cols == source_col) {
                ++pieces.back().cols;
                continue;
            }
            pieces.push_back({source, source_row, source_col, row, col, 1});
            open = true;
        }
    }
    return pieces;
}

}  // namespace gridshard
