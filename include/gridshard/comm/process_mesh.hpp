#pragma once
/// @file
/// The `data x lat x lon` process mesh over a communicator, with its five groups.
///
/// @code
///   gridshard::ProcessMesh mesh(gridshard::Communicator::world(), gridshard::parse_mesh_shape("2x2x1"));
///   mesh.spatial().size();   // 2: the ranks that share one data-parallel sample
///   mesh.coords();           // {d, i, j} of this rank
/// @endcode

#include <optional>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {

/// A `data x lat x lon` mesh of ranks. World rank `r = d*(lat*lon) + i*lon + j` of the parent.
/// Groups: `world` (all), `data` (same i, j; ordered by d), `lat` (same d, j; ordered by i),
/// `lon` (same d, i; ordered by j), `spatial` (same d; ordered by i*lon + j).
/// ACE's backends are mesh shapes: NonDistributed 1x1x1, TorchDistributed Nx1x1, ModelTorchDistributed DxHxW.
class ProcessMesh {
  public:
    /// Collective over `parent`. Checks that every rank passed the same shape and that its product is
    /// the size of `parent`; otherwise every rank throws the same ArgumentError naming both numbers.
    /// The mesh works on its own duplicate of `parent`, which is left untouched.
    ProcessMesh(const Communicator& parent, MeshShape shape);

    [[nodiscard]] const MeshShape& shape() const noexcept { return shape_; }
    /// This rank's coordinates. No MPI calls.
    [[nodiscard]] const MeshCoords& coords() const noexcept { return coords_; }

    [[nodiscard]] const Communicator& world() const noexcept { return world_; }
    [[nodiscard]] const Communicator& data() const noexcept { return data_; }
    [[nodiscard]] const Communicator& lat() const noexcept { return lat_; }
    [[nodiscard]] const Communicator& lon() const noexcept { return lon_; }
    [[nodiscard]] const Communicator& spatial() const noexcept { return spatial_; }

    /// The spatial-group rank of the neighbour across `side`, or nothing at a non-periodic mesh edge.
    /// No MPI calls.
    [[nodiscard]] std::optional<int> neighbour_spatial_rank(Side side, const Periodicity& periodicity) const;

  private:
    MeshShape shape_;
    Communicator world_;
    MeshCoords coords_;
    Communicator data_;
    Communicator lat_;
    Communicator lon_;
    Communicator spatial_;
};

}  // namespace gridshard
