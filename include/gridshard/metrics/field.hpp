#pragma once
/// @file
/// What the metrics take: the grid as this rank sees it, non-owning views of shards and weights, and
/// the options every metric shares.
///
/// @code
///   #include "gridshard/geometry/area_weights.hpp"
///   #include "gridshard/metrics/metrics.hpp"
///   std::vector<double> global_mean(const gridshard::ProcessMesh& mesh, std::span<const double> lat_deg,
///                                   const std::vector<float>& t, std::int64_t channels) {
///       gridshard::ShardedGrid grid(mesh, {721, 1440});                    // collective over spatial
///       // t: (channels, box rows, box cols) of this rank's box
///       auto w = gridshard::cos_lat_weights(lat_deg, 1440, grid.box().lat); // this rank's rows only
///       return gridshard::weighted_mean(grid, gridshard::FieldShard<float>{t, channels}, w.view());
///   }
/// @endcode

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/field_views.hpp"

namespace gridshard {

/// How the sums behind a metric are formed.
enum class Summation {
    /// Exact sums (see numerics/exact_sum.hpp): bit-identical for every mesh, rank count and split rule.
    reproducible,
    /// Plain double sums: faster, but the last bits depend on the decomposition.
    fast,
};

/// How a sum treats values that are not finite (docs/design.md §3).
enum class ValidityPolicy {
    /// NaN or inf under a zero weight vanishes; under a non-zero weight it propagates into the result.
    propagate,
    /// NaN points leave both the numerator and the weight; an infinity counts as a value.
    skip_nan,
    /// A point counts when truth and prediction are both finite and its weight is non-zero.
    skip_invalid_pairs,
};

/// The validity policy of the own-points gradient terms (ACE's gradient score: a `weighted_nanmean` of each field's
/// magnitudes, metrics/terms.hpp) under a run's `policy`: NaN magnitudes are left out even where the run's other sums
/// propagate them (propagate gives skip_nan, as ACE's score does beside its propagating means); otherwise the run's
/// policy.
[[nodiscard]] constexpr ValidityPolicy own_gradient_policy(ValidityPolicy policy) noexcept {
    return policy == ValidityPolicy::propagate ? ValidityPolicy::skip_nan : policy;
}

/// "reproducible" or "fast".
[[nodiscard]] std::string_view to_string(Summation summation) noexcept;
/// Parses "reproducible" or "fast"; throws ArgumentError naming the value otherwise.
[[nodiscard]] Summation parse_summation(std::string_view text);
/// "propagate", "skip_nan" or "skip_invalid_pairs".
[[nodiscard]] std::string_view to_string(ValidityPolicy policy) noexcept;
/// Parses a policy's name; throws ArgumentError naming the value otherwise.
[[nodiscard]] ValidityPolicy parse_validity_policy(std::string_view text);

/// The global grid as this rank sees it: the process mesh, the decomposition, this rank's box, and the
/// one-cell halo plans the gradient metrics use, built once. Keeps a copy of the mesh (copies share its
/// communicators), so it may outlive the mesh it was built from; copying a ShardedGrid makes no MPI call.
class ShardedGrid {
  public:
    /// Collective over `spatial` (builds the halo plans, when the decomposition allows halos).
    ShardedGrid(const ProcessMesh& mesh, GridShape grid, SplitRule rule = SplitRule::balanced);

    /// The one-cell halo plan with open or periodic longitude. Throws ArgumentError, alike on every rank,
    /// when the decomposition cannot exchange halos (an empty shard under div_up). No MPI calls.
    [[nodiscard]] const HaloExchange& halo_plan(bool periodic_lon) const;

    [[nodiscard]] const ProcessMesh& mesh() const noexcept { return mesh_; }
    [[nodiscard]] const Decomposition& decomposition() const noexcept { return decomposition_; }
    [[nodiscard]] const GridShape& grid() const noexcept { return decomposition_.grid(); }
    /// This rank's box.
    [[nodiscard]] const Box& box() const noexcept { return box_; }

  private:
    ProcessMesh mesh_;  // a copy: it shares the mesh's communicators
    Decomposition decomposition_;
    Box box_;
    std::optional<HaloExchange> open_halo_;
    std::optional<HaloExchange> periodic_halo_;
    std::string halo_problem_;
};

/// Options of the gradient metrics (docs/design.md §3). The defaults are torch.gradient's: unit spacing, edges
/// by one-sided differences, no periodicity.
struct GradientOptions {
    /// Central differences across the longitude seam instead of one-sided ones at the first and last column.
    bool periodic_lon = false;
    /// Derivatives in units per metre on the sphere: dy = R dlat, dx = R cos(lat) dlon (uniform spacing).
    bool metres = false;
    double radius_m = 6371000.0;
    double dlat_deg = 0.0;
    double dlon_deg = 0.0;
    /// With `metres`: the latitude of each row of this rank's box, in degrees.
    std::span<const double> lat_deg{};
};

}  // namespace gridshard
