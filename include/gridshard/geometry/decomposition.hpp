#pragma once
/// @file
/// The pure geometry of a `data x lat x lon` process mesh over a global lat-lon grid: mesh shapes,
/// rank coordinates, boxes, neighbours and local slices of a field. No MPI calls anywhere here.
///
/// @code
///   gridshard::Decomposition d({721, 1440}, gridshard::parse_mesh_shape("1x2x2"));
///   gridshard::Box b = d.box({0, 1, 0});   // lat [361, 721) x lon [0, 720)
/// @endcode

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/geometry/split.hpp"

namespace gridshard {

/// The global grid: `nlat x nlon` points, longitude fastest in memory.
struct GridShape {
    std::int64_t nlat = 0;
    std::int64_t nlon = 0;
    friend constexpr bool operator==(const GridShape&, const GridShape&) = default;
};

/// The shape of the process mesh: `data x lat x lon` ranks (ACE's batch, h and w).
struct MeshShape {
    int data = 1;
    int lat = 1;
    int lon = 1;

    /// data * lat * lon: the number of ranks the mesh needs.
    [[nodiscard]] constexpr int size() const noexcept { return data * lat * lon; }
    /// lat * lon: the ranks that share one data-parallel sample.
    [[nodiscard]] constexpr int spatial_size() const noexcept { return lat * lon; }
    friend constexpr bool operator==(const MeshShape&, const MeshShape&) = default;
};

/// Parses "DxHxW" (three positive integers); throws ArgumentError naming the text otherwise.
[[nodiscard]] MeshShape parse_mesh_shape(std::string_view text);

/// "DxHxW".
[[nodiscard]] std::string to_string(const MeshShape& shape);

/// A rank's place in the mesh.
struct MeshCoords {
    int data = 0;
    int lat = 0;
    int lon = 0;
    friend constexpr bool operator==(const MeshCoords&, const MeshCoords&) = default;
};

/// Coordinates of world rank `rank`, which is `data*(lat*lon) + lat_index*lon + lon_index`.
[[nodiscard]] MeshCoords coords_of_rank(const MeshShape& shape, int rank);
/// The world rank of `coords`; inverse of coords_of_rank.
[[nodiscard]] int rank_of_coords(const MeshShape& shape, const MeshCoords& coords);
/// The rank within the spatial group: `lat_index*lon + lon_index`.
[[nodiscard]] constexpr int spatial_rank_of_coords(const MeshShape& shape, const MeshCoords& coords) noexcept {
    return coords.lat * shape.lon + coords.lon;
}

/// The half-open global index box `[lat.begin, lat.end) x [lon.begin, lon.end)` one rank owns.
struct Box {
    Range lat;
    Range lon;
    [[nodiscard]] constexpr std::int64_t area() const noexcept { return lat.size() * lon.size(); }
    [[nodiscard]] constexpr bool empty() const noexcept { return lat.empty() || lon.empty(); }
    friend constexpr bool operator==(const Box&, const Box&) = default;
};

/// The four sides of a box. `lat_prev` faces lower latitude indices, `lat_next` higher ones
/// (north or south depends on the grid's order); likewise for longitude.
enum class Side { lat_prev, lat_next, lon_prev, lon_next };

/// All four sides, in the order halo strips are stored.
inline constexpr Side all_sides[] = {Side::lat_prev, Side::lat_next, Side::lon_prev, Side::lon_next};

/// "lat_prev", "lat_next", "lon_prev" or "lon_next".
[[nodiscard]] std::string_view to_string(Side side) noexcept;

/// The side facing the other way (lat_prev <-> lat_next, lon_prev <-> lon_next).
[[nodiscard]] constexpr Side opposite(Side side) noexcept {
    switch (side) {
        case Side::lat_prev:
            return Side::lat_next;
        case Side::lat_next:
            return Side::lat_prev;
        case Side::lon_prev:
            return Side::lon_next;
        case Side::lon_next:
            return Side::lon_prev;
    }
    return side;
}

/// Per-axis periodicity. A global lat-lon grid is periodic in longitude and not in latitude,
/// but both default to false to match torch.gradient; callers ask for periodic longitude.
struct Periodicity {
    bool lat = false;
    bool lon = false;
};

/// The coordinates of the mesh neighbour across `side`, or nothing at a non-periodic mesh edge.
/// With one rank along a periodic axis the neighbour is the rank itself.
[[nodiscard]] std::optional<MeshCoords> neighbour_coords(const MeshShape& shape, const MeshCoords& coords, Side side,
                                                         const Periodicity& periodicity);

/// How a global grid is split over a mesh: the box of every rank. Immutable; no MPI calls.
class Decomposition {
  public:
    /// Validates the grid and mesh (positive sizes) and the split (balanced needs nlat >= lat and
    /// nlon >= lon); throws ArgumentError naming the values otherwise.
    Decomposition(GridShape grid, MeshShape mesh, SplitRule rule = SplitRule::balanced);

    [[nodiscard]] const GridShape& grid() const noexcept { return grid_; }
    [[nodiscard]] const MeshShape& mesh() const noexcept { return mesh_; }
    [[nodiscard]] SplitRule rule() const noexcept { return rule_; }

    /// Latitude range of mesh row `lat_index`.
    [[nodiscard]] Range lat_range(int lat_index) const;
    /// Longitude range of mesh column `lon_index`.
    [[nodiscard]] Range lon_range(int lon_index) const;
    /// The box of the rank at `coords` (the data coordinate does not change it).
    [[nodiscard]] Box box(const MeshCoords& coords) const;
    /// The box of spatial rank `spatial_rank` (`lat_index*lon + lon_index`).
    [[nodiscard]] Box box_of_spatial_rank(int spatial_rank) const;
    /// True when some rank's box is empty (possible only under div_up).
    [[nodiscard]] bool has_empty_box() const noexcept;

    /// The global index range of every dim of a field of `global_shape` (leading dims..., nlat, nlon)
    /// held by the rank at `coords`: leading dims whole, except `data_dim` (if given), which is split
    /// over the data group in equal blocks (see data_block). Throws ArgumentError if the last two
    /// dims are not (nlat, nlon) or data_dim is not a leading dim. ACE's get_local_slices.
    [[nodiscard]] std::vector<Range> local_slices(std::span<const std::int64_t> global_shape, const MeshCoords& coords,
                                                  std::optional<int> data_dim = std::nullopt,
                                                  bool allow_uneven_data = false) const;

  private:
    GridShape grid_;
    MeshShape mesh_;
    SplitRule rule_;
    std::vector<std::int64_t> lat_starts_;  // mesh.lat + 1 prefix sums
    std::vector<std::int64_t> lon_starts_;  // mesh.lon + 1 prefix sums
};

}  // namespace gridshard
