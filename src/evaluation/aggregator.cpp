#include "gridshard/evaluation/aggregator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/metrics/ensemble.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/numerics/double_double.hpp"

namespace gridshard {
namespace {

// The per-initial-condition values of the ensemble scores: one slot per EnsembleValue, in its order.
constexpr std::int64_t ensemble_values = 4;

std::int64_t ensemble_slot(EnsembleValue value) {
    return static_cast<std::int64_t>(value);
}

double ensemble_value(const EnsembleScores& e, EnsembleValue value, std::size_t channel) {
    switch (value) {
        case EnsembleValue::ensemble_mean_rmse:
            return e.ensemble_mean_rmse[channel];
        case EnsembleValue::spread:
            return e.spread[channel];
        case EnsembleValue::crps:
            return e.crps[channel];
        case EnsembleValue::fair_crps:
            return e.fair_crps[channel];
    }
    return std::numeric_limits<double>::quiet_NaN();
}

bool per_lead(const RegisteredScore& s) {
    return (s.family == ScoreFamily::deterministic || s.family == ScoreFamily::ensemble ||
            s.family == ScoreFamily::anomaly_correlation) &&
           s.combination != SampleCombination::cell_statistic;
}

// A score with one value per sample and lead time (a per-sample slot): the Evaluator's and the anomaly correlation.
bool per_sample(const RegisteredScore& s) {
    return s.family == ScoreFamily::deterministic || s.family == ScoreFamily::anomaly_correlation;
}

bool ensemble_cells(const RegisteredScore& s) {
    return s.family == ScoreFamily::ensemble && s.combination == SampleCombination::cell_statistic;
}

// ACE's spread-skill ratio bias per cell (fme's SSRBiasMetric) from the means over initial conditions of the
// squared error of the ensemble mean and of the members' unbiased variance, `members` members: U = mse - var / M,
// spread sqrt(var), skill sqrt(max(U, 0)), spread / skill - 1 (-1 where the skill is 0), and 0 where the cell is
// prescribed (no variance and U at most 1e-6 of the channel's largest skill^2, `floor`). NaN where either is.
double ssr_bias(double squared_error, double variance, double members, double floor) {
    const double unbiased = squared_error - variance / members;
    if (std::isnan(unbiased) || std::isnan(variance)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    if (variance == 0.0 && unbiased <= floor) {
        return 0.0;
    }
    const double skill = std::sqrt(std::max(unbiased, 0.0));
    return skill > 0.0 ? std::sqrt(variance) / skill - 1.0 : -1.0;
}

constexpr double prescribed_mse_rtol = 1e-6;  // fme's _PRESCRIBED_MSE_RTOL

}  // namespace

AggregatorOptions normalized_options(const AggregatorOptions& options) {
    AggregatorOptions normalized = options;
    normalized.anomaly_correlation = false;
    normalized.maps = false;
    normalized.lead_ensemble_scores = false;
    normalized.ensemble_cell_leads.clear();
    normalized.ensemble_cell_maps = false;
    normalized.spectrum.reset();            // ACE logs no spectrum of the normalised fields
    normalized.near_zero_fraction.reset();  // nor near-zero fractions
    normalized.trend = false;               // nor trends
    normalized.video = false;               // nor videos
    normalized.extended_video = false;
    normalized.annual.reset();  // nor annual or seasonal means
    normalized.seasonal = false;
    normalized.regional_index.reset();
    normalized.histogram.reset();  // nor histograms
    normalized.quantiles.reset();  // nor quantiles
    normalized.index_regression.reset();
    normalized.tripole_index.reset();
    normalized.normalization.reset();
    normalized.deterministic_keys.clear();
    for (const RegisteredScore* s : report_scores(options.report, {})) {
        if (s->ace_normalized && s->family == ScoreFamily::deterministic) {
            normalized.deterministic_keys.push_back(s->key);
        }
    }
    return normalized;
}

const ScoreSeries* ChannelScores::profile(std::string_view key) const {
    for (const ScoreSeries& p : profiles) {
        if (p.score->key == key) {
            return &p;
        }
    }
    return nullptr;
}

bool target_missing_everywhere(const ChannelScores& channel) {
    const ScoreSeries* error = channel.profile("error");
    return error != nullptr &&
           std::all_of(error->values.begin(), error->values.end(), [](double v) { return std::isnan(v); });
}

double channel_mean(std::span<const double> values, const std::vector<bool>& missing) {
    if (missing.size() != values.size()) {
        throw ArgumentError("channel_mean: " + std::to_string(values.size()) + " values and " +
                            std::to_string(missing.size()) + " missing flags");
    }
    double sum = 0.0;
    std::size_t kept = 0;
    for (std::size_t c = 0; c < values.size(); ++c) {
        if (!missing[c]) {
            sum += values[c];
            ++kept;
        }
    }
    return kept == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(kept);
}

std::size_t Aggregator::Slots::size() const {
    return static_cast<std::size_t>(samples * leads * regions * scores * channels);
}

std::size_t Aggregator::Slots::at(std::int64_t s, std::int64_t l, std::int64_t r, std::int64_t k,
                                  std::int64_t c) const {
    return static_cast<std::size_t>((((s * leads + l) * regions + r) * scores + k) * channels + c);
}

double Aggregator::Slots::sample_mean(const std::vector<double>& values, std::int64_t l, std::int64_t r, std::int64_t k,
                                      std::int64_t c) const {
    double sum = 0.0;
    for (std::int64_t s = 0; s < samples; ++s) {
        sum += values[at(s, l, r, k, c)];
    }
    return sum / static_cast<double>(samples);
}

Aggregator::Aggregator(const ShardedGrid& grid, AggregatorShape shape, const std::vector<RegionWeights>& regions,
                       AggregatorOptions options)
    : grid_(grid), shape_(shape), options_(std::move(options)), regions_(regions) {
    const ForecastExtent& e = shape_.extent;
    const std::int64_t channels = shape_.channels;
    const bool ensemble = options_.report == ReportKind::forecast && e.members > 1;
    const std::vector<std::int64_t>& cell_leads = options_.ensemble_cell_leads;
    if (!cell_leads.empty()) {
        std::string why;
        if (!ensemble) {
            why = "ACE's ensemble scores need a forecast of several members, got " + std::to_string(e.members);
        } else if (shape_.work.split == DataSplit::members) {
            why = "ACE's ensemble scores need each initial condition's members on one data rank (not split by members)";
        } else if (!(options_.crps_alpha >= 0.0 && options_.crps_alpha <= 1.0)) {
            why = "crps_alpha must be in [0, 1], got " + std::to_string(options_.crps_alpha);
        }
        for (std::size_t k = 0; k < cell_leads.size() && why.empty(); ++k) {
            if (cell_leads[k] < 0 || cell_leads[k] >= e.lead_times ||
                std::find(cell_leads.begin(), cell_leads.begin() + static_cast<std::ptrdiff_t>(k), cell_leads[k]) !=
                    cell_leads.begin() + static_cast<std::ptrdiff_t>(k)) {
                why = "lead " + std::to_string(cell_leads[k]) + " is repeated or outside 0.." +
                      std::to_string(e.lead_times - 1);
            }
        }
        if (!why.empty()) {
            throw ArgumentError("ensemble_cell_leads: " + why);
        }
    }
    if (options_.extended_video && !options_.video) {
        throw ArgumentError("extended_video: ACE's extended videos are its video's; set video too");
    }
    if (const std::optional<io::ChannelStats>& stats = options_.normalization) {
        std::string why;
        if (options_.report != ReportKind::forecast) {
            why = "ACE's normalised scores are a forecast's";
        } else if (static_cast<std::int64_t>(stats->means.size()) != channels ||
                   static_cast<std::int64_t>(stats->stds.size()) != channels) {
            why = std::to_string(stats->means.size()) + " means and " + std::to_string(stats->stds.size()) +
                  " stds for " + std::to_string(channels) + " channels";
        }
        for (std::size_t c = 0; c < stats->stds.size() && why.empty(); ++c) {
            if (!std::isfinite(stats->means[c]) || !(std::isfinite(stats->stds[c]) && stats->stds[c] > 0.0)) {
                why = "channel " + std::to_string(c) + ": mean " + std::to_string(stats->means[c]) + " and std " +
                      std::to_string(stats->stds[c]) + " (a finite mean and a finite, positive std)";
            }
        }
        if (!why.empty()) {
            throw ArgumentError("normalization: " + why);
        }
        normalized_ = std::make_unique<Aggregator>(grid, shape, regions, normalized_options(options_));
    }
    scores_ = report_scores(options_.report, {.ensemble = ensemble && options_.lead_ensemble_scores,
                                              .anomaly_correlation = options_.anomaly_correlation,
                                              .ensemble_cells = !cell_leads.empty(),
                                              .power_spectrum = options_.spectrum.has_value(),
                                              .near_zero_fraction = options_.near_zero_fraction.has_value(),
                                              .trend = options_.trend,
                                              .annual = options_.annual.has_value(),
                                              .seasonal = options_.seasonal,
                                              .regional_index = options_.regional_index.has_value(),
                                              .histogram = options_.histogram.has_value(),
                                              .index_regression = options_.index_regression.has_value(),
                                              .tripole_index = options_.tripole_index.has_value()});
    check_annual(options_);  // and keeps the per-sample global means the annual means take
    const std::vector<std::string>& keep = options_.deterministic_keys;
    for (const std::string& key : keep) {
        if (std::none_of(scores_.begin(), scores_.end(), [&](const RegisteredScore* s) {
                return s->family == ScoreFamily::deterministic && s->key == key;
            })) {
            throw ArgumentError("deterministic_keys: no deterministic score '" + key + "' in this report");
        }
    }
    std::erase_if(scores_, [&](const RegisteredScore* s) {
        return s->family == ScoreFamily::deterministic && !keep.empty() &&
               std::find(keep.begin(), keep.end(), s->key) == keep.end();
    });
    EvaluationOptions evaluation{.summation = options_.summation, .policy = options_.policy};
    evaluation.scores.clear();
    for (const RegisteredScore* s : scores_) {
        if (s->family == ScoreFamily::deterministic) {
            evaluation.scores.push_back(*std::get<const ScoreDefinition*>(s->source));
        }
        if (per_sample(*s)) {
            per_sample_.push_back(s);
        }
    }
    const auto nregions = static_cast<std::int64_t>(regions_.size());
    const auto det_count = static_cast<std::int64_t>(per_sample_.size());
    const std::int64_t samples = e.initial_conditions * e.members;
    const std::int64_t nlat = grid_.grid().nlat;
    det_ = {samples, e.lead_times, nregions, det_count, channels};
    ens_ = {e.initial_conditions, e.lead_times, nregions,
            ensemble && options_.lead_ensemble_scores ? ensemble_values : 0, channels};
    zonal_prediction_ = {samples, e.lead_times, 1, channels, nlat};
    zonal_truth_ = {e.initial_conditions, e.lead_times, 1, channels, nlat};
    const auto plane = static_cast<std::size_t>(channels * grid_.box().area());
    if (grid_.mesh().shape().data > 1 && 3 * plane + 1 > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        // The time sums are gathered over the data group in one message: it must fit an MPI count.
        throw ArgumentError("the time sums of a rank's box (" + std::to_string(3 * plane + 1) +
                            " values) exceed an MPI message; use a finer mesh");
    }
    // Owned values are written in place; everything else stays 0 so the sums over the groups are exact.
    det_values_ = allocate_vector<double>(det_.size(), "the per-sample scores");
    ens_values_ = allocate_vector<double>(ens_.size(), "the ensemble scores");
    zonal_prediction_values_ = allocate_vector<double>(zonal_prediction_.size(), "the zonal means");
    zonal_truth_values_ = allocate_vector<double>(zonal_truth_.size(), "the zonal means");
    error_sums_.emplace(grid_, channels);
    if (options_.maps) {
        prediction_sums_.emplace(grid_, channels);
    }
    start_climate_families();
    for (const std::int64_t lead : cell_leads) {
        cell_sums_.push_back({lead, TimeMeanAccumulator(grid_, channels), TimeMeanAccumulator(grid_, channels),
                              TimeMeanAccumulator(grid_, channels)});
    }
    if (options_.spectrum) {
        spectrum_degrees_ = spectrum_size(options_.spectrum->spec, grid_.grid()).lmax;  // throws ArgumentError
        if (options_.spectrum->fill) {
            validate_flood_fill(*options_.spectrum->fill, grid_.grid());
        }
        const auto sums = static_cast<std::size_t>(channels * spectrum_degrees_);
        truth_spectra_.resize(sums);
        prediction_spectra_.resize(sums);
    }
    counted_.assign(static_cast<std::size_t>(e.lead_times), false);
    for (const std::int64_t row : options_.counted_leads) {
        counted_.at(static_cast<std::size_t>(row)) = true;
    }
    const std::int64_t mine = shape_.work.members.size();
    for (const RegionWeights& r : regions_) {
        if (mine > 0) {
            evaluators_.emplace_back(grid_, mine * channels, r.weights.view(), evaluation);
        }
    }
}

template <class T>
FieldShard<T> Aggregator::repeated(std::vector<T>& buffer, FieldShard<T> one) const {
    const std::int64_t mine = shape_.work.members.size();
    if (mine == 1) {
        return one;  // one member: the field itself, not a copy
    }
    buffer.resize(one.values.size() * static_cast<std::size_t>(mine));
    for (std::int64_t m = 0; m < mine; ++m) {
        std::copy(one.values.begin(), one.values.end(),
                  buffer.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(m) * one.values.size()));
    }
    return {buffer, mine * one.channels};
}

template <class T>
void Aggregator::record(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                        std::span<const T> members, std::span<const T> climatology) {
    const ProcessMesh& mesh = grid_.mesh();
    const Box& box = grid_.box();
    const std::int64_t channels = shape_.channels;
    const std::int64_t mine = shape_.work.members.size();
    const std::int64_t member_count = shape_.extent.members;
    const auto plane = static_cast<std::size_t>(channels * box.area());
    if (truth.channels != channels || truth.values.size() != plane ||
        members.size() != plane * static_cast<std::size_t>(mine) || initial_condition < 0 ||
        initial_condition >= shape_.extent.initial_conditions || lead < 0 || lead >= shape_.extent.lead_times ||
        (options_.anomaly_correlation && climatology.size() != plane)) {
        throw ArgumentError("Aggregator::record: initial condition " + std::to_string(initial_condition) + ", lead " +
                            std::to_string(lead) + ", " + std::to_string(truth.values.size()) + " truth, " +
                            std::to_string(members.size()) + " member and " + std::to_string(climatology.size()) +
                            " climatology values for " + std::to_string(mine) + " members of " + std::to_string(plane) +
                            " values");
    }
    auto& scratch = [this]() -> std::vector<T>(&)[5] {
        if constexpr (std::is_same_v<T, float>) {
            return float_scratch_;
        } else {
            return double_scratch_;
        }
    }();
    const FieldShard<T> t_all = repeated(scratch[0], truth);
    const FieldShard<T> p_all{members, mine * channels};
    // Each per-sample value has one owner per spatial group: the data rank that scored it (every rank of its
    // spatial group holds the same value, so each writes it, and the sums over the data group give every rank every
    // value); the ensemble scores, which every data rank gets when the members are split, data rank 0's.
    const bool members_split = shape_.work.split == DataSplit::members;
    const bool ensemble_owner = !members_split || mesh.coords().data == 0;
    std::optional<FieldShard<T>> c_all;
    if (options_.anomaly_correlation && mine > 0) {
        c_all = repeated(scratch[1], FieldShard<T>{climatology, channels});
    }
    // The zonal means come with the first region's scores, whose pass hands over the rows it sums whole.
    std::vector<double> zonal[2];
    const auto evaluator_zonal_s = [this] { return evaluators_.empty() ? 0.0 : evaluators_.front().timings().zonal_s; };
    const double zonal_before = evaluator_zonal_s();
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        const Weights w = regions_[r].weights.view();
        const auto region = static_cast<std::int64_t>(r);
        Scores s;
        std::vector<double> acc;
        if (mine > 0 && r == 0) {  // collective over spatial, then over lon
            ScoresAndZonalMeans both = evaluators_[r].evaluate_with_zonal_means(t_all, p_all);
            s = std::move(both.scores);
            zonal[0] = std::move(both.truth_zonal_means);
            zonal[1] = std::move(both.prediction_zonal_means);
        } else if (mine > 0) {  // collective over spatial
            s = evaluators_[r].evaluate(t_all, p_all);
        }
        if (mine > 0 && c_all) {
            acc = anomaly_correlation<T>(grid_, t_all, p_all, *c_all, w, options_.summation);
        }
        for (std::int64_t m = 0; m < mine; ++m) {
            const std::int64_t sample = initial_condition * member_count + shape_.work.members.begin + m;
            for (std::int64_t c = 0; c < channels; ++c) {
                const auto mc = static_cast<std::size_t>(m * channels + c);
                std::size_t evaluated = 0;  // the Evaluator's scores come in slot order
                for (std::size_t k = 0; k < per_sample_.size(); ++k) {
                    const bool anomaly = per_sample_[k]->family == ScoreFamily::anomaly_correlation;
                    det_values_[det_.at(sample, lead, region, static_cast<std::int64_t>(k), c)] =
                        anomaly ? acc[mc] : s.at(evaluated++)[mc];
                }
            }
        }
        if (ens_.scores > 0) {
            const EnsembleShard<T> held{members, mine, channels};
            const EnsembleScores e = members_split
                                         ? ensemble_scores_over_data<T>(grid_, truth, held, w, options_.summation)
                                         : ensemble_scores<T>(grid_, truth, held, w, options_.summation);
            for (std::int64_t c = 0; c < channels && ensemble_owner; ++c) {
                for (std::int64_t k = 0; k < ensemble_values; ++k) {
                    ens_values_[ens_.at(initial_condition, lead, region, k, c)] =
                        ensemble_value(e, static_cast<EnsembleValue>(k), static_cast<std::size_t>(c));
                }
            }
        }
    }
    const auto cells =
        std::find_if(cell_sums_.begin(), cell_sums_.end(), [&](const CellSums& c) { return c.lead == lead; });
    if (cells != cell_sums_.end() && mine > 0) {  // every member of this initial condition is here: no MPI
        const EnsemblePointStatistics point =
            ensemble_point_statistics<T>(grid_, truth, {members, mine, channels}, options_.crps_alpha);
        cells->squared_error.add(FieldShard<double>{point.squared_error, channels});
        cells->variance.add(FieldShard<double>{point.variance, channels});
        cells->crps.add(FieldShard<double>{point.almost_fair_crps, channels});
    }
    const double zonal_started = MPI_Wtime();
    if (mine > 0 && regions_.empty()) {  // no region's scores brought them
        const FieldShard<T> both[] = {t_all, p_all};
        std::vector<std::vector<double>> means = zonal_means<T>(grid_, both, options_.summation);
        zonal[0] = std::move(means[0]);
        zonal[1] = std::move(means[1]);
    }
    if (mine > 0) {
        for (std::int64_t m = 0; m < mine && mesh.coords().lon == 0; ++m) {
            const std::int64_t member = shape_.work.members.begin + m;
            for (std::int64_t c = 0; c < channels; ++c) {
                for (std::int64_t i = 0; i < box.lat.size(); ++i) {
                    const auto local = static_cast<std::size_t>((m * channels + c) * box.lat.size() + i);
                    zonal_prediction_values_[zonal_prediction_.at(initial_condition * member_count + member, lead, 0, c,
                                                                  box.lat.begin + i)] = zonal[1][local];
                    if (member == 0) {
                        zonal_truth_values_[zonal_truth_.at(initial_condition, lead, 0, c, box.lat.begin + i)] =
                            zonal[0][local];
                    }
                }
            }
        }
    }
    const double sums_started = MPI_Wtime();
    if (counted_[static_cast<std::size_t>(lead)]) {
        for (std::int64_t m = 0; m < mine; ++m) {
            const FieldShard<T> member{members.subspan(static_cast<std::size_t>(m) * plane, plane), channels};
            if (prediction_sums_) {
                prediction_sums_->add(member);
            }
            error_sums_->add(truth, member);
        }
    }
    if (options_.spectrum && counted_[static_cast<std::size_t>(lead)] && mine > 0) {
        // The truth with the members of the data rank that holds member 0 (its only copy when they are split).
        record_spectra<T>(truth, members, shape_.work.members.begin == 0, scratch[2]);
    }
    if (counted_[static_cast<std::size_t>(lead)]) {
        record_climate_families<T>(initial_condition, lead, truth, members);
    }
    record_quantiles<T>(lead, truth, members);
    const double done = MPI_Wtime();
    timings_.zonal_s += sums_started - zonal_started + evaluator_zonal_s() - zonal_before;
    timings_.time_sums_s += done - sums_started;
    if (normalized_) {  // the same pair normalised, as ACE's normalised aggregators see it (its own timings)
        const std::vector<T>& t = normalize_into(truth.values, scratch[3]);
        const std::vector<T>& p = normalize_into(members, scratch[4]);
        normalized_->record<T>(initial_condition, lead, FieldShard<T>{t, channels}, p);
    }
}

