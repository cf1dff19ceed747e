#include "python_mesh.hpp"

#include <bit>
#include <limits>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/communicator.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard::python {
namespace {

std::string shape_text(std::int64_t nlat, std::int64_t nlon) {
    return "(" + std::to_string(nlat) + ", " + std::to_string(nlon) + ")";
}

std::string phase_text(std::int64_t phase) {
    switch (phase) {
        case signature_plain:
            return "'plain'";
        case signature_differentiated:
            return "'differentiated'";
        case signature_backward:
            return "'backward'";
        default:
            return std::to_string(phase);
    }
}

}  // namespace

PythonMesh::PythonMesh(MPI_Comm parent, MeshShape shape, SplitRule rule, Summation summation)
    : mesh_(Communicator::borrow(parent), shape), rule_(rule), summation_(summation) {
    use_cores_of_this_rank(mesh_.world());  // the ranks on a node share its cores, as the tool's do
}

const ShardedGrid& PythonMesh::cached(GridShape grid) {
    auto& slot = grids_[{grid.nlat, grid.nlon}];
    if (!slot) {
        slot = std::make_unique<ShardedGrid>(mesh_, grid, rule_);  // every rank of the group misses alike
    }
    return *slot;
}

const ShardedGrid& PythonMesh::grid_of_shards(const std::string& problem, ShardExtent shard,
                                              std::optional<GridShape> declared, WeightsForm& weights) {
    const std::int64_t rows = shard.rows;
    const std::int64_t cols = shard.cols;
    const MeshShape& shape = mesh_.shape();
    const MeshCoords& me = mesh_.coords();
    const Communicator& spatial = mesh_.spatial();
    constexpr std::int64_t absent = std::numeric_limits<std::int64_t>::max();

    // One MIN-allreduce: [lowest failing rank | per lat index: min rows, min -rows | per lon index: min cols,
    // min -cols | min and -max of the declared nlat and nlon | min and -max of the signature | min and -max of the
    // call's phase | 0 if any rank's weights are per point, 0 if any are per row | min and -max of each plan
    // parameter]. The slots of a mesh row or column
    // take only the ranks in it, so every rank learns every shard's extent and whether its peers agree.
    const std::size_t lat_slots = 1;
    const std::size_t lon_slots = lat_slots + 2 * static_cast<std::size_t>(shape.lat);
    const std::size_t declared_slots = lon_slots + 2 * static_cast<std::size_t>(shape.lon);
    const std::size_t signature_slots = declared_slots + 4;
    const std::size_t phase_slots = signature_slots + 2;
    const std::size_t form_slots = phase_slots + 2;
    const std::size_t plan_slots = form_slots + 2;
    std::vector<std::int64_t> buffer(plan_slots + 2 * shard.plan.size(), absent);
    buffer[form_slots] = weights == WeightsForm::per_point ? 0 : 1;
    buffer[form_slots + 1] = weights == WeightsForm::per_row ? 0 : 1;
    buffer[0] = problem.empty() ? absent : spatial.rank();
    if (problem.empty()) {
        buffer[lat_slots + 2 * static_cast<std::size_t>(me.lat)] = rows;
        buffer[lat_slots + 2 * static_cast<std::size_t>(me.lat) + 1] = -rows;
        buffer[lon_slots + 2 * static_cast<std::size_t>(me.lon)] = cols;
        buffer[lon_slots + 2 * static_cast<std::size_t>(me.lon) + 1] = -cols;
        const std::int64_t nlat = declared ? declared->nlat : -1;
        const std::int64_t nlon = declared ? declared->nlon : -1;
        buffer[declared_slots] = nlat;
        buffer[declared_slots + 1] = -nlat;
        buffer[declared_slots + 2] = nlon;
        buffer[declared_slots + 3] = -nlon;
        const std::int64_t phase = shard.signature & signature_phase_mask;
        buffer[signature_slots] = shard.signature - phase;
        buffer[signature_slots + 1] = -(shard.signature - phase);
        buffer[phase_slots] = phase;
        buffer[phase_slots + 1] = -phase;
        for (std::size_t k = 0; k < shard.plan.size(); ++k) {
            buffer[plan_slots + 2 * k] = shard.plan[k];
            buffer[plan_slots + 2 * k + 1] = -shard.plan[k];
        }
    }
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_INT64_T, MPI_MIN,
                  spatial.native());
    if (buffer[0] != absent) {
        check_collectively(spatial, problem_of(problem));  // every rank took this branch: spreads it and throws
        throw ArgumentError(problem);                      // not reached: check_collectively throws on every rank
    }

    // From here on every rank sees the same numbers, so every rank throws alike.
    weights = buffer[form_slots] == 0       ? WeightsForm::per_point
              : buffer[form_slots + 1] == 0 ? WeightsForm::per_row
                                            : WeightsForm::per_point;
    GridShape grid{0, 0};
    std::string uneven;
    auto collect = [&](std::size_t first, int parts, const char* axis, std::int64_t& total) {
        for (int k = 0; k < parts; ++k) {
            const std::int64_t low = buffer[first + 2 * static_cast<std::size_t>(k)];
            const std::int64_t high = -buffer[first + 2 * static_cast<std::size_t>(k) + 1];
            if (low != high && uneven.empty()) {
                uneven = std::string("the ranks at ") + axis + " index " + std::to_string(k) + " hold shards of " +
                         std::to_string(low) + " to " + std::to_string(high) + " " + axis + " points";
            }
            total += low;
        }
    };
    collect(lat_slots, shape.lat, "lat", grid.nlat);
    collect(lon_slots, shape.lon, "lon", grid.nlon);
    if (!uneven.empty()) {
        throw ArgumentError("data: " + uneven + "; the shards of one field must form its split");
    }
    if (buffer[declared_slots] != -buffer[declared_slots + 1] ||
        buffer[declared_slots + 2] != -buffer[declared_slots + 3]) {
        throw ArgumentError("img_shape differs between ranks: nlat " + std::to_string(buffer[declared_slots]) + " to " +
                            std::to_string(-buffer[declared_slots + 1]) + ", nlon " +
                            std::to_string(buffer[declared_slots + 2]) + " to " +
                            std::to_string(-buffer[declared_slots + 3]));
    }
    if (buffer[phase_slots] != -buffer[phase_slots + 1]) {
        throw ArgumentError(
            "the ranks differ in whether they differentiate this call (phases " + phase_text(buffer[phase_slots]) +
            " and " + phase_text(-buffer[phase_slots + 1]) +
            "): a tensor that requires grad on some ranks only, torch.no_grad() on some ranks only, or backward() "
            "run on some ranks only; every rank of the spatial group must make the same calls, gradients alike");
    }
    if (buffer[signature_slots] != -buffer[signature_slots + 1]) {
        throw ArgumentError(
            "data: the ranks' arguments differ in dtype, leading dims or whether weights are given; "
            "every rank of the spatial group must pass its shard of the same fields");
    }
    for (std::size_t k = 0; k < shard.plan.size(); ++k) {
        if (buffer[plan_slots + 2 * k] != -buffer[plan_slots + 2 * k + 1]) {
            throw ArgumentError(std::string("the ranks' arguments differ in ") + shard.plan_names +
                                "; every rank of the spatial group must pass the same");
        }
    }
    if (declared && (declared->nlat != grid.nlat || declared->nlon != grid.nlon)) {
        throw ArgumentError("img_shape=" + shape_text(declared->nlat, declared->nlon) + " but the shards make up " +
                            shape_text(grid.nlat, grid.nlon));
    }
    if (grid.nlat < 1 || grid.nlon < 1) {
        throw ArgumentError("data: the shards make up an empty grid " + shape_text(grid.nlat, grid.nlon));
    }
    auto check_split = [&](std::size_t first, std::int64_t n, int parts, const char* axis, const char* points) {
        for (int k = 0; k < parts; ++k) {
            const auto expected = split_range(n, parts, rule_, k).size();
            const auto got = buffer[first + 2 * static_cast<std::size_t>(k)];
            if (expected != got) {
                throw ArgumentError(std::string("data: the ") + axis + " shards (" + std::to_string(got) + " " +
                                    points + " at " + axis + " index " + std::to_string(k) + ") are not the " +
                                    std::string(to_string(rule_)) + " split of " + std::to_string(n) + " " + points +
                                    " over " + std::to_string(parts) + " ranks, which gives " +
                                    std::to_string(expected) + " there");
            }
        }
    };
    check_split(lat_slots, grid.nlat, shape.lat, "lat", "rows");
    check_split(lon_slots, grid.nlon, shape.lon, "lon", "columns");
    return cached(grid);
}

