#pragma once
/// @file
/// Which halo strips a rank exchanges, and how many bytes that moves compared with a gather.
/// Pure geometry shared by HaloExchange and `gridshard decompose`. No MPI calls.

#include <cstdint>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {

/// One side of a rank's box across which a halo strip is exchanged. The strip received from the
/// neighbour and the strip sent to it have the same extent: `rows x cols` per channel.
struct HaloSide {
    Side side;
    MeshCoords neighbour;
    std::int64_t rows = 0;  ///< width for lat sides, the local nlat for lon sides
    std::int64_t cols = 0;  ///< the local nlon for lat sides, width for lon sides
    bool is_self = false;   ///< the neighbour is this rank (one rank along a periodic axis)
    [[nodiscard]] constexpr std::int64_t cells() const noexcept { return rows * cols; }
};

/// Throws ArgumentError unless a halo of `width` can be exchanged on every rank of `decomposition`:
/// width >= 1, no empty box, and every box at least `width` cells thick along each axis that
/// exchanges (an axis with more than one rank, or a periodic one). Every rank sees the same
/// decomposition, so every rank raises the same error. No MPI calls.
void validate_halo(const Decomposition& decomposition, int width, const Periodicity& periodicity);

/// The sides across which the rank at `coords` exchanges a halo of `width`, in all_sides order;
/// sides at a non-periodic global edge are absent. No MPI calls.
[[nodiscard]] std::vector<HaloSide> halo_sides(const Decomposition& decomposition, const MeshCoords& coords, int width,
                                               const Periodicity& periodicity);

/// Bytes of one channel the rank at `coords` sends to other ranks in a halo exchange of `width`.
[[nodiscard]] std::int64_t halo_bytes_per_channel(const Decomposition& decomposition, const MeshCoords& coords,
                                                  int width, const Periodicity& periodicity,
                                                  std::int64_t element_bytes);

/// Bytes of one channel the rank at `coords` sends in an all-gather of the whole field over the
/// spatial group: its shard to each of the other spatial ranks.
[[nodiscard]] std::int64_t gather_bytes_per_channel(const Decomposition& decomposition, const MeshCoords& coords,
                                                    std::int64_t element_bytes);

}  // namespace gridshard