template <class T>
const std::vector<T>& Aggregator::normalize_into(std::span<const T> values, std::vector<T>& out) const {
    out.resize(values.size());  // keeps its capacity from the last pair
    io::normalize<T>(values, out, grid_.box().area(), *options_.normalization);
    return out;
}

template <class T>
void Aggregator::record_spectra(FieldShard<T> truth, std::span<const T> members, bool with_truth,
                                std::vector<T>& stacked) {
    const std::int64_t channels = shape_.channels;
    const std::int64_t fields = (with_truth ? 1 : 0) + shape_.work.members.size();
    stacked.clear();  // keeps its capacity from the last pair
    if (with_truth) {
        stacked.insert(stacked.end(), truth.values.begin(), truth.values.end());
    }
    stacked.insert(stacked.end(), members.begin(), members.end());
    const PowerSpectrumOptions& o = *options_.spectrum;
    const FieldShard<T> all{stacked, fields * channels};
    if (!spectrum_plan_) {  // made at the first pair, kept for every other (the same fields on every rank)
        spectrum_plan_.emplace(grid_, fields * channels, o.spec);
        if (o.fill) {
            fill_plan_.emplace(grid_, *o.fill);
        }
    }
    std::vector<double> power;  // (fields, channels, degrees), the same on every rank of the spatial group
    if (o.fill) {
        const std::vector<double> filled = (*fill_plan_)(all);
        power = (*spectrum_plan_)(FieldShard<double>{filled, fields * channels});
    } else {
        power = (*spectrum_plan_)(all);
    }
    const auto degrees = static_cast<std::size_t>(spectrum_degrees_);
    const auto per_field = static_cast<std::size_t>(channels) * degrees;
    for (std::int64_t f = 0; f < fields; ++f) {
        std::vector<ExactSum>& sums = with_truth && f == 0 ? truth_spectra_ : prediction_spectra_;
        for (std::size_t k = 0; k < per_field; ++k) {
            sums[k].add(power[static_cast<std::size_t>(f) * per_field + k]);
        }
    }
    truth_spectrum_count_ += with_truth ? 1 : 0;
    prediction_spectrum_count_ += shape_.work.members.size();
}

