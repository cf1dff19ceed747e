#pragma once
/// @file
/// A halo exchange that hands each rank its shard padded by `width` cells on every side, corners included: the
/// padded view a stencil of any reach reads without edge cases (MPL's distributed_grid, with owned and halo ranges
/// in one array). Any width up to the grid's size: where a neighbour's shard is thinner than the width (uneven
/// div_up splits make one-row shards), the halo comes from as many ranks as hold it. Longitude wraps across ranks
/// or gives zeros; beyond the poles a PoleRule applies. Planned once (who sends which cells to whom, from the pure
/// geometry of geometry/halo_geometry.hpp); `execute` is const and reusable.
///
/// HaloExchange (comm/halo_exchange.hpp) is the other plan: the four side strips only, no corners and no copy of
/// the shard, for the gradient's one-cell stencil in the fused evaluation, where copying the field would cost a
/// pass over memory. This one copies the shard into the padded array.
///
/// @code
///   // A 3x3 box sum of each point with periodic longitude and zeros beyond the poles.
///   std::vector<double> box_sums(const gridshard::ProcessMesh& mesh, const gridshard::Decomposition& d,
///                                const std::vector<double>& shard) {   // shard: (1, box rows, box cols)
///       gridshard::PaddedHaloExchange plan(mesh, d, {.width = 1, .periodic_lon = true,
///                                                    .pole = gridshard::PoleRule::zero});   // collective
///       std::vector<double> padded(static_cast<std::size_t>(plan.padded_rows() * plan.padded_cols()));
///       plan.execute<double>(shard, 1, padded);   // collective over `spatial`
///       const gridshard::Box box = d.box(mesh.coords());
///       std::vector<double> sums;
///       for (std::int64_t i = 0; i < box.lat.size(); ++i) {
///           for (std::int64_t j = 0; j < box.lon.size(); ++j) {
///               double s = 0.0;
///               for (std::int64_t di = 0; di < 3; ++di) {
///                   for (std::int64_t dj = 0; dj < 3; ++dj) {
///                       s += padded[static_cast<std::size_t>((i + di) * plan.padded_cols() + j + dj)];
///                   }
///               }
///               sums.push_back(s);
///           }
///       }
///       return sums;
///   }
/// @endcode

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/halo_geometry.hpp"

namespace gridshard {

/// A padded-halo plan for shards `(channels, box)` of one decomposition. Keeps a copy of the mesh (sharing its
/// communicators), so it may outlive the mesh it was built from; copying a plan makes no MPI call.
class PaddedHaloExchange {
  public:
    /// Validates `spec` (validate_padded_halo) and checks collectively that every spatial rank passed the same grid,
    /// split and spec, so a bad argument raises the same ArgumentError on every rank; then works out, from the
    /// geometry alone, which cells this rank receives from and sends to each other rank. Collective over `spatial`.
    PaddedHaloExchange(const ProcessMesh& mesh, const Decomposition& decomposition, PaddedHaloSpec spec);

    /// The padded shard's rows and columns: the box's plus twice the width.
    [[nodiscard]] std::int64_t padded_rows() const noexcept { return box_.lat.size() + 2 * spec_.width; }
    [[nodiscard]] std::int64_t padded_cols() const noexcept { return box_.lon.size() + 2 * spec_.width; }
    [[nodiscard]] const Box& box() const noexcept { return box_; }
    [[nodiscard]] const PaddedHaloSpec& spec() const noexcept { return spec_; }

    /// Writes `padded` `(channels, padded_rows, padded_cols)`: `shard` `(channels, box)` in the middle, the halo ring
    /// around it (the neighbours' cells, the pole rule, zeros where nothing applies). Collective over `spatial` (one
    /// small allreduce checks the arguments; then one message with each rank that holds part of this rank's halo or
    /// needs part of its box, all channels at once). Each rank holds its own padded shard.
    template <class T>
    void execute(std::span<const T> shard, std::int64_t channels, std::span<T> padded) const;

    /// What is wrong with these arguments of execute() on this rank (empty when nothing). No MPI calls.
    template <class T>
    [[nodiscard]] std::string argument_error(std::span<const T> shard, std::int64_t channels,
                                             std::span<const T> padded) const;

    /// execute() without its argument check, for a caller that has agreed argument_error() and the channel count
    /// over `spatial` already (once for several exchanges). Point-to-point messages only.
    template <class T>
    void exchange_agreed(std::span<const T> shard, std::int64_t channels, std::span<T> padded) const;

    /// The adjoint of execute(), for gradients: `shard` `(channels, box)` gets, for each of its cells, the value of
    /// `padded`'s middle at that cell plus every value of a padded shard's halo ring (this rank's or another's) that
    /// shows that cell (under PoleRule::zero a cell beyond the pole shows none; under replicate and across_pole the
    /// cells it repeats). The additions run in a fixed order: the middle, this rank's own halo pieces, then each other
    /// rank's in rank order, piece by piece. Collective over `spatial`: one small allreduce checks the arguments, then
    /// the messages of execute() in the other direction.
    template <class T>
    void adjoint(std::span<const T> padded, std::int64_t channels, std::span<T> shard) const;

    /// adjoint() without its argument check (agreed by the caller, as exchange_agreed). Point-to-point messages only.
    template <class T>
    void adjoint_agreed(std::span<const T> padded, std::int64_t channels, std::span<T> shard) const;

    /// Cells of one channel this rank sends to other ranks in one exchange (bytes: times channels and the size of T).
    [[nodiscard]] std::int64_t sent_cells_per_channel() const noexcept;

  private:
    // The pieces exchanged with one other rank, in the receiver's padded row-major order on both sides.
    struct Peer {
        int rank = 0;  // in `spatial`
        std::vector<HaloPiece> receive;
        std::vector<HaloPiece> send;
        std::int64_t receive_cells = 0;
        std::int64_t send_cells = 0;
    };

    ProcessMesh mesh_;  // a copy: it shares the mesh's communicators
    Box box_;
    PaddedHaloSpec spec_;
    std::vector<HaloPiece> own_;  // pieces this rank sends itself (one rank along longitude)
    std::vector<Peer> peers_;
};

}  // namespace gridshard
