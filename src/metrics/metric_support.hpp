#pragma once
// What the metric families share around the one engine (term_engine.hpp): the collective argument check,
// the halo exchange of the gradient terms, the merge over the spatial group with its total-weight check.
// Internal to the metrics layer.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/terms.hpp"
#include "row_kernels.hpp"
#include "term_engine.hpp"

namespace gridshard::detail {

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// The first non-empty message, so a metric reports the first thing wrong with its arguments.
inline std::string first_error(std::initializer_list<std::string> errors) {
    for (const std::string& e : errors) {
        if (!e.empty()) {
            return e;
        }
    }
    return {};
}

template <class T>
std::string pair_error(const FieldShard<T>& truth, const FieldShard<T>& prediction, const Box& box) {
    if (truth.channels != prediction.channels || truth.values.size() != prediction.values.size()) {
        return "truth (" + std::to_string(truth.values.size()) + " values, " + std::to_string(truth.channels) +
               " channels) and prediction (" + std::to_string(prediction.values.size()) + " values, " +
               std::to_string(prediction.channels) + " channels) must have the same shape";
    }
    return first_error({shard_error(truth, box, "truth"), shard_error(prediction, box, "prediction")});
}

// `terms` and the weight terms `policy` needs: under propagate every point of non-zero weight counts, so
// the weights of the valid points are the total weight and are not formed again (but those of the own-points
// gradient terms, whose rule leaves NaN out: own_gradient_policy).
inline TermSet weight_and(ValidityPolicy policy, TermSet terms) {
    if (policy != ValidityPolicy::propagate) {
        if (terms.needs_point_values()) {
            terms = terms.with(Term::weight);
        }
        if (terms.contains(Term::truth_gradient) || terms.contains(Term::prediction_gradient)) {
            terms = terms.with(Term::gradient_weight);
        }
    }
    if (own_gradient_policy(policy) == ValidityPolicy::propagate) {
        return terms;
    }
    if (terms.contains(Term::truth_own_gradient)) {
        terms = terms.with(Term::truth_own_gradient_weight);
    }
    return terms.contains(Term::prediction_own_gradient) ? terms.with(Term::prediction_own_gradient_weight) : terms;
}

// Collective over `spatial`: raises `local_error` (or a channel count that differs between ranks) on
// every rank alike, before any partial sums are formed.
inline void check_arguments(const ShardedGrid& grid, const std::string& local_error, std::int64_t channels) {
    agree_or_throw(grid.mesh().spatial(), local_error, {channels}, "channels");
}

// Collective over `spatial`: one allreduce of `sums` (laid out by form_terms), then
// the total-weight check, which every rank sees alike.
inline TermSums merge_terms(PartialSums sums, const ShardedGrid& grid, TermSet terms, std::int64_t channels,
                            const Communicator* also_over = nullptr, std::string_view weights_name = "weights") {
    sums.allreduce(grid.mesh().spatial());
    if (also_over != nullptr) {
        sums.allreduce(*also_over);  // exact sums: the same bits however the points were shared
    }
    const double total = sums.value(0);
    if (!(total > 0.0)) {
        throw ArgumentError(std::string(weights_name) + ": the total weight over the grid must be > 0, got " +
                            std::to_string(total));
    }
    return TermSums(std::make_shared<const PartialSums>(std::move(sums)), terms, channels, true);
}

// The terms of `request` for one field (`prediction` null) or a pair, over the grid. Collective over
// `spatial`: one argument check (with `extra_error`, and the halo exchange's own arguments folded in), the
// halo exchange when a gradient term is asked for (both fields in one message per neighbour), one
// allreduce of the sums, then the total-weight check.
//
// With `also_over` (the data group, for ensembles split over it), the sums are merged over that group too.
template <class T>
TermSums accumulate_terms(const ShardedGrid& grid, FieldShard<T> truth, const FieldShard<T>* prediction, Weights a,
                          const TermRequest& request, const GradientOptions* gradient = nullptr,
                          const std::string& extra_error = {}, const Communicator* also_over = nullptr) {
    const Box& box = grid.box();
    const RowWeights weights(a, box);
    std::string error = first_error(
        {extra_error, prediction != nullptr ? pair_error(truth, *prediction, box) : shard_error(truth, box, "x"),
         weights.error()});
    if (error.empty() && gradient != nullptr) {
        error = gradient_options_error(*gradient, box.lat.size());
    }
    std::vector<std::span<const T>> fields{truth.values};
    if (prediction != nullptr) {
        fields.push_back(prediction->values);
    }
    const bool exchange = request.terms.needs_gradient();
    std::optional<HaloBuffers<T>> halo;
    if (exchange) {
        check_gradient_grid(grid.grid());                                   // the global grid: alike on every rank
        const HaloExchange& plan = grid.halo_plan(gradient->periodic_lon);  // likewise
        halo.emplace(
            plan.make_buffers<T>(std::max<std::int64_t>(truth.channels, 0) * static_cast<std::int64_t>(fields.size())));
        if (error.empty()) {
            error = plan.argument_error<T>(fields, *halo);
        }
    }
    check_arguments(grid, error, truth.channels);
    if (exchange) {
        grid.halo_plan(gradient->periodic_lon).exchange_agreed<T>(fields, *halo);
    }
    const ShardInputs<T> inputs{truth.values.data(), prediction != nullptr ? prediction->values.data() : nullptr,
                                truth.channels, halo ? &*halo : nullptr, gradient};
    return merge_terms(form_terms(grid.grid(), box, inputs, weights, request), grid, request.terms, truth.channels,
                       also_over, request.weights_name);
}

// One finalizer applied to every channel.
template <class F>
std::vector<double> per_channel(const TermSums& sums, F finalize) {
    std::vector<double> result(static_cast<std::size_t>(sums.groups()));
    for (std::int64_t c = 0; c < sums.groups(); ++c) {
        result[static_cast<std::size_t>(c)] = finalize(c);
    }
    return result;
}

}  // namespace gridshard::detail
