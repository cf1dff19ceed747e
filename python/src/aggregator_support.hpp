#pragma once
// The aggregator bindings' checks of what the Python layer gives (aggregator_support.cpp), for
// aggregator_bindings.cpp.

#include <cstdint>
#include <vector>

#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/split.hpp"

namespace gridshard::python {

/// `weights` (this rank's rows) times `mask` (its box, row-major) per point. Throws ArgumentError for a mask of another
/// size or with values that are not finite and non-negative.
AreaWeights masked_weights(const AreaWeights& weights, const std::vector<double>& mask, const Box& box);

/// Every rank's range of initial conditions, checked: the ranks of a spatial group record the same ones, and
/// the data ranks' ranges do not overlap and together cover every initial condition, so each per-sample value
/// is scored once. Collective over the world: one allreduce of 2 int64 a rank. Throws alike on every rank.
void check_ranges(const ProcessMesh& mesh, Range mine, std::int64_t initial_conditions);

}  // namespace gridshard::python
