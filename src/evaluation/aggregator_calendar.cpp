// ACE's calendar means in the Aggregator: the pairs' valid times (record_time, shared with the trend), the annual
// means (fme's PairedGlobalMeanAnnualAggregator) from the per-sample global means the deterministic slots already
// hold, and the seasonal means (fme's SeasonalAggregator), per season exact sums of the fields.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/ensemble.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {
namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

/// ACE's MIN_COMPLETE_YEAR_DAYS (fme's annual.py): a year is kept when it holds more steps than this many days'.
constexpr double min_complete_year_days = 350.0;

/// A valid time's year and month as one ordered integer (none: the pair has no time), and back.
constexpr std::int64_t no_month = std::numeric_limits<std::int64_t>::min();
std::int64_t month_key(const ValidTime& t) {
    return std::isnan(t.seconds) ? no_month : t.year * 12 + (t.month - 1);
}
void set_month(ValidTime& t, std::int64_t key) {
    const std::int64_t year = key >= 0 ? key / 12 : -((-key + 11) / 12);  // floor division
    t.year = year;
    t.month = static_cast<int>(key - 12 * year) + 1;
}

/// The mean of the values that are not NaN, in order (xarray's mean over samples, skipna); NaN when none.
double nan_mean(std::span<const double> values) {
    ExactSum sum;
    std::int64_t kept = 0;
    for (const double v : values) {
        if (!std::isnan(v)) {
            sum.add(v);
            ++kept;
        }
    }
    return kept == 0 ? not_a_number : sum.to_double() / static_cast<double>(kept);
}

/// ACE's get_r2 of `series` against `reference` (per year): over the years where neither is NaN, 1 - sum((x - r)^2) /
/// sum((r - mean r)^2), each sum exact; NaN without such a year.
double r_squared(std::span<const double> series, std::span<const double> reference) {
    const auto valid = [&](std::size_t y) { return !std::isnan(series[y]) && !std::isnan(reference[y]); };
    ExactSum sum;
    std::int64_t kept = 0;
    for (std::size_t y = 0; y < series.size(); ++y) {
        if (valid(y)) {
            sum.add(reference[y]);
            ++kept;
        }
    }
    const double mean = kept == 0 ? not_a_number : sum.to_double() / static_cast<double>(kept);
    ExactSum spread, error;
    for (std::size_t y = 0; y < series.size(); ++y) {
        if (valid(y)) {
            const double d = reference[y] - mean;
            const double e = series[y] - reference[y];
            spread.add(d * d);
            error.add(e * e);
        }
    }
    return 1.0 - error.to_double() / spread.to_double();
}

}  // namespace

