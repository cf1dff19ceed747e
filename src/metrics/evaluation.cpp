#include "gridshard/metrics/evaluation.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "row_kernels.hpp"
#include "threads.hpp"

namespace gridshard {
namespace {

// The sums of one channel (EvaluationSums::Term), after the shared total-weight slot 0.
using Term = EvaluationSums::Term;
constexpr std::int64_t term_count = EvaluationSums::term_count;

constexpr std::int64_t slot(std::int64_t c, Term term) {
    return 1 + c * term_count + static_cast<std::int64_t>(term);
}

// One row of scratch per row quantity.
enum Row : int {
    masked_truth,
    masked_prediction,
    truth_square,
    prediction_square,
    difference_square,
    valid_points,
    truth_magnitude,
    prediction_magnitude,
    truth_magnitude_weight,
    prediction_magnitude_weight,
    row_count,
};

// The per-point terms of one row into the scratch rows; returns how many points are valid (finite in
// both fields, and of non-zero weight). With per-point weights every term is weighted here and the
// weights of the valid points are stored; with per-row weights the row's weight multiplies the sums
// later and the valid points are only counted. Pointers are hoisted and marked unaliased so it vectorises.
template <bool per_point, class T>
std::int64_t fill_point_terms(const T* truth, const T* prediction, const double* weights, std::int64_t n,
                              detail::Scratch& rows) {
    double* __restrict out_truth = rows[masked_truth];
    double* __restrict out_prediction = rows[masked_prediction];
    double* __restrict out_truth_square = rows[truth_square];
    double* __restrict out_prediction_square = rows[prediction_square];
    double* __restrict out_difference_square = rows[difference_square];
    double* __restrict out_weight = rows[valid_points];
    std::int64_t valid_count = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double a = per_point ? weights[j] : 1.0;
        const double tv = static_cast<double>(truth[j]);
        const double pv = static_cast<double>(prediction[j]);
        const bool valid = ((tv - tv) == 0.0) & ((pv - pv) == 0.0) & (a != 0.0);  // finite in both
        const double mt = valid ? tv : 0.0;
        const double mp = valid ? pv : 0.0;
        const double d = mp - mt;
        out_truth[j] = a * mt;
        out_prediction[j] = a * mp;
        out_truth_square[j] = a * (mt * mt);
        out_prediction_square[j] = a * (mp * mp);
        out_difference_square[j] = a * (d * d);
        if constexpr (per_point) {
            out_weight[j] = valid ? a : 0.0;
        }
        valid_count += valid ? 1 : 0;
    }
    return valid_count;
}

// Masks and weights the gradient magnitudes of one row in place (NaN where a neighbour is NaN); returns
// how many points of truth and of prediction have a magnitude.
template <bool per_point>
std::pair<std::int64_t, std::int64_t> fill_gradient_terms(const double* weights, std::int64_t n,
                                                          detail::Scratch& rows) {
    double* __restrict truth = rows[truth_magnitude];
    double* __restrict prediction = rows[prediction_magnitude];
    double* __restrict truth_weight = rows[truth_magnitude_weight];
    double* __restrict prediction_weight = rows[prediction_magnitude_weight];
    std::int64_t truth_count = 0;
    std::int64_t prediction_count = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double a = per_point ? weights[j] : 1.0;
        const double gt = truth[j];
        const double gp = prediction[j];
        const bool truth_ok = (gt == gt) & (a != 0.0);
        const bool prediction_ok = (gp == gp) & (a != 0.0);
        truth[j] = truth_ok ? a * gt : 0.0;
        prediction[j] = prediction_ok ? a * gp : 0.0;
        if constexpr (per_point) {
            truth_weight[j] = truth_ok ? a : 0.0;
            prediction_weight[j] = prediction_ok ? a : 0.0;
        }
        truth_count += truth_ok ? 1 : 0;
        prediction_count += prediction_ok ? 1 : 0;
    }
    return {truth_count, prediction_count};
}

