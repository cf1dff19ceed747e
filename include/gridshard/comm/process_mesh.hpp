#pragma once
/// @file
/// The `data x lat x lon` process mesh over a communicator, with its five groups.
///
/// @code
///   gridshard::ProcessMesh mesh(gridshard::Communicator::world(), gridshard::parse_mesh_shape("2x2x1"));
///   mesh.spatial().size();   // 2: the ranks that share one data-parallel sample
///   mesh.coords();           // {d, i, j} of this rank
/// @endcode

#include <memory>
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
    /// The mesh works on its own duplicate of `parent`, which is left untouched. Copies of a mesh share
    /// its communicators (a copy makes no MPI call); they are freed when the last copy is gone, so the
    /// objects built on a mesh (ShardedGrid, HaloExchange, Evaluator) keep a copy instead of a reference.
    ProcessMesh(const Communicator& parent, MeshShape shape);

    [[nodiscard]] const MeshShape& shape() const noexcept { return state_->shape; }
    /// This rank's coordinates. No MPI calls.
    [[nodiscard]] const MeshCoords& coords() const noexcept { return state_->coords; }

    [[nodiscard]] const Communicator& world() const noexcept { return state_->world; }
    [[nodiscard]] const Communicator& data() const noexcept { return state_->data; }
    [[nodiscard]] const Communicator& lat() const noexcept { return state_->lat; }
    [[nodiscard]] const Communicator& lon() const noexcept { return state_->lon; }
    [[nodiscard]] const Communicator& spatial() const noexcept { return state_->spatial; }

    /// The spatial-group rank of the neighbour across `side`, or nothing at a non-periodic mesh edge.
    /// No MPI calls.
    [[nodiscard]] std::optional<int> neighbour_spatial_rank(Side side, const Periodicity& periodicity) const;

    /// The communicators and coordinates every copy of one mesh shares.
    struct State {
        MeshShape shape;
        Communicator world;
        MeshCoords coords;
        Communicator data;
        Communicator lat;
        Communicator lon;
        Communicator spatial;
    };

  private:
    std::shared_ptr<const State> state_;
};

}  // namespace gridshard