void Aggregator::finish_spectra(VariableScores& out) {
    // Every spatial rank holds the same sums of its data rank's pairs: one exact sum over the data group.
    const std::size_t sums = truth_spectra_.size();
    const std::size_t wire = ExactSum::wire_size;
    std::vector<std::int64_t> packed(2 * sums * wire + 2);
    for (std::size_t k = 0; k < sums; ++k) {
        truth_spectra_[k].pack(std::span(packed).subspan(k * wire, wire));
        prediction_spectra_[k].pack(std::span(packed).subspan((sums + k) * wire, wire));
    }
    packed[2 * sums * wire] = truth_spectrum_count_;
    packed[2 * sums * wire + 1] = prediction_spectrum_count_;
    allreduce_sum_in_place(grid_.mesh().data(), packed);
    const auto mean = [&](std::size_t at, std::int64_t count) {
        const ExactSum sum = ExactSum::unpack(std::span<const std::int64_t>(packed).subspan(at * wire, wire));
        return count == 0 ? std::numeric_limits<double>::quiet_NaN()
                          : dd::divide(sum.to_double_double(), {static_cast<double>(count), 0.0}).hi;
    };
    const std::int64_t truth_count = packed[2 * sums * wire];
    const std::int64_t prediction_count = packed[2 * sums * wire + 1];
    const auto degrees = static_cast<std::size_t>(spectrum_degrees_);
    for (std::size_t c = 0; c < out.size(); ++c) {
        std::vector<double> truth(degrees);
        std::vector<double> prediction(degrees);
        for (std::size_t l = 0; l < degrees; ++l) {
            truth[l] = mean(c * degrees + l, truth_count);
            prediction[l] = mean(sums + c * degrees + l, prediction_count);
        }
        const SpectrumBiases biases = spectrum_norm_biases(prediction, truth);
        for (const RegisteredScore* s : scores_) {
            if (s->family != ScoreFamily::power_spectrum) {
                continue;
            }
            switch (std::get<SpectrumValue>(s->source)) {
                case SpectrumValue::prediction:
                    out[c].spectra.push_back({s, spectrum_degrees_, prediction});
                    break;
                case SpectrumValue::truth:
                    out[c].spectra.push_back({s, spectrum_degrees_, truth});
                    break;
                case SpectrumValue::smallest_scale:
                    out[c].regions.front().time_means.push_back({s, biases.smallest_scale});
                    break;
                case SpectrumValue::positive:
                    out[c].regions.front().time_means.push_back({s, biases.positive});
                    break;
                case SpectrumValue::negative:
                    out[c].regions.front().time_means.push_back({s, biases.negative});
                    break;
                case SpectrumValue::mean_abs:
                    out[c].regions.front().time_means.push_back({s, biases.mean_abs});
                    break;
            }
        }
    }
}

