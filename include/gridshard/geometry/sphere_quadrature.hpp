#pragma once
/// @file
/// The latitude quadratures of the spherical transform (torch-harmonics' `grid`): nodes and weights for a grid of
/// `nlat` rows, and how far a grid's latitudes lie from them. No MPI calls.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace gridshard {

/// The latitude quadrature the transform assumes (torch-harmonics' `grid`). Row 0 is the north pole side.
enum class SphereGrid {
    /// Gauss-Legendre nodes and weights (ACE's choice, whatever the file's latitudes are).
    legendre_gauss,
    /// Clenshaw-Curtis: equally spaced colatitudes with both poles (torch-harmonics' "equiangular").
    equiangular,
    /// Gauss-Legendre-Lobatto: both poles and the roots of P'_{n-1}.
    lobatto,
};

/// "legendre-gauss", "equiangular", "lobatto"; the parser throws ArgumentError naming the value.
[[nodiscard]] SphereGrid parse_sphere_grid(std::string_view text);
[[nodiscard]] std::string_view to_string(SphereGrid grid) noexcept;

/// Quadrature nodes `cos(theta_k)` ascending from -1 to 1 and weights summing to 2, for `nlat` rows, as
/// torch-harmonics forms them before its flip (legendre_gauss_weights, clenshaw_curtiss_weights,
/// lobatto_weights). Throws ArgumentError naming nlat when the grid needs more rows. No MPI calls.
struct SphereQuadrature {
    std::vector<double> nodes;
    std::vector<double> weights;
};
[[nodiscard]] SphereQuadrature sphere_quadrature(SphereGrid grid, std::int64_t nlat);

/// The largest distance in degrees between `lat_deg` (a grid's latitudes, either order) and the latitudes of the
/// nodes of `grid` with as many rows, which the transform assumes whatever the file's latitudes are (as ACE does);
/// a front end warns when it exceeds a rounding (the equiangular nodes of a 0.25 degree grid are its latitudes, the
/// legendre-gauss ones are not). No MPI calls.
[[nodiscard]] double latitude_offset_from_nodes_deg(SphereGrid grid, std::span<const double> lat_deg);

}  // namespace gridshard
