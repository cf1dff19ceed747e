#include "gridshard/comm/process_mesh.hpp"

#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

// Validates the shape on every rank alike, then duplicates the parent so the mesh owns its groups.
Communicator checked_world(const Communicator& parent, const MeshShape& shape) {
    detail::agree_or_throw(parent, "", {shape.data, shape.lat, shape.lon}, "mesh shape (data, lat, lon)");
    if (shape.data < 1 || shape.lat < 1 || shape.lon < 1 || shape.size() != parent.size()) {
        throw ArgumentError("mesh " + to_string(shape) + " has " + std::to_string(shape.size()) +
                            " ranks but the communicator has " + std::to_string(parent.size()));
    }
    return parent.duplicate();
}

}  // namespace

ProcessMesh::ProcessMesh(const Communicator& parent, MeshShape shape)
    : shape_(shape),
      world_(checked_world(parent, shape)),
      coords_(coords_of_rank(shape, world_.rank())),
      data_(world_.split(spatial_rank_of_coords(shape, coords_), coords_.data)),
      lat_(world_.split(coords_.data * shape.lon + coords_.lon, coords_.lat)),
      lon_(world_.split(coords_.data * shape.lat + coords_.lat, coords_.lon)),
      spatial_(world_.split(coords_.data, spatial_rank_of_coords(shape, coords_))) {}

std::optional<int> ProcessMesh::neighbour_spatial_rank(Side side, const Periodicity& periodicity) const {
    const auto neighbour = neighbour_coords(shape_, coords_, side, periodicity);
    if (!neighbour) {
        return std::nullopt;
    }
    return spatial_rank_of_coords(shape_, *neighbour);
}

}  // namespace gridshard