template <class T>
void Aggregator::set_annual_reference(std::span<const T> values, std::int64_t samples, std::span<const double> counts,
                                      std::span<const std::int64_t> years) {
    const std::int64_t channels = shape_.channels;
    const auto times = static_cast<std::int64_t>(years.size());
    const Box& box = grid_.box();
    const Communicator& world = grid_.mesh().world();
    check_collectively(
        world, attempt([&] {
            const std::string what = setting_name("annual") + ": the reference data";
            if (!options_.annual) {
                throw ArgumentError(what + " of an aggregator without annual means");
            }
            if (samples < 1 || times < 1) {
                throw ArgumentError(what + " has " + std::to_string(samples) + " samples and " + std::to_string(times) +
                                    " times (at least one of each)");
            }
            if (static_cast<std::int64_t>(values.size()) != channels * samples * times * box.area() ||
                static_cast<std::int64_t>(counts.size()) != samples * times) {
                throw ArgumentError(what + ": " + std::to_string(values.size()) + " values and " +
                                    std::to_string(counts.size()) + " counts for " + std::to_string(samples) +
                                    " samples and " + std::to_string(times) + " times of this rank's box of " +
                                    std::to_string(box.lat.size()) + " x " + std::to_string(box.lon.size()));
            }
            for (const double count : counts) {
                if (!(std::isfinite(count) && count >= 0.0)) {
                    throw ArgumentError(what + ": its counts must be finite and >= 0, got " + std::to_string(count));
                }
            }
        }));
    agree_or_throw(world, "", {samples, times}, "the annual reference data's samples and times");
    // Per (channel, sample, time) the global mean: one allreduce over the spatial group.
    const std::vector<double> means =
        masked_weighted_mean<T>(grid_, FieldShard<T>{values, channels * samples * times},
                                regions_.front().weights.view(), options_.policy, options_.summation);
    reference_years_.assign(years.begin(), years.end());
    std::sort(reference_years_.begin(), reference_years_.end());
    reference_years_.erase(std::unique(reference_years_.begin(), reference_years_.end()), reference_years_.end());
    const auto nyears = static_cast<std::int64_t>(reference_years_.size());
    reference_means_.assign(static_cast<std::size_t>(channels * nyears), not_a_number);
    std::vector<std::int64_t> year_of(static_cast<std::size_t>(times));
    for (std::int64_t t = 0; t < times; ++t) {
        year_of[static_cast<std::size_t>(t)] =
            std::lower_bound(reference_years_.begin(), reference_years_.end(), years[static_cast<std::size_t>(t)]) -
            reference_years_.begin();
    }
    std::vector<double> yearly(static_cast<std::size_t>(samples * nyears));
    std::vector<double> column(static_cast<std::size_t>(samples));
    for (std::int64_t c = 0; c < channels; ++c) {
        // ACE's count-weighted yearly means of each sample: sum(mean * count) / sum(count) per year
        for (std::int64_t s = 0; s < samples; ++s) {
            std::vector<ExactSum> weighted(static_cast<std::size_t>(nyears)), total(static_cast<std::size_t>(nyears));
            for (std::int64_t t = 0; t < times; ++t) {
                const double count = counts[static_cast<std::size_t>(s * times + t)];
                const auto y = static_cast<std::size_t>(year_of[static_cast<std::size_t>(t)]);
                weighted[y].add(means[static_cast<std::size_t>((c * samples + s) * times + t)] * count);
                total[y].add(count);
            }
            for (std::int64_t y = 0; y < nyears; ++y) {
                yearly[static_cast<std::size_t>(s * nyears + y)] =
                    weighted[static_cast<std::size_t>(y)].to_double() / total[static_cast<std::size_t>(y)].to_double();
            }
        }
        for (std::int64_t y = 0; y < nyears; ++y) {  // their mean over the samples (VariableReferenceData.mean)
            for (std::int64_t s = 0; s < samples; ++s) {
                column[static_cast<std::size_t>(s)] = yearly[static_cast<std::size_t>(s * nyears + y)];
            }
            reference_means_[static_cast<std::size_t>(c * nyears + y)] = nan_mean(column);
        }
    }
}

void Aggregator::check_annual(AggregatorOptions& options) {
    if (!options.annual) {
        return;
    }
    if (options.report != ReportKind::forecast ||
        !(std::isfinite(options.annual->timestep_seconds) && options.annual->timestep_seconds > 0.0)) {
        throw ArgumentError(setting_name("annual") +
                            ": the annual means need a forecast report and a timestep above 0 seconds, got " +
                            std::to_string(options.annual->timestep_seconds));
    }
    std::vector<std::string>& keep = options.deterministic_keys;
    for (const char* key : {"weighted_mean_gen", "weighted_mean_target"}) {  // the annual means' per-sample values
        if (!keep.empty() && std::find(keep.begin(), keep.end(), key) == keep.end()) {
            keep.emplace_back(key);
        }
    }
}

void Aggregator::record_time(std::int64_t initial_condition, std::int64_t lead, ValidTime time) {
    const ForecastExtent& e = shape_.extent;
    if (!needs_times()) {
        throw ArgumentError("record_time: the aggregator forms no trend, annual or seasonal means (" +
                            setting_name("trend") + ", " + setting_name("annual") + ", " + setting_name("seasonal") +
                            ")");
    }
    if (initial_condition < 0 || initial_condition >= e.initial_conditions || lead < 0 || lead >= e.lead_times) {
        throw ArgumentError("record_time: (initial condition " + std::to_string(initial_condition) + ", lead " +
                            std::to_string(lead) + ") is outside " + std::to_string(e.initial_conditions) + " x " +
                            std::to_string(e.lead_times));
    }
    if (!std::isfinite(time.seconds) || time.month < 1 || time.month > 12) {
        throw ArgumentError("record_time: the valid time of initial condition " + std::to_string(initial_condition) +
                            ", lead " + std::to_string(lead) + " is not a time: " + std::to_string(time.seconds) +
                            " seconds, month " + std::to_string(time.month));
    }
    pair_times_[static_cast<std::size_t>(initial_condition * e.lead_times + lead)] = time;
}

