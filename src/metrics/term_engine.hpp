#pragma once
// The one accumulation engine: a single pass over a rank's shard forms the requested per-point terms
// (metrics/terms.hpp) under one ValidityPolicy and sums them, per channel or per (channel, row), with
// OpenMP threads over (channel, row) and results that are the same bits for any thread count. Every
// metric and the Evaluator call it; the masking, each term and the weighting live here only.
// Internal to the metrics layer; form_terms makes no MPI calls.

#include <cstdint>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/terms.hpp"
#include "partial_sums.hpp"
#include "row_kernels.hpp"

namespace gridshard::detail {

/// What one pass forms: the terms, the policy that decides which points count, the summation.
struct TermRequest {
    TermSet terms;
    ValidityPolicy policy = ValidityPolicy::propagate;
    Summation summation = Summation::reproducible;
};

/// How the sums are grouped: one set of terms per channel (a metric over the grid), or per (channel, row)
/// of the box (a zonal metric, reduced over longitude only, with every point weighing 1).
enum class Grouping { channel, channel_row };

/// The inputs of one pass over a rank's box. `prediction` may be null when no term needs it; `halo` and
/// `gradient` are needed when a gradient term is requested (the halos of truth are field 0 of `halo`,
/// those of prediction field 1).
template <class T>
struct ShardInputs {
    const T* truth = nullptr;
    const T* prediction = nullptr;
    std::int64_t channels = 1;
    const HaloBuffers<T>* halo = nullptr;
    const GradientOptions* gradient = nullptr;
};

/// The partial sums of `request` over this rank's box: with Grouping::channel, slot 0 holds the total
/// weight and each channel's terms follow (TermSums's layout); with Grouping::channel_row, each (channel,
/// row) holds its terms, every point weighing 1 (`weights` unused), in the compact exact form. No MPI calls.
template <class T>
[[nodiscard]] PartialSums form_terms(const GridShape& grid, const Box& box, const ShardInputs<T>& inputs,
                                     const RowWeights& weights, const TermRequest& request, Grouping grouping);

}  // namespace gridshard::detail
