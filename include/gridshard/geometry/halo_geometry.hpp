#pragma once
/// @file
/// Which halo strips a rank exchanges, and how many bytes that moves compared with a gather; and the pieces of a
/// padded halo of any width (corners included, from as many ranks as hold it, with a rule beyond the poles).
/// Pure geometry shared by HaloExchange, PaddedHaloExchange and `gridshard decompose`. No MPI calls.

#include <cstdint>
#include <string_view>
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

/// What a padded halo holds beyond the poles: the rows before row 0 and from row nlat on.
enum class PoleRule {
    zero,       ///< zeros
    replicate,  ///< the edge row repeated: row -k is row 0, row nlat - 1 + k is row nlat - 1
    /// The rows across the pole on the opposite meridian, for fields on a regular global grid: row -1 - k is row k
    /// and row nlat + k is row nlat - 1 - k, each shifted by nlon / 2 columns (nlon must be even).
    across_pole,
};

/// "zero", "replicate" or "across_pole"; the parser throws ArgumentError naming the value.
[[nodiscard]] std::string_view to_string(PoleRule rule) noexcept;
[[nodiscard]] PoleRule parse_pole_rule(std::string_view text);

/// A halo of `width` cells on every side of a rank's box, corners included.
struct PaddedHaloSpec {
    int width = 1;
    /// Beyond the first and last columns, the columns across the seam; without it, zeros.
    bool periodic_lon = true;
    PoleRule pole = PoleRule::zero;
};

/// One run of cells of a rank's padded shard `(rows + 2 width, cols + 2 width)` and where it comes from: `cols`
/// consecutive values of global row `source_row` from global column `source_col` on, all in the box of spatial rank
/// `source`, into padded row `row` from padded column `col` on.
struct HaloPiece {
    int source = 0;
    std::int64_t source_row = 0;
    std::int64_t source_col = 0;
    std::int64_t row = 0;
    std::int64_t col = 0;
    std::int64_t cols = 0;
    friend constexpr bool operator==(const HaloPiece&, const HaloPiece&) = default;
};

/// Throws ArgumentError unless `spec` applies to the grid of `decomposition`: 0 <= width <= nlat, width <= nlon,
/// and an even nlon for PoleRule::across_pole. A width beyond a neighbour's shard is fine: the halo then comes from
/// several ranks. Every rank sees the same arguments, so every rank raises the same error. No MPI calls.
void validate_padded_halo(const Decomposition& decomposition, const PaddedHaloSpec& spec);

/// The pieces of the halo ring of spatial rank `spatial_rank`'s padded shard (its own box is not among them), in
/// padded row-major order; a cell no piece covers (beyond the poles under PoleRule::zero, beyond the first and
/// last columns without periodic_lon) is zero. A piece may come from the rank itself (one rank along longitude).
/// Validates as validate_padded_halo. No MPI calls.
[[nodiscard]] std::vector<HaloPiece> padded_halo_pieces(const Decomposition& decomposition, int spatial_rank,
                                                        const PaddedHaloSpec& spec);

}  // namespace gridshard