const ValidTime& Aggregator::time_of(std::int64_t initial_condition, std::int64_t lead,
                                     const std::string& setting) const {
    const ValidTime& t = pair_times_[static_cast<std::size_t>(initial_condition * shape_.extent.lead_times + lead)];
    if (std::isnan(t.seconds)) {
        throw ArgumentError(setting_name(setting) + ": no valid time was given for initial condition " +
                            std::to_string(initial_condition) + ", lead " + std::to_string(lead) +
                            " (record_time, before the pair)");
    }
    return t;
}

void Aggregator::merge_times_over_data() {
    // Each pair's time was given on the ranks that recorded it (several data ranks when the members are split, all
    // alike): the maximum over the data group is that time, on every rank.
    std::vector<double> seconds(pair_times_.size());
    std::vector<std::int64_t> months(pair_times_.size());
    for (std::size_t k = 0; k < pair_times_.size(); ++k) {
        const bool given = !std::isnan(pair_times_[k].seconds);
        seconds[k] = given ? pair_times_[k].seconds : -std::numeric_limits<double>::infinity();
        months[k] = month_key(pair_times_[k]);
    }
    reduce_max<double>(grid_.mesh(), seconds);
    reduce_max<std::int64_t>(grid_.mesh(), months);
    for (std::size_t k = 0; k < pair_times_.size(); ++k) {
        if (months[k] == no_month) {
            pair_times_[k] = ValidTime{};
            continue;
        }
        pair_times_[k].seconds = seconds[k];
        set_month(pair_times_[k], months[k]);
    }
}

void Aggregator::finish_seasonal(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    const Weights a = regions_.front().weights.view();
    std::vector<std::vector<double>> mean_squares;
    bool every_season = true;
    for (std::size_t season = 0; season < season_names.size(); ++season) {
        seasonal_prediction_[season].merge_over_data();  // collective over data: every counted pair added once
        seasonal_truth_[season].merge_over_data();
        every_season = every_season && seasonal_prediction_[season].steps() > 0 && seasonal_truth_[season].steps() > 0;
        const std::vector<double> gen = seasonal_prediction_[season].mean_difference(options_.policy);
        const std::vector<double> target = seasonal_truth_[season].mean_difference(options_.policy);
        std::vector<double> bias(gen.size());
        for (std::size_t k = 0; k < gen.size(); ++k) {
            bias[k] = gen[k] - target[k];
        }
        // ACE's area mean of the squared bias of the seasonal means (collective over spatial)
        mean_squares.push_back(mean_square(grid_, std::move(bias), channels, a, options_.policy, options_.summation));
        for (auto [map, field] : {std::pair{&gen, &ChannelScores::seasonal_prediction},
                                  std::pair{&target, &ChannelScores::seasonal_truth}}) {
            std::vector<std::vector<double>> maps = held_maps(*map);  // one gather over the world
            for (std::int64_t c = 0; c < channels; ++c) {
                std::vector<double>& held = out[static_cast<std::size_t>(c)].*field;
                held.insert(held.end(), maps[static_cast<std::size_t>(c)].begin(),
                            maps[static_cast<std::size_t>(c)].end());
            }
        }
    }
    for (std::int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<std::size_t>(c);
        out[k].has_seasonal = true;
        // A season without a counted step has no mean: its RMSE and the one over the seasons are NaN.
        double sum = 0.0;
        for (const std::vector<double>& m : mean_squares) {
            sum += m[k];
        }
        for (const RegisteredScore* s : scores_) {
            const auto* value = std::get_if<SeasonalValue>(&s->source);
            if (value == nullptr) {
                continue;
            }
            const double mse = *value == SeasonalValue::rmse ? sum / static_cast<double>(mean_squares.size())
                                                             : mean_squares[static_cast<std::size_t>(*value)][k];
            out[k].regions.front().time_means.push_back({s, every_season ? std::sqrt(mse) : not_a_number});
        }
    }
}

std::vector<double> Aggregator::reference_of(std::int64_t channel, const std::vector<std::int64_t>& years) const {
    if (reference_years_.empty()) {
        return {};
    }
    const auto nyears = static_cast<std::int64_t>(reference_years_.size());
    std::vector<double> out;
    for (const std::int64_t year : years) {
        const auto at = std::lower_bound(reference_years_.begin(), reference_years_.end(), year);
        if (at == reference_years_.end() || *at != year) {  // ACE's reference.sel(year=...) raises alike
            throw ArgumentError(setting_name("annual") + ": the reference data has no year " + std::to_string(year) +
                                " (it has " + std::to_string(reference_years_.front()) + " to " +
                                std::to_string(reference_years_.back()) + "); ACE's R2 needs every year of the run");
        }
        out.push_back(reference_means_[static_cast<std::size_t>(channel * nyears + (at - reference_years_.begin()))]);
    }
    return out;
}