std::vector<std::vector<ScoreSeries>> Aggregator::lead_scores(Range leads) const {
    if (leads.begin < 0 || leads.end > shape_.extent.lead_times || leads.empty()) {
        throw ArgumentError("Aggregator::lead_scores: leads " + std::to_string(leads.begin) + ".." +
                            std::to_string(leads.end) + " of " + std::to_string(shape_.extent.lead_times));
    }
    Slots window = det_;
    window.leads = leads.size();
    window.regions = 1;
    std::vector<double> values(window.size(), 0.0);
    for (std::int64_t s = 0; s < det_.samples; ++s) {
        for (std::int64_t l = 0; l < window.leads; ++l) {
            for (std::int64_t k = 0; k < det_.scores; ++k) {
                for (std::int64_t c = 0; c < det_.channels; ++c) {
                    values[window.at(s, l, 0, k, c)] = det_values_[det_.at(s, leads.begin + l, 0, k, c)];
                }
            }
        }
    }
    reduce_sum<double>(grid_.mesh(), values);  // each slot written by one data rank: exact, as finish()'s
    std::vector<std::vector<ScoreSeries>> out(static_cast<std::size_t>(det_.channels));
    for (std::int64_t c = 0; c < det_.channels; ++c) {
        for (std::int64_t k = 0; k < det_.scores; ++k) {
            ScoreSeries series{per_sample_[static_cast<std::size_t>(k)], 1,
                               std::vector<double>(static_cast<std::size_t>(window.leads))};
            for (std::int64_t l = 0; l < window.leads; ++l) {
                series.values[static_cast<std::size_t>(l)] = window.sample_mean(values, l, 0, k, c);
            }
            out[static_cast<std::size_t>(c)].push_back(std::move(series));
        }
    }
    return out;
}

