#pragma once
/// @file
/// ACE's NaN fill before a spectral transform (`fme.core.fill.SmoothFloodFill`, fme 2026.10.0) on shards: the
/// serial answer bit for bit on every mesh, split rule and thread count (docs/spectrum.md).
///
/// @code
///   #include "gridshard/metrics/flood_fill.hpp"
///   #include "gridshard/metrics/spectrum.hpp"
///   // The spectrum of a field with a land mask, as ACE forms it: filled first.
///   std::vector<double> filled_spectrum(const gridshard::ShardedGrid& grid, const std::vector<float>& shard,
///                                       std::int64_t channels) {
///       const std::vector<double> filled =
///           gridshard::smooth_flood_fill(grid, gridshard::FieldShard<float>{shard, channels});   // collective
///       return gridshard::spherical_power_spectrum(grid, gridshard::FieldShard<double>{filled, channels});
///   }
/// @endcode

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// SmoothFloodFill's arguments.
struct FloodFillOptions {
    int num_steps = 4;         ///< neighbour-averaging steps (>= 0)
    int blur_kernel_size = 5;  ///< the Gaussian blur's taps (odd, >= 1)
    double blur_sigma = 1.0;   ///< its standard deviation in cells (> 0)
};

/// Throws ArgumentError naming the option unless `options` applies to `grid` (num_steps >= 0, an odd kernel of at
/// least one tap that reaches no further than the grid, a positive finite sigma). No MPI calls.
void validate_flood_fill(const FloodFillOptions& options, const GridShape& grid);

/// Fills the NaN points of each channel of `field` as SmoothFloodFill does, and blends across the boundary of its
/// valid points; a channel with no NaN anywhere on the grid is returned as it is. Per channel, with the valid points
/// those that are not NaN (an infinity counts as a value, as in ACE):
/// 1. *interior*: the NaN points that `num_steps` 3x3 dilations of the valid points (longitude periodic, nothing
///    beyond the poles) do not reach get the channel's mean over its valid points (the plain mean, exact);
/// 2. the other NaN points start at 0 (infinities at the largest finite value of T, as torch.nan_to_num) and, for
///    `num_steps` steps, each one with a valid point among its 3x3 neighbours (zeros beyond the poles, longitude
///    periodic) takes the mean of their values and becomes valid (all points at once from the previous step's
///    values);
/// 3. the result `x b + blur(x) (1 - b)`, with `b` the blurred indicator of the original valid points and `blur` a
///    separable Gaussian (`blur_kernel_size` taps of `exp(-d^2 / (2 sigma^2))`, normalised; latitude first, the edge
///    rows repeated beyond the poles, then longitude, periodic).
/// Each channel uses its own NaN points; ACE caches the NaN points of the first field it fills per variable and
/// requires them not to change, so the two agree wherever ACE's requirement holds. Computed in double in a fixed
/// order per point (ACE: in the field's type), returned as `(channels, box)` in double.
/// Collective over `spatial`: an agreement on the arguments, two allreduces (the NaN counts, the exact means), and
/// 2 num_steps + 1 halo exchanges of width 1, 1 and blur_kernel_size / 2 (PaddedHaloExchange: only halo strips move),
/// whose plans it makes for this call alone (FloodFillPlan below keeps them for the next).
template <class T>
[[nodiscard]] std::vector<double> smooth_flood_fill(const ShardedGrid& grid, FieldShard<T> field,
                                                    const FloodFillOptions& options = {});

/// smooth_flood_fill planned once for a grid and options and reused: the blur's taps are made by the constructor,
/// the two padded halo exchanges (the steps' and the blur's) by the first call that fills a NaN, and neither again
/// (options that do not apply are kept and raised, on every rank alike, by each call). Keeps a copy of the grid
/// (sharing its mesh's communicators), so it may outlive it; copying or moving a plan makes no MPI call; one call
/// at a time.
///
/// @code
///   #include "gridshard/metrics/flood_fill.hpp"
///   // The fills of many steps of the same fields: planned once.
///   void fills(const gridshard::ShardedGrid& grid, const std::vector<std::vector<float>>& steps, std::int64_t
///   channels,
///              std::vector<std::vector<double>>& out) {
///       gridshard::FloodFillPlan plan(grid);  // no MPI calls
///       for (const std::vector<float>& shard : steps) {
///           out.push_back(plan(gridshard::FieldShard<float>{shard, channels}));  // collective over `spatial`
///       }
///   }
/// @endcode
class FloodFillPlan {
  public:
    /// No MPI calls.
    explicit FloodFillPlan(const ShardedGrid& grid, const FloodFillOptions& options = {});

    [[nodiscard]] const FloodFillOptions& options() const noexcept { return options_; }

    /// smooth_flood_fill(grid, field, options): the same bits, the same messages. Collective over `spatial`: an
    /// agreement on the arguments, the NaN counts' allreduce and, when some channel holds a NaN, the exact means'
    /// allreduce and the halo exchanges (the first such call also makes the two halo plans, each collective).
    template <class T>
    [[nodiscard]] std::vector<double> operator()(FieldShard<T> field);

  private:
    ShardedGrid grid_;
    FloodFillOptions options_;
    std::string error_;         // what is wrong with the options for this grid (empty when nothing)
    std::vector<double> taps_;  // the blur's
    std::optional<PaddedHaloExchange> step_halo_;
    std::optional<PaddedHaloExchange> blur_halo_;
};

}  // namespace gridshard