void Aggregator::finish_annual(VariableScores& out) const {
    const ForecastExtent& e = shape_.extent;
    const std::int64_t channels = shape_.channels;
    const auto slot_of = [&](std::string_view key) {
        const auto at = std::find_if(per_sample_.begin(), per_sample_.end(),
                                     [&](const RegisteredScore* s) { return s->key == key; });
        return static_cast<std::int64_t>(at - per_sample_.begin());
    };
    const std::int64_t gen_slot = slot_of("weighted_mean_gen");
    const std::int64_t truth_slot = slot_of("weighted_mean_target");
    const double min_steps = min_complete_year_days * 86400.0 / options_.annual->timestep_seconds;
    const std::int64_t samples = det_.samples;
    // Per sample and year, the exact sums of the counted steps' global means and their count.
    struct YearSums {
        std::vector<ExactSum> gen, truth;
        std::int64_t steps = 0;
    };
    std::vector<std::map<std::int64_t, YearSums>> by_sample(static_cast<std::size_t>(samples));
    for (std::int64_t s = 0; s < samples; ++s) {
        const std::int64_t ic = s / e.members;
        for (const std::int64_t lead : options_.counted_leads) {
            const ValidTime& t = pair_times_[static_cast<std::size_t>(ic * e.lead_times + lead)];
            if (std::isnan(t.seconds)) {
                continue;  // not recorded anywhere
            }
            YearSums& year = by_sample[static_cast<std::size_t>(s)][t.year];
            year.gen.resize(static_cast<std::size_t>(channels));
            year.truth.resize(static_cast<std::size_t>(channels));
            for (std::int64_t c = 0; c < channels; ++c) {
                year.gen[static_cast<std::size_t>(c)].add(det_values_[det_.at(s, lead, 0, gen_slot, c)]);
                year.truth[static_cast<std::size_t>(c)].add(det_values_[det_.at(s, lead, 0, truth_slot, c)]);
            }
            ++year.steps;
        }
    }
    // ACE keeps a year where some sample has enough steps, then fills the years between with NaN.
    std::int64_t first = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    for (const auto& years : by_sample) {
        for (const auto& [year, sums] : years) {
            if (static_cast<double>(sums.steps) > min_steps) {
                first = std::min(first, year);
                last = std::max(last, year);
            }
        }
    }
    const std::int64_t nyears = first <= last ? last - first + 1 : 0;
    for (std::int64_t c = 0; c < channels; ++c) {
        AnnualMeans means;
        means.samples = samples;
        for (std::int64_t y = 0; y < nyears; ++y) {
            means.years.push_back(first + y);
        }
        const auto size = static_cast<std::size_t>(samples * nyears);
        means.prediction.assign(size, not_a_number);
        means.truth.assign(size, not_a_number);
        means.counts.assign(size, not_a_number);
        for (std::int64_t s = 0; s < samples; ++s) {
            for (const auto& [year, sums] : by_sample[static_cast<std::size_t>(s)]) {
                const double steps = static_cast<double>(sums.steps);
                if (steps > min_steps) {
                    const auto k = static_cast<std::size_t>(s * nyears + (year - first));
                    means.prediction[k] = sums.gen[static_cast<std::size_t>(c)].to_double() / steps;
                    means.truth[k] = sums.truth[static_cast<std::size_t>(c)].to_double() / steps;
                    means.counts[k] = 1.0;  // ACE's counts over themselves
                }
            }
        }
        // ACE's scores over more than one year: the RMSE of the yearly ensemble means (each over the samples that
        // have the year) and the fair CRPS per year of the samples against the truth's ensemble mean, each averaged
        // over the years that are not NaN.
        if (nyears > 1) {
            std::vector<double> column(static_cast<std::size_t>(samples));
            std::vector<double> target_mean(static_cast<std::size_t>(nyears));
            std::vector<double> gen_mean(static_cast<std::size_t>(nyears));
            std::vector<double> squared(static_cast<std::size_t>(nyears));
            for (std::int64_t y = 0; y < nyears; ++y) {
                for (std::int64_t s = 0; s < samples; ++s) {
                    column[static_cast<std::size_t>(s)] = means.truth[static_cast<std::size_t>(s * nyears + y)];
                }
                target_mean[static_cast<std::size_t>(y)] = nan_mean(column);
                for (std::int64_t s = 0; s < samples; ++s) {
                    column[static_cast<std::size_t>(s)] = means.prediction[static_cast<std::size_t>(s * nyears + y)];
                }
                gen_mean[static_cast<std::size_t>(y)] = nan_mean(column);
                const double difference =
                    gen_mean[static_cast<std::size_t>(y)] - target_mean[static_cast<std::size_t>(y)];
                squared[static_cast<std::size_t>(y)] = difference * difference;
            }
            // the samples' yearly means are the members, sample slowest (fair: alpha 1)
            const std::vector<double> crps = almost_fair_crps_of(target_mean, means.prediction, samples, 1.0);
            const std::vector<double> reference = reference_of(c, means.years);  // empty: no reference data
            for (const RegisteredScore* s : scores_) {
                const auto* value = std::get_if<AnnualValue>(&s->source);
                if (value == nullptr ||
                    (reference.empty() && (*value == AnnualValue::r2_target || *value == AnnualValue::r2_gen))) {
                    continue;
                }
                const double v = *value == AnnualValue::rmse        ? std::sqrt(nan_mean(squared))
                                 : *value == AnnualValue::crps      ? nan_mean(crps)
                                 : *value == AnnualValue::r2_target ? r_squared(target_mean, reference)
                                                                    : r_squared(gen_mean, reference);
                out[static_cast<std::size_t>(c)].regions.front().time_means.push_back({s, v});
            }
        }
        out[static_cast<std::size_t>(c)].annual = std::move(means);
    }
}

