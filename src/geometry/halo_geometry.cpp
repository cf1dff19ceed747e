#include "gridshard/geometry/halo_geometry.hpp"

#include "gridshard/core/error.hpp"

namespace gridshard {

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

}  // namespace gridshard
