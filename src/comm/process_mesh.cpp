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

// The groups of the mesh, split from its own duplicate of `parent`.
std::shared_ptr<const ProcessMesh::State> mesh_state(const Communicator& parent, const MeshShape& shape) {
    Communicator world = checked_world(parent, shape);
    const MeshCoords coords = coords_of_rank(shape, world.rank());
    Communicator data = world.split(spatial_rank_of_coords(shape, coords), coords.data);
    Communicator lat = world.split(coords.data * shape.lon + coords.lon, coords.lat);
    Communicator lon = world.split(coords.data * shape.lat + coords.lat, coords.lon);
    Communicator spatial = world.split(coords.data, spatial_rank_of_coords(shape, coords));
    return std::make_shared<const ProcessMesh::State>(ProcessMesh::State{
        shape, std::move(world), coords, std::move(data), std::move(lat), std::move(lon), std::move(spatial)});
}

}  // namespace

ProcessMesh::ProcessMesh(const Communicator& parent, MeshShape shape) : state_(mesh_state(parent, shape)) {}

std::optional<int> ProcessMesh::neighbour_spatial_rank(Side side, const Periodicity& periodicity) const {
    const auto neighbour = neighbour_coords(shape(), coords(), side, periodicity);
    if (!neighbour) {
        return std::nullopt;
    }
    return spatial_rank_of_coords(shape(), *neighbour);
}

}  // namespace gridshard