template <class T>
std::int64_t Aggregator::stack_for_index(FieldShard<T> truth, std::span<const T> members, bool with_truth) {
    index_stacked_.clear();  // the truth (once per initial condition) and the members, as one field of channels
    if (with_truth) {
        index_stacked_.insert(index_stacked_.end(), truth.values.begin(), truth.values.end());
    }
    index_stacked_.insert(index_stacked_.end(), members.begin(), members.end());
    const auto plane = static_cast<std::size_t>(shape_.channels * grid_.box().area());
    return static_cast<std::int64_t>(index_stacked_.size() / plane);
}

void Aggregator::store_index_means(std::span<const double> means, std::int64_t initial_condition, std::int64_t lead,
                                   bool with_truth, std::vector<double>& prediction, std::vector<double>& truth,
                                   std::int64_t boxes, std::int64_t box) const {
    const ForecastExtent& e = shape_.extent;
    const std::int64_t channels = shape_.channels;
    const std::int64_t first_member = with_truth ? 1 : 0;
    const auto fields = static_cast<std::int64_t>(means.size()) / channels;
    for (std::int64_t c = 0; c < channels; ++c) {
        if (with_truth) {
            truth[static_cast<std::size_t>(((initial_condition * e.lead_times + lead) * channels + c) * boxes + box)] =
                means[static_cast<std::size_t>(c)];
        }
        for (std::int64_t m = 0; m + first_member < fields; ++m) {
            const std::int64_t sample = initial_condition * e.members + shape_.work.members.begin + m;
            prediction[static_cast<std::size_t>(((sample * e.lead_times + lead) * channels + c) * boxes + box)] =
                means[static_cast<std::size_t>((first_member + m) * channels + c)];
        }
    }
}

template <class T>
void Aggregator::record_index(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                              std::span<const T> members, bool with_truth) {
    const std::int64_t fields = stack_for_index<T>(truth, members, with_truth);
    if (fields == 0) {
        return;  // every rank of the spatial group alike: the same share
    }
    // ACE's regional means, NaN under a zero weight left out (collective over spatial: one allreduce)
    const std::vector<double> means = weighted_mean<double>(
        grid_, {index_stacked_, shape_.channels * fields}, options_.regional_index->weights.view(), options_.summation);
    store_index_means(means, initial_condition, lead, with_truth, index_prediction_values_, index_truth_values_);
}