SpectrumPlan& PythonMesh::spectrum_plan(const ShardedGrid& grid, std::int64_t channels, const SpectrumSpec& spec) {
    const GridShape shape = grid.grid();
    auto& slot = spectrum_plans_[{shape.nlat, shape.nlon, channels, static_cast<std::int64_t>(spec.grid),
                                  static_cast<std::int64_t>(spec.truncation), spec.lmax, spec.mmax,
                                  static_cast<std::int64_t>(spec.convention), static_cast<std::int64_t>(spec.mode)}];
    if (!slot) {
        slot = std::make_unique<SpectrumPlan>(grid, channels, spec);
    }
    return *slot;
}

FloodFillPlan& PythonMesh::flood_fill_plan(const ShardedGrid& grid, const FloodFillOptions& options) {
    const GridShape shape = grid.grid();
    auto& slot = flood_fill_plans_[{shape.nlat, shape.nlon, options.num_steps, options.blur_kernel_size,
                                    std::bit_cast<std::int64_t>(options.blur_sigma)}];
    if (!slot) {
        slot = std::make_unique<FloodFillPlan>(grid, options);
    }
    return *slot;
}

const PaddedHaloExchange& PythonMesh::halo_plan(const ShardedGrid& grid, const PaddedHaloSpec& spec) {
    const GridShape shape = grid.grid();
    auto& slot = halo_plans_[{shape.nlat, shape.nlon, spec.width, spec.periodic_lon ? 1 : 0,
                              static_cast<std::int64_t>(spec.pole)}];
    if (!slot) {
        slot = std::make_unique<PaddedHaloExchange>(grid.mesh(), grid.decomposition(), spec);  // every rank alike
    }
    return *slot;
}

const ShardedGrid& PythonMesh::grid_named(const Communicator& group, const std::string& problem, GridShape grid,
                                          std::int64_t element_code) {
    agree_or_throw(group, problem_of(problem), {grid.nlat, grid.nlon, element_code},
                   "img_shape, and the dtype and leading dims of the shards (coded)");
    return cached(grid);
}

}  // namespace gridshard::python