VariableScores Aggregator::finish(const std::string& variable) {
    const double started = MPI_Wtime();
    const ProcessMesh& mesh = grid_.mesh();
    const std::int64_t channels = shape_.channels;
    const std::int64_t leads = shape_.extent.lead_times;
    const std::int64_t nlat = grid_.grid().nlat;
    // Each slot was written by one rank: the sums over the groups are exact.
    reduce_sum<double>(mesh, det_values_);
    reduce_sum<double>(mesh, ens_values_);
    spatial_reduce_sum<double>(mesh, zonal_prediction_values_);
    reduce_sum<double>(mesh, zonal_prediction_values_);
    spatial_reduce_sum<double>(mesh, zonal_truth_values_);
    reduce_sum<double>(mesh, zonal_truth_values_);
    if (prediction_sums_) {
        prediction_sums_->merge_over_data();
    }
    error_sums_->merge_over_data();

    VariableScores out(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        out[static_cast<std::size_t>(c)].name = channels == 1 ? variable : variable + "[" + std::to_string(c) + "]";
    }
    for (std::size_t r = 0; r < regions_.size(); ++r) {
        const auto region = static_cast<std::int64_t>(r);
        const Weights w = regions_[r].weights.view();
        std::vector<std::vector<double>> statistics;  // per cell-statistic score, per channel
        std::optional<TimeMeanScores> time_means;     // both, from one pass when either is asked for (collective)
        for (const RegisteredScore* s : scores_) {
            if (const auto* statistic = std::get_if<TimeMeanStatistic>(&s->source)) {
                if (!time_means) {
                    time_means = error_sums_->time_mean_scores(w, options_.policy, options_.summation);
                }
                statistics.push_back(*statistic == TimeMeanStatistic::rmse_of_time_mean ? time_means->rmse
                                                                                        : time_means->bias);
            }
        }
        for (std::int64_t c = 0; c < channels; ++c) {
            RegionScores scores{regions_[r].name, {}, {}};
            std::int64_t k = 0;  // the per-sample slot
            std::size_t statistic = 0;
            for (const RegisteredScore* s : scores_) {
                if (s->family == ScoreFamily::time_mean) {
                    scores.time_means.push_back({s, statistics[statistic++][static_cast<std::size_t>(c)]});
                    continue;
                }
                if (!per_lead(*s)) {
                    continue;
                }
                ScoreSeries series{s, 1, std::vector<double>(static_cast<std::size_t>(leads))};
                for (std::int64_t l = 0; l < leads; ++l) {
                    double value = 0.0;
                    if (per_sample(*s)) {
                        value = det_.sample_mean(det_values_, l, region, k, c);
                    } else if (const auto* ratio = std::get_if<EnsembleRatio>(&s->source)) {
                        // The ratio of the means over initial conditions, as WeatherBench 2 forms it.
                        value = ens_.sample_mean(ens_values_, l, region, ensemble_slot(ratio->numerator), c) /
                                ens_.sample_mean(ens_values_, l, region, ensemble_slot(ratio->denominator), c);
                    } else {
                        value = ens_.sample_mean(ens_values_, l, region,
                                                 ensemble_slot(std::get<EnsembleValue>(s->source)), c);
                    }
                    series.values[static_cast<std::size_t>(l)] = value;
                }
                k += per_sample(*s) ? 1 : 0;
                scores.per_lead.push_back(std::move(series));
            }
            for (const ScoreSeries& series : scores.per_lead) {
                double sum = 0.0;
                for (const std::int64_t row : options_.counted_leads) {
                    sum += series.values[static_cast<std::size_t>(row)];
                }
                scores.time_means.push_back({series.score, sum / static_cast<double>(options_.counted_leads.size())});
            }
            out[static_cast<std::size_t>(c)].regions.push_back(std::move(scores));
        }
    }
    for (CellSums& sums : cell_sums_) {
        const std::vector<std::vector<ScoreAtLead>> at_lead = cell_scores(sums, out);  // per region and channel
        for (std::size_t r = 0; r < regions_.size(); ++r) {
            for (std::int64_t c = 0; c < channels; ++c) {
                const std::vector<ScoreAtLead>& values =
                    at_lead[r * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)];
                std::vector<ScoreAtLead>& into = out[static_cast<std::size_t>(c)].regions[r].at_leads;
                into.insert(into.end(), values.begin(), values.end());
            }
        }
    }
    for (std::int64_t c = 0; c < channels; ++c) {
        for (const RegisteredScore* s : scores_) {
            if (s->family != ScoreFamily::zonal_mean) {
                continue;
            }
            ScoreSeries profile{s, nlat, std::vector<double>(static_cast<std::size_t>(leads * nlat))};
            for (std::int64_t l = 0; l < leads; ++l) {
                for (std::int64_t i = 0; i < nlat; ++i) {
                    const double prediction = zonal_prediction_.sample_mean(zonal_prediction_values_, l, 0, c, i);
                    const double truth = zonal_truth_.sample_mean(zonal_truth_values_, l, 0, c, i);
                    const ZonalProfile which = std::get<ZonalProfile>(s->source);
                    profile.values[static_cast<std::size_t>(l * nlat + i)] =
                        which == ZonalProfile::prediction ? prediction
                        : which == ZonalProfile::truth    ? truth
                                                          : prediction - truth;
                }
            }
            out[static_cast<std::size_t>(c)].profiles.push_back(std::move(profile));
        }
    }
    if (options_.spectrum) {
        finish_spectra(out);
    }
    finish_climate_families(out);
    if (options_.quantiles) {
        finish_quantiles(out);
    }
    if (options_.maps) {
        // Gathered, only world rank 0 ever holds a global map (one gather each); kept for a collective write,
        // each data rank 0 its own box, and no rank a whole map.
        std::vector<std::vector<double>> prediction_maps =
            held_maps(prediction_sums_->mean_difference(options_.policy));
        std::vector<std::vector<double>> bias_maps = held_maps(error_sums_->mean_difference(options_.policy));
        for (std::int64_t c = 0; c < channels; ++c) {
            out[static_cast<std::size_t>(c)].prediction_map = std::move(prediction_maps[static_cast<std::size_t>(c)]);
            out[static_cast<std::size_t>(c)].bias_map = std::move(bias_maps[static_cast<std::size_t>(c)]);
        }
    }
    timings_.evaluation = {};
    for (const Evaluator& e : evaluators_) {
        const EvaluationTimings& t = e.timings();
        timings_.evaluation.agreement_s += t.agreement_s;
        timings_.evaluation.halo_s += t.halo_s;
        timings_.evaluation.compute_s += t.compute_s;
        timings_.evaluation.allreduce_s += t.allreduce_s;
        timings_.evaluation.calls += t.calls;
    }
    timings_.finish_s += MPI_Wtime() - started;
    if (normalized_) {
        normalized_scores_ = normalized_->finish(variable);  // collective over the world, as this finish (own timings)
    }
    return out;
}