std::pair<MonthlyIndex, MonthlyIndex> Aggregator::monthly_indices(std::int64_t channel, std::int64_t boxes,
                                                                  std::int64_t box, std::int64_t running) const {
    const ForecastExtent& e = shape_.extent;
    const std::int64_t channels = shape_.channels;
    const std::vector<double>& prediction_means = boxes == 1 ? index_prediction_values_ : tripole_prediction_values_;
    const std::vector<double>& truth_means = boxes == 1 ? index_truth_values_ : tripole_truth_values_;
    const std::int64_t samples = e.initial_conditions * e.members;
    const auto steps = static_cast<std::int64_t>(options_.counted_leads.size());
    std::vector<std::int64_t> years(static_cast<std::size_t>(samples * steps));
    std::vector<int> months(years.size());
    std::vector<double> gen(years.size()), target(years.size());
    for (std::int64_t s = 0; s < samples; ++s) {
        const std::int64_t ic = s / e.members;
        for (std::int64_t k = 0; k < steps; ++k) {
            const std::int64_t lead = options_.counted_leads[static_cast<std::size_t>(k)];
            const ValidTime& t = pair_times_[static_cast<std::size_t>(ic * e.lead_times + lead)];
            const auto at = static_cast<std::size_t>(s * steps + k);
            years[at] = t.year;
            months[at] = std::isnan(t.seconds) ? 0 : t.month;  // a pair not recorded is not in the series
            gen[at] = prediction_means[static_cast<std::size_t>(
                ((s * e.lead_times + lead) * channels + channel) * boxes + box)];
            target[at] =
                truth_means[static_cast<std::size_t>(((ic * e.lead_times + lead) * channels + channel) * boxes + box)];
        }
    }
    return {monthly_index(gen, years, months, samples, running),
            monthly_index(target, years, months, samples, running)};
}

void Aggregator::finish_index(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    reduce_sum<double>(grid_.mesh(), index_prediction_values_);  // collective over data: each value written once
    reduce_sum<double>(grid_.mesh(), index_truth_values_);
    for (std::int64_t c = 0; c < channels; ++c) {
        auto [prediction, truth] = monthly_indices(c, 1, 0, options_.regional_index->running_months);
        // ACE's summaries, where its logs have them: the spread over more than one month, the band powers where the
        // prediction's index has a value, their ratios where the truth's power is a number other than 0.
        const IndexSpectrum gen_spectrum = index_power_spectrum(prediction);
        const IndexSpectrum target_spectrum = index_power_spectrum(truth);
        const bool spread = prediction.years.size() > 1;
        const bool powered = !gen_spectrum.power.empty();
        for (const RegisteredScore* s : scores_) {
            const auto* value = std::get_if<IndexValue>(&s->source);
            if (value == nullptr) {
                continue;
            }
            const auto band = [&](const IndexSpectrum& spectrum) {
                return *value == IndexValue::power_2_5yr || *value == IndexValue::power_2_5yr_norm
                           ? band_power(spectrum, 2.0, 5.0)
                           : band_power(spectrum, 1.0, 16.0);
            };
            std::optional<double> v;
            if (*value == IndexValue::std && spread) {
                v = index_std(prediction);
            } else if (*value == IndexValue::std_norm && spread) {
                v = index_std(prediction, &truth);
            } else if ((*value == IndexValue::power_2_5yr || *value == IndexValue::power_1_16yr) && powered) {
                v = band(gen_spectrum);
            } else if (powered && (*value == IndexValue::power_2_5yr_norm || *value == IndexValue::power_1_16yr_norm)) {
                const double reference = band(target_spectrum);
                if (reference != 0.0 && !std::isnan(reference)) {
                    v = band(gen_spectrum) / reference;
                }
            }
            if (v) {
                out[static_cast<std::size_t>(c)].regions.front().time_means.push_back({s, *v});
            }
        }
        out[static_cast<std::size_t>(c)].index_prediction = std::move(prediction);
        out[static_cast<std::size_t>(c)].index_truth = std::move(truth);
    }
}

template void Aggregator::set_annual_reference<float>(std::span<const float>, std::int64_t, std::span<const double>,
                                                      std::span<const std::int64_t>);
template void Aggregator::set_annual_reference<double>(std::span<const double>, std::int64_t, std::span<const double>,
                                                       std::span<const std::int64_t>);
template std::int64_t Aggregator::stack_for_index<float>(FieldShard<float>, std::span<const float>, bool);
template std::int64_t Aggregator::stack_for_index<double>(FieldShard<double>, std::span<const double>, bool);
template void Aggregator::record_index<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                              bool);
template void Aggregator::record_index<double>(std::int64_t, std::int64_t, FieldShard<double>, std::span<const double>,
                                               bool);
}  // namespace gridshard
