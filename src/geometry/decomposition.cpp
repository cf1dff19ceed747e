#include "gridshard/geometry/decomposition.hpp"

#include <charconv>
#include <limits>

#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

std::vector<std::int64_t> prefix_starts(std::int64_t n, int parts, SplitRule rule) {
    const auto sizes = split_sizes(n, parts, rule);
    std::vector<std::int64_t> starts(sizes.size() + 1, 0);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        starts[k + 1] = starts[k] + sizes[k];
    }
    return starts;
}

void check_coords(const MeshShape& shape, const MeshCoords& c) {
    if (c.data < 0 || c.data >= shape.data || c.lat < 0 || c.lat >= shape.lat || c.lon < 0 || c.lon >= shape.lon) {
        throw ArgumentError("mesh coords [" + std::to_string(c.data) + "," + std::to_string(c.lat) + "," +
                            std::to_string(c.lon) + "] lie outside mesh " + to_string(shape));
    }
}

}  // namespace

MeshShape parse_mesh_shape(std::string_view text) {
    int values[3] = {0, 0, 0};
    const char* cursor = text.data();
    const char* const end = text.data() + text.size();
    for (int k = 0; k < 3; ++k) {
        auto [next, ec] = std::from_chars(cursor, end, values[k]);
        const bool separator_ok = (k < 2) ? (next != end && (*next == 'x' || *next == 'X')) : (next == end);
        if (ec != std::errc{} || values[k] < 1 || !separator_ok) {
            throw ArgumentError("mesh must be DxHxW with three positive integers, got '" + std::string(text) + "'");
        }
        cursor = next + (k < 2 ? 1 : 0);
    }
    if (static_cast<std::int64_t>(values[0]) * values[1] * values[2] > std::numeric_limits<int>::max()) {
        throw ArgumentError("mesh '" + std::string(text) + "' has more ranks than MPI can count");
    }
    return {values[0], values[1], values[2]};
}

std::string to_string(const MeshShape& shape) {
    return std::to_string(shape.data) + "x" + std::to_string(shape.lat) + "x" + std::to_string(shape.lon);
}

MeshCoords coords_of_rank(const MeshShape& shape, int rank) {
    if (rank < 0 || rank >= shape.size()) {
        throw ArgumentError("rank=" + std::to_string(rank) + " lies outside mesh " + to_string(shape) + " of " +
                            std::to_string(shape.size()) + " ranks");
    }
    const int spatial = shape.spatial_size();
    return {rank / spatial, (rank % spatial) / shape.lon, rank % shape.lon};
}

int rank_of_coords(const MeshShape& shape, const MeshCoords& coords) {
    check_coords(shape, coords);
    return coords.data * shape.spatial_size() + spatial_rank_of_coords(shape, coords);
}

std::string_view to_string(Side side) noexcept {
    switch (side) {
        case Side::lat_prev:
            return "lat_prev";
        case Side::lat_next:
            return "lat_next";
        case Side::lon_prev:
            return "lon_prev";
        case Side::lon_next:
            return "lon_next";
    }
    return "unknown";
}

std::optional<MeshCoords> neighbour_coords(const MeshShape& shape, const MeshCoords& coords, Side side,
                                           const Periodicity& periodicity) {
    check_coords(shape, coords);
    const bool along_lat = side == Side::lat_prev || side == Side::lat_next;
    const int step = (side == Side::lat_prev || side == Side::lon_prev) ? -1 : 1;
    const int extent = along_lat ? shape.lat : shape.lon;
    const bool periodic = along_lat ? periodicity.lat : periodicity.lon;
    const int position = (along_lat ? coords.lat : coords.lon) + step;
    if (!periodic && (position < 0 || position >= extent)) {
        return std::nullopt;
    }
    const int wrapped = (position % extent + extent) % extent;
    MeshCoords neighbour = coords;
    (along_lat ? neighbour.lat : neighbour.lon) = wrapped;
    return neighbour;
}

