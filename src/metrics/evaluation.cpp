#include "gridshard/metrics/evaluation.hpp"

#include <optional>
#include <utility>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "metric_support.hpp"
#include "zonal_sums.hpp"

namespace gridshard {

Evaluator::Evaluator(const ShardedGrid& grid, std::int64_t channels, Weights weights, EvaluationOptions options)
    : grid_(grid),
      channels_(channels),
      weight_values_(weights.values.begin(), weights.values.end()),
      weights_{weight_values_, weights.per_point},
      options_(std::move(options)) {
    // A bad channel count is raised by evaluate(), in its collective check, so every rank raises it.
    if (channels < 1) {
        construction_error_ = "Evaluator: channels must be >= 1, got " + std::to_string(channels);
        channels_ = 1;
    }
    if (options_.gradient) {
        detail::check_gradient_grid(grid.grid());
        (void)grid.halo_plan(options_.gradient_options.periodic_lon);  // raises now, alike on every rank
    }
    // The terms the registered scores need, and the weights of the points the policy counts.
    for (const ScoreDefinition& d : options_.scores) {
        for (int t = 0; t < term_count; ++t) {
            const auto term = static_cast<Term>(t);
            if (d.terms.contains(term) && (options_.gradient || !TermSet{term}.needs_gradient())) {
                terms_ = terms_.with(term);
            }
        }
    }
    terms_ = detail::weight_and(options_.policy, terms_);
}

template <>
HaloBuffers<float>& Evaluator::halo_buffers<float>() {
    if (!float_halo_) {
        float_halo_ = grid_.halo_plan(options_.gradient_options.periodic_lon).make_buffers<float>(2 * channels_);
    }
    return *float_halo_;
}

template <>
HaloBuffers<double>& Evaluator::halo_buffers<double>() {
    if (!double_halo_) {
        double_halo_ = grid_.halo_plan(options_.gradient_options.periodic_lon).make_buffers<double>(2 * channels_);
    }
    return *double_halo_;
}

template <class T>
Scores Evaluator::evaluate(FieldShard<T> truth, FieldShard<T> prediction) {
    return evaluate_rows(truth, prediction, nullptr);
}

template <class T>
ScoresAndZonalMeans Evaluator::evaluate_with_zonal_means(FieldShard<T> truth, FieldShard<T> prediction) {
    const Box& box = grid_.box();
    const bool exact = options_.summation == Summation::reproducible;
    std::vector<detail::RowValueSums> row_sums(exact ? static_cast<std::size_t>(channels_ * box.lat.size()) : 0);
    ScoresAndZonalMeans out{evaluate_rows(truth, prediction, exact ? row_sums.data() : nullptr), {}, {}};
    const double started = MPI_Wtime();
    std::vector<std::vector<double>> means =
        detail::zonal_means_with_row_sums(grid_, truth, prediction, options_.summation, row_sums);
    out.truth_zonal_means = std::move(means[0]);
    out.prediction_zonal_means = std::move(means[1]);
    timings_.zonal_s += MPI_Wtime() - started;
    return out;
}

template <class T>
Scores Evaluator::evaluate_rows(FieldShard<T> truth, FieldShard<T> prediction, detail::RowValueSums* row_sums) {
    const Box& box = grid_.box();
    const detail::RowWeights weights(weights_, box);
    std::string error = construction_error_.empty() ? weights.error() : construction_error_;
    for (const auto* field : {&truth, &prediction}) {
        if (error.empty() && field->channels != channels_) {
            error = "evaluate: fields have " + std::to_string(field->channels) + " channels, the Evaluator " +
                    std::to_string(channels_);
        }
        if (error.empty()) {
            error = detail::shard_error(*field, box, field == &truth ? "truth" : "prediction");
        }
    }
    if (error.empty() && options_.gradient) {
        error = detail::gradient_options_error(options_.gradient_options, box.lat.size());
    }
    // One agreement for this call's arguments and the halo exchange's (folded in).
    const std::span<const T> fields[] = {truth.values, prediction.values};
    HaloBuffers<T>* halo = terms_.needs_gradient() ? &halo_buffers<T>() : nullptr;
    const HaloExchange* plan = halo != nullptr ? &grid_.halo_plan(options_.gradient_options.periodic_lon) : nullptr;
    if (error.empty() && plan != nullptr) {
        error = plan->argument_error<T>(fields, *halo);
    }
    const double started = MPI_Wtime();
    detail::agree_or_throw(grid_.mesh().spatial(), error, {channels_}, "channels");
    const double agreed = MPI_Wtime();
    if (plan != nullptr) {
        plan->exchange_agreed<T>(fields, *halo);
    }
    const double exchanged = MPI_Wtime();

    const detail::ShardInputs<T> inputs{truth.values.data(), prediction.values.data(), channels_, halo,
                                        &options_.gradient_options};
    const detail::TermRequest request{terms_, options_.policy, options_.summation};
    detail::PartialSums partial = detail::form_terms(grid_.grid(), box, inputs, weights, request, row_sums);
    const double formed_at = MPI_Wtime();
    const TermSums sums = detail::merge_terms(std::move(partial), grid_, terms_, channels_);
    std::vector<std::string> names;
    for (const ScoreDefinition& d : options_.scores) {
        names.push_back(d.name);
    }
    Scores scores(std::move(names), channels_);
    for (std::int64_t c = 0; c < channels_; ++c) {
        for (std::size_t k = 0; k < options_.scores.size(); ++k) {  // by position: a definition may repeat
            const ScoreDefinition& d = options_.scores[k];
            const bool formed = !d.terms.needs_gradient() || terms_.needs_gradient();  // gradient off: NaN
            scores.at(k)[static_cast<std::size_t>(c)] = formed ? d.finalize(sums, c) : detail::nan;
        }
    }
    const double finished = MPI_Wtime();
    timings_.agreement_s += agreed - started;
    timings_.halo_s += exchanged - agreed;
    timings_.compute_s += formed_at - exchanged;
    timings_.allreduce_s += finished - formed_at;
    ++timings_.calls;
    return scores;
}

template Scores Evaluator::evaluate<float>(FieldShard<float>, FieldShard<float>);
template Scores Evaluator::evaluate<double>(FieldShard<double>, FieldShard<double>);
template ScoresAndZonalMeans Evaluator::evaluate_with_zonal_means<float>(FieldShard<float>, FieldShard<float>);
template ScoresAndZonalMeans Evaluator::evaluate_with_zonal_means<double>(FieldShard<double>, FieldShard<double>);

}  // namespace gridshard