std::vector<std::vector<ScoreAtLead>> Aggregator::cell_scores(CellSums& sums, VariableScores& maps_out) {
    const std::int64_t channels = shape_.channels;
    const auto plane = static_cast<std::size_t>(channels * grid_.box().area());
    const auto area = static_cast<std::size_t>(grid_.box().area());
    sums.squared_error.merge_over_data();  // collective over data, each (initial condition, lead) added once
    sums.variance.merge_over_data();
    sums.crps.merge_over_data();
    // Per cell the means over initial conditions, then the three maps stacked in CellStatistic's order: the
    // almost-fair CRPS, the RMSE of the ensemble mean, the spread-skill ratio bias.
    const std::vector<double> squared_error = sums.squared_error.mean_difference(options_.policy);
    const std::vector<double> variance = sums.variance.mean_difference(options_.policy);
    const std::vector<double> crps = sums.crps.mean_difference(options_.policy);
    std::vector<double> largest_skill(static_cast<std::size_t>(channels), 0.0);  // per channel, over the grid
    const auto members = static_cast<double>(shape_.extent.members);
    for (std::size_t n = 0; n < plane; ++n) {
        const double skill = std::sqrt(std::max(squared_error[n] - variance[n] / members, 0.0));
        if (!std::isnan(skill)) {
            double& largest = largest_skill[n / area];
            largest = std::max(largest, skill * skill);
        }
    }
    spatial_reduce_max<double>(grid_.mesh(), largest_skill);  // exact: a maximum does not round
    std::vector<double> maps(3 * plane);
    for (std::size_t n = 0; n < plane; ++n) {
        maps[n] = crps[n];
        maps[plane + n] = std::sqrt(squared_error[n]);
        maps[2 * plane + n] =
            ssr_bias(squared_error[n], variance[n], members, prescribed_mse_rtol * largest_skill[n / area]);
    }
    std::vector<const RegisteredScore*> stacked(3, nullptr);  // the registry's entries, in the maps' order
    for (const RegisteredScore* s : scores_) {
        if (ensemble_cells(*s)) {
            stacked[static_cast<std::size_t>(std::get<CellStatistic>(s->source))] = s;
        }
    }
    for (std::size_t k = 0; k < stacked.size() && options_.ensemble_cell_maps; ++k) {  // one gather over the world each
        std::vector<std::vector<double>> held =
            held_maps({maps.begin() + static_cast<std::ptrdiff_t>(k * plane),
                       maps.begin() + static_cast<std::ptrdiff_t>((k + 1) * plane)});
        for (std::int64_t c = 0; c < channels && stacked[k] != nullptr; ++c) {
            maps_out[static_cast<std::size_t>(c)].cell_maps.push_back(
                {stacked[k], sums.lead, std::move(held[static_cast<std::size_t>(c)])});
        }
    }
    std::vector<std::vector<ScoreAtLead>> out;
    for (const RegionWeights& region : regions_) {  // one allreduce over spatial each
        const std::vector<double> means = masked_weighted_mean<double>(
            grid_, FieldShard<double>{maps, 3 * channels}, region.weights.view(), options_.policy, options_.summation);
        for (std::int64_t c = 0; c < channels; ++c) {
            std::vector<ScoreAtLead> values;
            for (const RegisteredScore* s : scores_) {
                if (ensemble_cells(*s)) {
                    const auto k =
                        static_cast<std::int64_t>(std::find(stacked.begin(), stacked.end(), s) - stacked.begin());
                    values.push_back({s, sums.lead, means[static_cast<std::size_t>(k * channels + c)]});
                }
            }
            out.push_back(std::move(values));
        }
    }
    return out;
}

template void Aggregator::record_spectra<float>(FieldShard<float>, std::span<const float>, bool, std::vector<float>&);
template void Aggregator::record_spectra<double>(FieldShard<double>, std::span<const double>, bool,
                                                 std::vector<double>&);
template void Aggregator::record<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                        std::span<const float>);
template void Aggregator::record<double>(std::int64_t, std::int64_t, FieldShard<double>, std::span<const double>,
                                         std::span<const double>);

}  // namespace gridshard