Decomposition::Decomposition(GridShape grid, MeshShape mesh, SplitRule rule) : grid_(grid), mesh_(mesh), rule_(rule) {
    if (mesh.data < 1 || mesh.lat < 1 || mesh.lon < 1) {
        throw ArgumentError("mesh dims must be positive, got mesh=" + to_string(mesh));
    }
    if (grid.nlat < 1 || grid.nlon < 1) {
        throw ArgumentError("grid dims must be positive, got nlat=" + std::to_string(grid.nlat) +
                            " nlon=" + std::to_string(grid.nlon));
    }
    if (rule == SplitRule::balanced && (grid.nlat < mesh.lat || grid.nlon < mesh.lon)) {
        throw ArgumentError("mesh " + to_string(mesh) + " is finer than grid nlat=" + std::to_string(grid.nlat) +
                            " nlon=" + std::to_string(grid.nlon) +
                            ": balanced split needs nlat >= lat and nlon >= lon");
    }
    lat_starts_ = prefix_starts(grid.nlat, mesh.lat, rule);
    lon_starts_ = prefix_starts(grid.nlon, mesh.lon, rule);
}

Range Decomposition::lat_range(int lat_index) const {
    check_coords(mesh_, {0, lat_index, 0});
    const auto k = static_cast<std::size_t>(lat_index);
    return {lat_starts_[k], lat_starts_[k + 1]};
}

Range Decomposition::lon_range(int lon_index) const {
    check_coords(mesh_, {0, 0, lon_index});
    const auto k = static_cast<std::size_t>(lon_index);
    return {lon_starts_[k], lon_starts_[k + 1]};
}

Box Decomposition::box(const MeshCoords& coords) const {
    return {lat_range(coords.lat), lon_range(coords.lon)};
}

Box Decomposition::box_of_spatial_rank(int spatial_rank) const {
    if (spatial_rank < 0 || spatial_rank >= mesh_.spatial_size()) {
        throw ArgumentError("spatial rank=" + std::to_string(spatial_rank) + " lies outside mesh " + to_string(mesh_));
    }
    return box({0, spatial_rank / mesh_.lon, spatial_rank % mesh_.lon});
}

bool Decomposition::has_empty_box() const noexcept {
    for (std::size_t k = 0; k + 1 < lat_starts_.size(); ++k) {
        if (lat_starts_[k + 1] == lat_starts_[k]) {
            return true;
        }
    }
    for (std::size_t k = 0; k + 1 < lon_starts_.size(); ++k) {
        if (lon_starts_[k + 1] == lon_starts_[k]) {
            return true;
        }
    }
    return false;
}

std::vector<Range> Decomposition::local_slices(std::span<const std::int64_t> global_shape, const MeshCoords& coords,
                                               std::optional<int> data_dim, bool allow_uneven_data) const {
    const std::size_t ndim = global_shape.size();
    if (ndim < 2 || global_shape[ndim - 2] != grid_.nlat || global_shape[ndim - 1] != grid_.nlon) {
        std::string shape_text;
        for (std::size_t k = 0; k < ndim; ++k) {
            if (k > 0) {
                shape_text += ',';
            }
            shape_text += std::to_string(global_shape[k]);
        }
        throw ArgumentError("field shape (" + shape_text + ") must end in (nlat, nlon) = (" +
                            std::to_string(grid_.nlat) + "," + std::to_string(grid_.nlon) + ")");
    }
    if (data_dim && (*data_dim < 0 || static_cast<std::size_t>(*data_dim) + 2 >= ndim)) {
        throw ArgumentError("data_dim=" + std::to_string(*data_dim) + " must be a leading dim in [0, " +
                            std::to_string(ndim - 2) + ")");
    }
    std::vector<Range> slices(ndim);
    for (std::size_t k = 0; k + 2 < ndim; ++k) {
        slices[k] = {0, global_shape[k]};
    }
    if (data_dim) {
        const auto k = static_cast<std::size_t>(*data_dim);
        slices[k] = data_block(global_shape[k], mesh_.data, coords.data, allow_uneven_data);
    }
    const Box b = box(coords);
    slices[ndim - 2] = b.lat;
    slices[ndim - 1] = b.lon;
    return slices;
}

}  // namespace gridshard
