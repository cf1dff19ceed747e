// The aggregator bindings' checks of what the Python layer gives: the masked area weights and the data ranks'
// ranges of initial conditions.

#include "aggregator_support.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard::python {

/// `weights` (this rank's rows) times `mask` (its box, row-major) per point. Throws ArgumentError for a mask of another
/// size or with values that are not finite and non-negative.
AreaWeights masked_weights(const AreaWeights& weights, const std::vector<double>& mask, const Box& box) {
    if (static_cast<std::int64_t>(mask.size()) != box.area()) {
        throw ArgumentError("mask: " + std::to_string(mask.size()) + " values for this rank's box of " +
                            std::to_string(box.lat.size()) + " x " + std::to_string(box.lon.size()));
    }
    AreaWeights out{std::vector<double>(mask.size()), true};
    for (std::int64_t i = 0; i < box.lat.size(); ++i) {
        for (std::int64_t j = 0; j < box.lon.size(); ++j) {
            const auto k = static_cast<std::size_t>(i * box.lon.size() + j);
            if (!std::isfinite(mask[k]) || mask[k] < 0.0) {
                throw ArgumentError("mask: values must be finite and non-negative, got " + std::to_string(mask[k]));
            }
            const double row = weights.per_point ? weights.values[k] : weights.values[static_cast<std::size_t>(i)];
            out.values[k] = row * mask[k];
        }
    }
    return out;
}

/// Every rank's range of initial conditions, checked: the ranks of a spatial group record the same ones, and
/// the data ranks' ranges do not overlap and together cover every initial condition, so each per-sample value
/// is scored once. Collective over the world: one allreduce of 2 int64 a rank. Throws alike on every rank.
void check_ranges(const ProcessMesh& mesh, Range mine, std::int64_t initial_conditions) {
    const Communicator& world = mesh.world();
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(world.size()), 0);
    all[2 * static_cast<std::size_t>(world.rank())] = mine.begin;
    all[2 * static_cast<std::size_t>(world.rank()) + 1] = mine.end;
    allreduce_sum_in_place(world, all);
    const MeshShape shape = mesh.shape();
    const int spatial = shape.lat * shape.lon;
    for (int s = 0; s < spatial; ++s) {
        std::vector<Range> ranges;
        for (int d = 0; d < shape.data; ++d) {
            const auto r = static_cast<std::size_t>(d * spatial + s);
            ranges.push_back({all[2 * r], all[2 * r + 1]});
            if (ranges.back() != Range{all[2 * static_cast<std::size_t>(d * spatial)],
                                       all[2 * static_cast<std::size_t>(d * spatial) + 1]}) {
                throw ArgumentError("initial_conditions: the ranks of data rank " + std::to_string(d) +
                                    "'s spatial group record different initial conditions");
            }
        }
        std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.begin < b.begin; });
        std::int64_t next = 0;
        for (const Range r : ranges) {
            if (r.empty()) {
                continue;
            }
            if (r.begin != next) {
                throw ArgumentError("initial_conditions: the data ranks' ranges must cover 0.." +
                                    std::to_string(initial_conditions) + " once each; one starts at " +
                                    std::to_string(r.begin) + " where " + std::to_string(next) + " was expected");
            }
            next = r.end;
        }
        if (next != initial_conditions) {
            throw ArgumentError("initial_conditions: the data ranks' ranges cover 0.." + std::to_string(next) + " of " +
                                std::to_string(initial_conditions));
        }
    }
}

}  // namespace gridshard::python
