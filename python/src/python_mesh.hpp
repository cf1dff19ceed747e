#pragma once
// The state one gridshard.Distributed holds on the C++ side: its process mesh, split rule and summation,
// the ShardedGrid of every global grid it has met, found from the shards themselves (ACE's metric
// calls pass local shards only, never the global shape), and the plans of the calls it has made (spectra,
// NaN fills, halo exchanges), kept for the next call with the same parameters.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/split.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/flood_fill.hpp"
#include "gridshard/metrics/spectrum.hpp"

namespace gridshard::python {

/// How a rank's weights are laid out: one per row, one per point, or either (a shard one column wide, where
/// the two look alike). The library's per-row and per-point paths round differently, so every rank of a call
/// must take the same one.
enum class WeightsForm : std::int64_t { per_point = 0, per_row = 1, either = 2 };

/// The phase of a call, in the two lowest bits of its signature (python/gridshard/_autograd.py): a plain call, the
/// forward of a differentiated one, or a backward pass that communicates. Ranks in different phases raise on every
/// rank with a message that names gradients.
inline constexpr std::int64_t signature_phase_mask = 3;
inline constexpr std::int64_t signature_plain = 0;
inline constexpr std::int64_t signature_differentiated = 1;
inline constexpr std::int64_t signature_backward = 2;

/// The character that starts a rank's problem when it is the system's rather than the arguments' (memory exhausted
/// while the Python layer read an argument: python/gridshard/_arrays.py, Problems). Raised as SystemError.
inline constexpr char system_problem_marker = '\x01';

/// A rank's problem as the Python layer passes it, as a failure of its kind (the marker removed; empty: none).
[[nodiscard]] inline LocalFailure problem_of(const std::string& text) {
    if (!text.empty() && text.front() == system_problem_marker) {
        return {text.substr(1), ErrorKind::system};
    }
    return {text, ErrorKind::argument};
}

/// A rank's shards in one metric call: their extent, and a code of what every rank must give alike (the
/// dtype, the leading dims, whether weights are given, the call's phase), which the Python layer computes.
struct ShardExtent {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t signature = 0;
    /// The parameters of a plan the call takes from the mesh's cache when they must be the same on every rank
    /// before it is looked up (a plan whose making is collective: the halo exchange's), and what they are, for the
    /// message when they are not; zeros otherwise.
    std::array<std::int64_t, 3> plan{};
    const char* plan_names = "";
};

class PythonMesh {
  public:
    /// Collective over `parent` (a caller's communicator, borrowed): builds the mesh on a duplicate.
    PythonMesh(MPI_Comm parent, MeshShape shape, SplitRule rule, Summation summation);

    [[nodiscard]] const ProcessMesh& mesh() const noexcept { return mesh_; }
    [[nodiscard]] SplitRule rule() const noexcept { return rule_; }
    [[nodiscard]] Summation summation() const noexcept { return summation_; }

    /// The grid whose shards under this mesh and split rule are `shard.rows x shard.cols` on every rank, checked
    /// against `declared` (an img_shape the caller gave) when there is one. `problem` is this rank's own
    /// argument error, if any: it is raised, as ArgumentError, on every rank of the spatial group, as are
    /// shards that do not form a split of one grid. `weights` is this rank's form of the weights, and becomes
    /// the form every rank uses: per point if any rank's are, else per row if any rank's are, else per point.
    /// Collective over `spatial`: one allreduce of 9 + 2 (lat + lon + 4) int64, and the first time a grid is
    /// met the ShardedGrid's own set-up. Ranks whose `shard.signature` or `shard.plan` differs raise on every rank.
    [[nodiscard]] const ShardedGrid& grid_of_shards(const std::string& problem, ShardExtent shard,
                                                    std::optional<GridShape> declared, WeightsForm& weights);

    /// The grid `grid`, which every rank of `group` (the spatial group or the world) must name alike, with
    /// the same `element_code` (the dtype of what the caller will send); `problem` is raised on every rank
    /// of `group` as above. Collective over `group`: one allreduce of 7 int64.
    [[nodiscard]] const ShardedGrid& grid_named(const Communicator& group, const std::string& problem, GridShape grid,
                                                std::int64_t element_code);

    /// The plans of `grid`, made the first time their parameters are met and kept, so that a repeated call makes
    /// none. The spectrum's and the fill's are made with no MPI calls, and their calls agree on every parameter they
    /// depend on before they communicate; the halo exchange's is made collectively over `spatial`, so its
    /// parameters must have been agreed first (ShardExtent::plan). Plans take fields of either element type.
    [[nodiscard]] SpectrumPlan& spectrum_plan(const ShardedGrid& grid, std::int64_t channels, const SpectrumSpec& spec);
    [[nodiscard]] FloodFillPlan& flood_fill_plan(const ShardedGrid& grid, const FloodFillOptions& options);
    [[nodiscard]] const PaddedHaloExchange& halo_plan(const ShardedGrid& grid, const PaddedHaloSpec& spec);

  private:
    [[nodiscard]] const ShardedGrid& cached(GridShape grid);

    ProcessMesh mesh_;
    SplitRule rule_;
    Summation summation_;
    std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<ShardedGrid>> grids_;
    // Keyed by the grid's shape and the plan's parameters.
    std::map<std::vector<std::int64_t>, std::unique_ptr<SpectrumPlan>> spectrum_plans_;
    std::map<std::vector<std::int64_t>, std::unique_ptr<FloodFillPlan>> flood_fill_plans_;
    std::map<std::vector<std::int64_t>, std::unique_ptr<PaddedHaloExchange>> halo_plans_;
};

}  // namespace gridshard::python
