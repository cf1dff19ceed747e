// ACE's IPO tripole index in the Aggregator (AggregatorOptions::tripole_index): per counted pair the NaN-skipping
// means of the truth and members in the three tripole boxes, and at finish per sample the monthly index
// T2 - (T1 + T3) / 2 and the spread of its low-pass filtered form.

#include <cmath>

#include "gridshard/comm/collectives.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {
namespace {

/// fme's IPO index: its filter's cutoff (years) and the months a run needs before its filtered index is formed
/// (MIN_YEARS_FOR_FILTERED_TPI).
constexpr double tripole_cutoff_years = 13.0;
constexpr std::int64_t tripole_min_months = 80 * 12;

}  // namespace

template <class T>
void Aggregator::record_tripole(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                                std::span<const T> members, bool with_truth) {
    const std::int64_t fields = stack_for_index<T>(truth, members, with_truth);
    if (fields == 0) {
        return;  // every rank of the spatial group alike: the same share
    }
    for (std::int64_t box = 0; box < 3; ++box) {  // ACE's NaN-aware regional means (collective over spatial, each)
        const std::vector<double> means = weighted_nanmean<double>(
            grid_, {index_stacked_, shape_.channels * fields},
            options_.tripole_index->weights[static_cast<std::size_t>(box)].view(), options_.summation);
        store_index_means(means, initial_condition, lead, with_truth, tripole_prediction_values_, tripole_truth_values_,
                          3, box);
    }
}

void Aggregator::finish_tripole(VariableScores& out) {
    reduce_sum<double>(grid_.mesh(), tripole_prediction_values_);  // collective over data: each value written once
    reduce_sum<double>(grid_.mesh(), tripole_truth_values_);
    for (std::int64_t c = 0; c < shape_.channels; ++c) {
        // ACE's monthly anomalies of each box (a running mean of one month), then T2 - (T1 + T3) / 2
        std::pair<MonthlyIndex, MonthlyIndex> boxes[3];
        for (std::int64_t box = 0; box < 3; ++box) {
            boxes[box] = monthly_indices(c, 3, box, 1);
        }
        MonthlyIndex prediction = boxes[1].first, truth = boxes[1].second;
        for (std::size_t k = 0; k < prediction.values.size(); ++k) {
            prediction.values[k] -= 0.5 * (boxes[0].first.values[k] + boxes[2].first.values[k]);
            truth.values[k] -= 0.5 * (boxes[0].second.values[k] + boxes[2].second.values[k]);
        }
        // ACE's summaries where its logs have them: two months at least, and every sample's filtered index
        const auto gen = low_pass_filtered(prediction, tripole_cutoff_years, tripole_min_months);
        const auto target = low_pass_filtered(truth, tripole_cutoff_years, tripole_min_months);
        if (prediction.years.size() >= 2 && gen && target) {
            for (const RegisteredScore* s : scores_) {
                if (const auto* value = std::get_if<TripoleValue>(&s->source)) {
                    out[static_cast<std::size_t>(c)].regions.front().time_means.push_back(
                        {s, *value == TripoleValue::std ? index_std(*gen) : index_std(*gen, &*target)});
                }
            }
        }
        out[static_cast<std::size_t>(c)].tripole_prediction = std::move(prediction);
        out[static_cast<std::size_t>(c)].tripole_truth = std::move(truth);
    }
}

template void Aggregator::record_tripole<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                                bool);
template void Aggregator::record_tripole<double>(std::int64_t, std::int64_t, FieldShard<double>,
                                                 std::span<const double>, bool);

}  // namespace gridshard
