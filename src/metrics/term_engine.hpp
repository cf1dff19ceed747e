#pragma once
// The one accumulation engine: a single pass over a rank's shard forms the requested per-point terms
// (metrics/terms.hpp) under one ValidityPolicy and sums them, per channel (form_terms) or per (channel,
// row) (add_zonal_terms), with
// OpenMP threads over (channel, row) and results that are the same bits for any thread count. Every
// metric and the Evaluator call it; the masking, each term and the weighting live here only.
// Internal to the metrics layer; form_terms makes no MPI calls.

#include <cstdint>
#include <string_view>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/terms.hpp"
#include "partial_sums.hpp"
#include "row_kernels.hpp"

namespace gridshard::detail {

struct RowValueSums;  // fixed_point_rows.hpp

/// What one pass forms: the terms, the policy that decides which points count, the summation.
struct TermRequest {
    TermSet terms;
    ValidityPolicy policy = ValidityPolicy::propagate;
    Summation summation = Summation::reproducible;
    /// What the weights are, for the message when their total over the valid points is not positive.
    std::string_view weights_name = "weights";
};

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

/// The partial sums of `request` per channel over this rank's box (a metric over the grid): slot 0 holds
/// the total weight and each channel's terms follow (TermSums's layout). With `row_sums` (one per (channel, row),
/// channel-major), the pair's rows that the fixed-point path sums whole hand their value sums over there
/// (fixed_point_rows.hpp); the others are left as they were. No MPI calls.
template <class T>
[[nodiscard]] PartialSums form_terms(const GridShape& grid, const Box& box, const ShardInputs<T>& inputs,
                                     const RowWeights& weights, const TermRequest& request,
                                     RowValueSums* row_sums = nullptr);

/// The sums of `request` per (channel, row) of the box (a zonal metric, reduced over longitude only; no
/// gradient terms; every point weighs 1), added to `sums` from slot `first_slot` on, so that several fields
/// share one PartialSums (in the compact exact form, window_for<T>()) and one allreduce. No MPI calls.
template <class T>
void add_zonal_terms(const Box& box, const ShardInputs<T>& inputs, const TermRequest& request, PartialSums& sums,
                     std::int64_t first_slot);

}  // namespace gridshard::detail