// Adds the weight of a row's valid points: the stored weights (per point) or count x row weight.
void add_weight(detail::PartialSums& sums, std::int64_t slot_index, const double* stored, std::int64_t n, double factor,
                const double* point_weights, std::int64_t count) {
    if (point_weights != nullptr) {
        sums.add_row(slot_index, stored, n, factor);
    } else {
        sums.add_count(slot_index, factor, count);
    }
}

}  // namespace

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
    if (options.gradient) {
        detail::check_gradient_grid(grid.grid());
        (void)grid.halo_plan(options.gradient_options.periodic_lon);  // raises now, alike on every rank
    }
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
    const Box& box = grid_.box();
    const std::int64_t cols = box.lon.size();
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
    detail::agree_or_throw(grid_.mesh().spatial(), error, {channels_}, "channels");
    HaloBuffers<T>* halo = nullptr;
    if (options_.gradient) {
        halo = &halo_buffers<T>();
        const std::span<const T> fields[] = {truth.values, prediction.values};
        grid_.halo_plan(options_.gradient_options.periodic_lon)
            .execute(std::span<const std::span<const T>>(fields), *halo);
    }

    // The (channel, row) pairs are shared between the threads; each forms its own exact partial sums,
    // merged exactly below, so the scores are the same bits for any number of threads.
    const std::int64_t rows_per_channel = box.lat.size();
    const std::int64_t items = channels_ * rows_per_channel;
    const int threads = detail::threads_for(items);
    std::vector<detail::PartialSums> partial(static_cast<std::size_t>(threads),
                                             detail::PartialSums(1 + channels_ * term_count, options_.summation));
    std::optional<detail::GradientRows<T>> truth_gradient_rows;
    std::optional<detail::GradientRows<T>> prediction_gradient_rows;
    if (halo != nullptr) {
        truth_gradient_rows.emplace(grid_.grid(), box, options_.gradient_options, truth.values, channels_, *halo, 0);
        prediction_gradient_rows.emplace(grid_.grid(), box, options_.gradient_options, prediction.values, channels_,
                                         *halo, 1);
    }
    GRIDSHARD_PRAGMA(omp parallel num_threads(threads) if (threads > 1)) {
        detail::PartialSums& sums = partial[static_cast<std::size_t>(detail::thread_index())];
        detail::Scratch rows(cols, row_count);
        GRIDSHARD_PRAGMA(omp for schedule(static))
        for (std::int64_t item = 0; item < items; ++item) {
            const std::int64_t c = item / rows_per_channel;
            const std::int64_t i = item % rows_per_channel;
            const T* t = truth.values.data() + (c * box.lat.size() + i) * cols;
            const T* p = prediction.values.data() + (c * box.lat.size() + i) * cols;
            // Per-row weights multiply whole row sums; per-point weights multiply each value here.
            const double* point_weights = weights.per_point() ? weights.points(i) : nullptr;
            const double factor = weights.per_point() ? 1.0 : weights.row(i);
            if (factor == 0.0) {
                continue;  // NaNs under zero weight vanish
            }
            const std::int64_t valid = point_weights != nullptr
                                           ? fill_point_terms<true>(t, p, point_weights, cols, rows)
                                           : fill_point_terms<false>(t, p, point_weights, cols, rows);
            add_weight(sums, slot(c, Term::valid_weight), rows[valid_points], cols, factor, point_weights, valid);
            sums.add_row(slot(c, Term::truth_sum), rows[masked_truth], cols, factor);
            sums.add_row(slot(c, Term::prediction_sum), rows[masked_prediction], cols, factor);
            sums.add_row(slot(c, Term::truth_squares), rows[truth_square], cols, factor);
            sums.add_row(slot(c, Term::prediction_squares), rows[prediction_square], cols, factor);
            sums.add_row(slot(c, Term::difference_squares), rows[difference_square], cols, factor);
            if (halo == nullptr) {
                continue;
            }
            truth_gradient_rows->row(c, i, rows[truth_magnitude]);
            prediction_gradient_rows->row(c, i, rows[prediction_magnitude]);
            const auto [truth_valid, prediction_valid] = point_weights != nullptr
                                                             ? fill_gradient_terms<true>(point_weights, cols, rows)
                                                             : fill_gradient_terms<false>(point_weights, cols, rows);
            sums.add_row(slot(c, Term::truth_gradient), rows[truth_magnitude], cols, factor);
            add_weight(sums, slot(c, Term::truth_gradient_weight), rows[truth_magnitude_weight], cols, factor,
                       point_weights, truth_valid);
            sums.add_row(slot(c, Term::prediction_gradient), rows[prediction_magnitude], cols, factor);
            add_weight(sums, slot(c, Term::prediction_gradient_weight), rows[prediction_magnitude_weight], cols, factor,
                       point_weights, prediction_valid);
        }
    }
    detail::PartialSums& sums = partial.front();
    for (std::size_t k = 1; k < partial.size(); ++k) {
        sums.merge(partial[k]);
    }
    weights.add_total(sums, 0);
    sums.allreduce(grid_.mesh().spatial());
    if (!(sums.value(0) > 0.0)) {
        throw ArgumentError("the total weight over the grid must be > 0, got " + std::to_string(sums.value(0)));
    }

    std::vector<std::string> names;
    for (const ScoreDefinition& d : options_.scores) {
        names.push_back(d.name);
    }
    Scores scores(std::move(names), channels_);
    for (std::int64_t c = 0; c < channels_; ++c) {
        const EvaluationSums channel(sums, slot(c, Term::valid_weight), halo != nullptr);
        for (std::size_t k = 0; k < options_.scores.size(); ++k) {
            scores[options_.scores[k].name][static_cast<std::size_t>(c)] = options_.scores[k].finalize(channel);
        }
    }
    return scores;
}

template Scores Evaluator::evaluate<float>(FieldShard<float>, FieldShard<float>);
template Scores Evaluator::evaluate<double>(FieldShard<double>, FieldShard<double>);

}  // namespace gridshard
