// The scoring run (evaluation/evaluate.hpp): agreement on the inputs, the mesh and the work split, then per
// variable one Aggregator fed by read rounds.

#include "gridshard/evaluation/evaluate.hpp"
#include "gridshard/geometry/regions.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <memory>

#include "forecast_times.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/memory_check.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/io/annual_reference.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/normalization.hpp"

namespace gridshard {
namespace {

using detail::enso_coefficient_index;
using detail::longer_than_days;
using detail::longer_than_two_years;
using detail::number_text;
using detail::valid_times;

/// Seconds this rank spent reading (or generating) its fields, for RunTimings.
struct RunClock {
    double read = 0.0;
    AggregatorTimings aggregation;
    std::int64_t steps = 0;
    void add(const AggregatorTimings& t) {
        aggregation.evaluation.agreement_s += t.evaluation.agreement_s;
        aggregation.evaluation.halo_s += t.evaluation.halo_s;
        aggregation.evaluation.compute_s += t.evaluation.compute_s;
        aggregation.evaluation.allreduce_s += t.evaluation.allreduce_s;
        aggregation.zonal_s += t.zonal_s;
        aggregation.time_sums_s += t.time_sums_s;
        aggregation.finish_s += t.finish_s;
    }
};

/// The run's fixed inputs beside the source, as every rank holds them after the agreements.
struct RunInputs {
    const EvaluationPlan& plan;
    const io::ForecastSource& source;
    const ShardedGrid& grid;
    const WorkShare& work;
    std::int64_t rounds;
    const std::vector<RegionWeights>& regions;
    const io::Climatology* climatology;
    const io::TimeMeanRows& time_means;
    const io::Normalization* normalization;  // ACE's stats, or none
    // with the trend, annual or seasonal means, each (initial condition, lead)'s valid time, else empty
    const std::vector<ValidTime>& pair_times;
    double annual_timestep_seconds;             // with the annual means, the files' timestep
    const AreaWeights* nino34;                  // with the ENSO index, its weights on this rank's box, else none
    const std::array<AreaWeights, 3>* tripole;  // with the IPO index, its boxes' weights on this rank's box, else none
    // with the ENSO coefficient, its index per (initial condition, lead), initial condition slowest, else empty
    const std::vector<double>& coefficient_index;
};

/// One variable's scores, and with the normalisation its scores on the normalised fields.
struct ScoredVariable {
    VariableScores scores, normalized;
};

/// One pair's buffers: the truth, this rank's members and the climatology, with the climatology's indices (the
/// field it holds, read again only when the pair needs another).
template <class T>
struct PairBuffers {
    std::vector<T> truth, members, climatology;
    const std::vector<std::int64_t>* climatology_at = nullptr;
};

/// A rank's read rounds of one variable: its (initial condition, lead) pairs in order, per round the index of its
/// pair (-1: a round in which it reads nothing, with collective reads or histograms), and with histograms the round
/// after which each of ACE's windows ends (its count of rounds so far).
struct RoundSchedule {
    std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
    std::vector<std::int64_t> round_pair;
    std::vector<std::int64_t> window_ends;
};

/// The rounds of `in`'s work: its pairs initial condition by initial condition, at least `in.rounds` rounds; with
/// `histograms`, window by window (ACE's windows: EvaluationPlan::histogram_window counted lead times each, the
/// rows before the first counted one in the first), each window as many rounds on every rank (the most pairs of any
/// rank in it: one allreduce over data; the ranks of a spatial group hold the same pairs).
RoundSchedule round_schedule(const RunInputs& in, bool histograms) {
    const WorkShare& work = in.work;
    const std::int64_t leads = in.source.layout().lead_times;
    const std::vector<std::int64_t>& rows = in.time_means.rows;
    std::vector<std::int64_t> bounds = {0};  // the windows' first lead times, then the end
    const auto per_window = static_cast<std::size_t>(in.plan.histogram_window > 0 ? in.plan.histogram_window : leads);
    for (std::size_t k = per_window; histograms && k < rows.size(); k += per_window) {
        bounds.push_back(rows[k]);
    }
    bounds.push_back(leads);
    RoundSchedule out;
    std::vector<std::int64_t> rounds(bounds.size() - 1, 0);
    std::vector<std::size_t> firsts;
    for (std::size_t w = 0; w + 1 < bounds.size(); ++w) {
        firsts.push_back(out.pairs.size());
        for (std::int64_t ic = work.initial_conditions.begin; ic < work.initial_conditions.end; ++ic) {
            for (std::int64_t lead = std::max(work.leads.begin, bounds[w]);
                 lead < std::min(work.leads.end, bounds[w + 1]); ++lead) {
                out.pairs.emplace_back(ic, lead);
            }
        }
        rounds[w] = static_cast<std::int64_t>(out.pairs.size() - firsts.back());
    }
    if (histograms) {
        reduce_max<std::int64_t>(in.grid.mesh(), rounds);
    } else {
        rounds[0] = std::max(rounds[0], in.rounds);
    }
    firsts.push_back(out.pairs.size());
    for (std::size_t w = 0; w < rounds.size(); ++w) {
        for (std::int64_t r = 0; r < rounds[w]; ++r) {
            const auto at = static_cast<std::int64_t>(firsts[w]) + r;
            out.round_pair.push_back(at < static_cast<std::int64_t>(firsts[w + 1]) ? at : -1);
        }
        out.window_ends.push_back(static_cast<std::int64_t>(out.round_pair.size()));
    }
    return out;
}

/// One variable's scores in `T`; collective over the world. With collective reads every rank reads in `rounds`
/// rounds (the most pairs of any data rank), reading nothing once its own pairs are done.
template <class T>
ScoredVariable score_variable(const RunInputs& in, const io::SourceVariable& variable, RunClock& clock,
                              std::int64_t& done, std::int64_t total) {
    const ProcessMesh& mesh = in.grid.mesh();
    const Box& box = in.grid.box();
    const io::ForecastLayout& layout = in.source.layout();
    const WorkShare& work = in.work;
    const std::int64_t channels = variable.channels;
    const std::int64_t leads = layout.lead_times;
    const auto plane = static_cast<std::size_t>(channels * box.area());
    const std::int64_t mine = work.members.size();
    const std::string& name = variable.name;
    const bool collective = in.plan.access.collective();

    // Everything field-sized is allocated here, before the first collective, and the outcome agreed: a rank that
    // runs out of memory makes every rank raise the same SystemError instead of hanging. With independent reads a
    // second set of buffers takes the next pair while this one is scored.
    const bool overlap = !collective && work.pairs() > 1;
    PairBuffers<T> buffers[2];
    std::unique_ptr<io::ForecastSteps> reader;
    std::optional<io::ClimatologyPlan> climatology_plan;
    std::optional<Aggregator> aggregator;
    std::optional<io::AnnualReference> reference;
    check_collectively(
        mesh.world(), attempt([&] {
            for (int b = 0; b < (overlap ? 2 : 1); ++b) {
                buffers[b].truth = allocate_vector<T>(plane, "the truth buffer of '" + name + "'");
                buffers[b].members =
                    allocate_vector<T>(plane * static_cast<std::size_t>(mine), "the members buffer of '" + name + "'");
                if (in.climatology != nullptr) {
                    buffers[b].climatology = allocate_vector<T>(plane, "the climatology of '" + name + "'");
                }
            }
            if (in.climatology != nullptr) {
                climatology_plan.emplace(in.climatology->open(variable, box));
            }
            AggregatorOptions options = in.plan.scoring;
            options.counted_leads = in.time_means.rows;
            options.anomaly_correlation = in.climatology != nullptr;
            options.gather_maps = !in.plan.access.writes_collectively();
            const AggregatorShape shape{{layout.initial_conditions, layout.members, leads}, channels, work};
            if (in.normalization != nullptr) {
                options.normalization = in.normalization->of(name);  // ACE's normalised scores beside the others
            }
            if (in.plan.near_zero_fraction) {
                options.near_zero_fraction = in.plan.near_zero_fraction->options_for(name);
            }
            const auto chosen = [&](bool on, const std::vector<std::string>& names) {
                return on && (names.empty() || std::find(names.begin(), names.end(), name) != names.end());
            };
            options.trend = chosen(in.plan.scoring.trend, in.plan.trend_variables);
            options.video = chosen(in.plan.scoring.video, in.plan.video_variables);
            options.extended_video = options.video && in.plan.scoring.extended_video;
            options.seasonal = chosen(in.plan.scoring.seasonal, in.plan.seasonal_variables);
            if (!chosen(in.plan.scoring.annual.has_value(), in.plan.annual_variables)) {
                options.annual.reset();
            } else {
                options.annual->timestep_seconds = in.annual_timestep_seconds;
            }
            if (!chosen(in.plan.scoring.histogram.has_value(), in.plan.histogram_variables)) {
                options.histogram.reset();
            }
            if (in.tripole != nullptr &&
                std::find(ace_ipo_names.begin(), ace_ipo_names.end(), name) != ace_ipo_names.end()) {
                options.tripole_index = TripoleIndexOptions{*in.tripole};
            }
            if (in.nino34 != nullptr &&
                std::find(ace_sst_names.begin(), ace_sst_names.end(), name) != ace_sst_names.end()) {
                options.regional_index = RegionalIndexOptions{*in.nino34};
            }
            if (!in.coefficient_index.empty()) {
                options.index_regression = IndexRegressionOptions{in.coefficient_index};
            }
            aggregator.emplace(in.grid, shape, in.regions, std::move(options));
            for (std::size_t k = 0; k < in.pair_times.size() && aggregator->needs_times(); ++k) {  // the valid times
                const auto pair = static_cast<std::int64_t>(k);
                aggregator->record_time(pair / leads, pair % leads, in.pair_times[k]);
            }
            reader = in.source.open(variable, box);
            if (aggregator->has_annual() && !in.plan.annual_reference_data.empty()) {
                reference = io::read_annual_reference(in.plan.annual_reference_data, name, box, in.grid.grid().nlat,
                                                      in.grid.grid().nlon);
            }
        }));
    // ACE's monthly reference data of the annual means, for a variable the file has (every rank alike).
    if (!in.plan.annual_reference_data.empty()) {
        agree_or_throw(mesh.world(), "", {reference ? 1 : 0}, "whether the annual reference data has '" + name + "'");
    }
    if (reference) {
        aggregator->set_annual_reference<double>(reference->values, reference->samples, reference->counts,
                                                 reference->years);
    }
    // This rank's (initial condition, lead) pairs in rounds (round_schedule); with collective reads every rank makes
    // as many rounds, reading nothing in those past its own pairs. Round k's reads, into `b`; no MPI calls unless the
    // reads are collective.
    const bool histogram = aggregator->has_histogram();
    const RoundSchedule schedule = round_schedule(in, histogram);  // with histograms, collective over data
    const std::int64_t pairs = static_cast<std::int64_t>(schedule.pairs.size());
    const auto total_rounds = static_cast<std::int64_t>(schedule.round_pair.size());
    const auto read_round = [&](std::int64_t round, PairBuffers<T>& b, bool with_climatology = true) {
        return attempt([&] {
            const std::int64_t at = round < total_rounds ? schedule.round_pair[static_cast<std::size_t>(round)] : -1;
            const bool has_pair = at >= 0;
            // Named values, not a structured binding: the lambdas below capture them (clang 14 cannot).
            const std::int64_t ic = has_pair ? schedule.pairs[static_cast<std::size_t>(at)].first : -1;
            const std::int64_t lead = has_pair ? schedule.pairs[static_cast<std::size_t>(at)].second : -1;
            io::ReadRound reads(collective);
            reads.read([&] {
                if (has_pair) {
                    reader->read(ic, lead, work.members, std::span<T>(b.truth), std::span<T>(b.members));
                } else {
                    reader->read_none();
                }
            });
            reads.read([&] {
                if (!climatology_plan || !with_climatology) {  // every rank alike: the histograms' replays skip it
                    return;
                }
                const auto* at_field =
                    has_pair ? &climatology_plan->positions[static_cast<std::size_t>(ic * leads + lead)] : nullptr;
                if (at_field != nullptr && (b.climatology_at == nullptr || *b.climatology_at != *at_field)) {
                    b.climatology_at = nullptr;
                    climatology_plan->reader.read_at(*at_field, std::span<T>(b.climatology));
                    b.climatology_at = at_field;
                } else {
                    climatology_plan->reader.read_none();  // collective reads: the others may read
                }
            });
            reads.finish();
        });
    };
    // Ranks that score the same pairs together stop together when one cannot read, and with collective reads (or
    // the members split, whose ensemble is exchanged over the data group, or histograms or quantiles, whose windows
    // and passes end over the world) every rank.
    const bool quantiles = aggregator->has_quantiles();
    const Communicator& together =
        work.split == DataSplit::members || collective || histogram || quantiles ? mesh.world() : mesh.spatial();
    LocalFailure failure;
    if (histogram) {  // ACE's mask, from the truth of its pair, read first: the first window is read twice, not thrice
        // Named values, not a structured binding: the lambda below captures them (clang 14 cannot).
        const std::int64_t mask_ic = aggregator->histogram_mask_pair().first;
        const std::int64_t mask_lead = aggregator->histogram_mask_pair().second;
        failure = attempt([&] {
            io::ReadRound reads(collective);
            reads.read([&] {
                if (pairs > 0) {
                    reader->read(mask_ic, mask_lead, work.members, std::span<T>(buffers[0].truth),
                                 std::span<T>(buffers[0].members));
                } else {
                    reader->read_none();
                }
            });
            reads.finish();
        });
        check_collectively(mesh.world(), failure);
        aggregator->set_histogram_mask<T>(FieldShard<T>{buffers[0].truth, channels});
    }
    // Rounds [first, stop) again, without the climatology, each pair given to `feed(ic, lead, buffers)`, while
    // `again()` asks (collective over the world): a histogram window's pairs, or every pair for a quantiles' pass.
    const auto replay = [&](std::int64_t first, std::int64_t stop, auto again, auto feed) {
        while (again()) {
            for (std::int64_t round = first; round < stop; ++round) {
                const LocalFailure read = read_round(round, buffers[0], false);
                const LocalFailure agreed = attempt([&] { check_collectively(together, read); });
                if (agreed.failed()) {
                    return agreed;
                }
                if (const std::int64_t at = schedule.round_pair[static_cast<std::size_t>(round)]; at >= 0) {
                    const auto [ic, lead] = schedule.pairs[static_cast<std::size_t>(at)];
                    feed(ic, lead, buffers[0]);
                }
            }
        }
        return LocalFailure{};
    };
    const auto replay_window = [&](std::int64_t first, std::int64_t stop) {
        return replay(
            first, stop, [&] { return aggregator->end_histogram_window(); },
            [&](std::int64_t ic, std::int64_t lead, const PairBuffers<T>& b) {
                aggregator->replay_histogram<T>(ic, lead, FieldShard<T>{b.truth, channels}, b.members);
            });
    };
    std::future<LocalFailure> next;  // with `overlap`, the reads of the next round of the same window
    std::size_t window = 0;          // the window of this round
    std::int64_t window_first = 0;   // its first round
    for (std::int64_t round = 0; round < total_rounds && !failure.failed(); ++round) {
        PairBuffers<T>& b = buffers[overlap ? round % 2 : 0];
        const double read_started = MPI_Wtime();
        failure = next.valid() ? next.get() : read_round(round, b);
        clock.read += MPI_Wtime() - read_started;  // with `overlap`, the wait for the reads
        const bool ends_window =
            histogram && window < schedule.window_ends.size() && round + 1 == schedule.window_ends[window];
        if (overlap && !ends_window && round + 1 < total_rounds &&
            schedule.round_pair[static_cast<std::size_t>(round + 1)] >= 0) {
            next = std::async(std::launch::async, read_round, round + 1, std::ref(buffers[(round + 1) % 2]));
        }
        const LocalFailure agreed = attempt([&] { check_collectively(together, failure); });
        if (agreed.failed()) {
            failure = agreed;  // the whole group stops here, then raises with the world
            break;
        }
        if (const std::int64_t at = schedule.round_pair[static_cast<std::size_t>(round)]; at >= 0) {
            const auto [ic, lead] = schedule.pairs[static_cast<std::size_t>(at)];
            aggregator->record<T>(ic, lead, FieldShard<T>{b.truth, channels}, b.members, b.climatology);
            ++clock.steps;
            if (in.plan.on_step) {
                in.plan.on_step(name, ++done, total);
            }
        }
        if (ends_window) {
            failure = replay_window(window_first, round + 1);
            window_first = round + 1;
            ++window;
        }
    }
    if (next.valid()) {
        (void)next.get();  // a read under way when the group stopped
    }
    check_collectively(mesh.world(), failure);
    if (quantiles) {  // the quantiles' passes after the first (record's): every pair read again while they ask
        failure = replay(
            0, total_rounds, [&] { return aggregator->end_quantile_pass<T>(); },
            [&](std::int64_t, std::int64_t lead, const PairBuffers<T>& b) {
                aggregator->replay_quantiles<T>(lead, FieldShard<T>{b.truth, channels}, b.members);
            });
        check_collectively(mesh.world(), failure);
    }
    ScoredVariable scored{aggregator->finish(name), {}};
    clock.add(aggregator->timings());
    if (const Aggregator* normalized = aggregator->normalized()) {
        scored.normalized = aggregator->normalized_scores();
        clock.add(normalized->timings());
    }
    return scored;
}

/// The variables of `names` among `available`, in the order of `names` (every one when empty).
std::vector<io::SourceVariable> chosen_variables(const std::vector<io::SourceVariable>& available,
                                                 const std::vector<std::string>& names) {
    if (names.empty()) {
        return available;
    }
    std::vector<io::SourceVariable> chosen;
    for (const std::string& name : names) {
        const auto it = std::find_if(available.begin(), available.end(),
                                     [&](const io::SourceVariable& v) { return v.name == name; });
        if (it == available.end()) {
            std::string have;
            for (const io::SourceVariable& v : available) {
                have += (have.empty() ? "" : ", ") + v.name;
            }
            throw ArgumentError(setting_name("variables") + ": the inputs have no variable '" + name + "' (they have " +
                                have + ")");
        }
        chosen.push_back(*it);
    }
    return chosen;
}

/// Refuses longitudes that are not whole latitude circles at equal spacing (a regional grid, half the globe), which a
/// spherical transform would take as whole circles. A spacing may differ from 360 / nlon by a thousandth of itself
/// (longitudes stored in float).
void check_whole_circles(const std::vector<double>& lon_deg) {
    const auto n = static_cast<std::int64_t>(lon_deg.size());
    const double spacing = 360.0 / static_cast<double>(n);
    const double direction = n > 1 && lon_deg[1] < lon_deg[0] ? -1.0 : 1.0;  // eastward or westward
    for (std::int64_t j = 0; j < n; ++j) {
        const double next = j + 1 < n ? lon_deg[static_cast<std::size_t>(j + 1)] : lon_deg.front() + direction * 360.0;
        const double step = direction * (next - lon_deg[static_cast<std::size_t>(j)]);
        if (!(std::abs(step - spacing) <= 1e-3 * spacing)) {
            throw ArgumentError(setting_name("spectrum") +
                                ": a spherical power spectrum needs whole latitude circles, but the " +
                                std::to_string(n) + " longitudes run from " + number_text(lon_deg.front()) + " to " +
                                number_text(lon_deg.back()) + " degrees, not at equal steps of 360 / " +
                                std::to_string(n) + " = " + number_text(spacing) + " around the globe (step " +
                                std::to_string(j) + " is " + number_text(step) + ")");
        }
    }
}

}  // namespace

MeshShape default_mesh(int ranks) {
    int lat = 1;
    for (int h = 1; h * h <= ranks; ++h) {
        if (ranks % h == 0) {
            lat = h;
        }
    }
    return {1, lat, ranks / lat};
}

AreaWeights make_weights(AreaWeighting kind, const io::SourceGrid& g, const Box& box) {
    if (kind == AreaWeighting::cos_lat) {
        return cos_lat_weights(g.lat_deg, g.shape().nlon, box.lat);
    }
    const auto lat_bounds = g.lat_bounds_deg.empty() ? bounds_from_centres(g.lat_deg, true) : g.lat_bounds_deg;
    const auto lon_bounds = g.lon_bounds_deg.empty() ? bounds_from_centres(g.lon_deg, false) : g.lon_bounds_deg;
    return cell_area_weights(lat_bounds, lon_bounds, box);
}

EvaluationResult evaluate(const EvaluationPlan& plan, const io::ForecastSource& source, const Communicator& world) {
    const double run_started = MPI_Wtime();
    const io::ForecastLayout& layout = source.layout();
    const io::SourceGrid& g = source.grid();
    const std::vector<io::SourceVariable> variables = chosen_variables(source.variables(), plan.variables);
    // Every rank read the files itself: a file still being written, or a stale copy on one node, would give ranks
    // other sizes, variables or coordinates and so other collectives or other numbers. Agree first.
    agree_or_throw(world, "",
                   {g.shape().nlat, g.shape().nlon, layout.initial_conditions, layout.members, layout.lead_times,
                    static_cast<std::int64_t>(variables.size()), io::forecast_hash(source, variables).value()},
                   "the inputs as each rank reads them (grid, initial conditions, members, lead times, variables, "
                   "hash of the coordinates, times, lead and initial times, names and types)");
    EvaluationResult result;
    result.report = plan.scoring.report;
    result.split = plan.split;
    result.weights = plan.weights;
    result.summation = plan.scoring.summation;
    result.policy = plan.scoring.policy;
    result.grid = g;
    result.layout = layout;
    result.lead_times = source.lead_times();
    result.climatology = plan.climatology;
    result.time_means = plan.scoring.report == ReportKind::pair ? io::every_row(layout.lead_times)
                                                                : io::time_mean_rows(source, plan.include_initial_step);

    const MeshShape shape = plan.mesh ? *plan.mesh : default_mesh(world.size());
    result.mesh = shape;
    const ProcessMesh mesh(world, shape);
    const ShardedGrid grid(mesh, g.shape(), plan.split);
    const ForecastExtent extent{layout.initial_conditions, layout.members, layout.lead_times};
    const WorkShare work = share_work(plan.data_split, extent, shape.data, mesh.coords().data);
    result.data_split = work.split;
    const std::int64_t rounds = plan.access.collective() ? read_rounds(work.split, extent, shape.data) : 0;
    const AreaWeights weights = make_weights(plan.weights, g, grid.box());
    io::ScoredRegions regions;
    std::unique_ptr<io::Climatology> climatology;
    std::int64_t climatology_hash = 0;
    check_collectively(world, attempt([&] {
                           regions = io::make_regions(plan.regions, g, grid.box(), weights, plan.access);
                           if (!plan.climatology.empty()) {
                               climatology = std::make_unique<io::Climatology>(plan.climatology, source, plan.access);
                               climatology_hash = climatology->hash();
                           }
                       }));
    // The climatology and the masks too: their layout as each rank reads it, as the forecast's.
    agree_or_throw(world, "", {climatology ? 1 : 0, climatology_hash},
                   setting_name("climatology") + " '" + plan.climatology +
                       "' as each rank reads it (present, hash of its variables' dims, sizes and types and of its "
                       "coordinates)");
    agree_or_throw(world, "", {static_cast<std::int64_t>(regions.regions.size()), regions.hash.value()},
                   "the " + setting_name("regions") +
                       " boxes and masks as each rank reads them (regions, hash of the boxes and of the mask "
                       "files' coordinates and variables)");
    io::check_region_weights(mesh.spatial(), regions);
    std::unique_ptr<io::Normalization> normalization;
    std::int64_t normalization_hash = 0;
    if (!plan.normalize_means.empty() || !plan.normalize_stds.empty()) {
        check_collectively(
            world, attempt([&] {
                if (plan.scoring.report != ReportKind::forecast) {
                    throw ArgumentError(setting_name("normalization") + ": ACE's normalised scores are a forecast's");
                }
                normalization =
                    std::make_unique<io::Normalization>(plan.normalize_means, plan.normalize_stds, variables);
                normalization_hash = normalization->hash();
            }));
        agree_or_throw(world, "", {normalization_hash},
                       setting_name("normalization") + " '" + plan.normalize_means + "' '" + plan.normalize_stds +
                           "' as each rank reads them (hash of every mean and std)");
        result.normalize_means = plan.normalize_means;
        result.normalize_stds = plan.normalize_stds;
    }
    std::vector<RegionWeights> region_weights;
    for (std::size_t r = 0; r < regions.regions.size(); ++r) {
        region_weights.push_back({regions.regions[r].name, regions.weights[r], regions.cells[r]});
    }
    result.contents = {.ensemble = plan.scoring.report == ReportKind::forecast && layout.members > 1 &&
                                   plan.scoring.lead_ensemble_scores,
                       .anomaly_correlation = climatology != nullptr,
                       .ensemble_cells = !plan.scoring.ensemble_cell_leads.empty(),
                       .power_spectrum = plan.scoring.spectrum.has_value(),
                       .near_zero_fraction = plan.near_zero_fraction.has_value(),
                       .trend = plan.scoring.trend,
                       .annual = plan.scoring.annual.has_value(),
                       .seasonal = plan.scoring.seasonal,
                       .regional_index = plan.enso_index,
                       .histogram = plan.scoring.histogram.has_value(),
                       .index_regression = !plan.enso_coefficient_index.empty(),
                       .tripole_index = plan.ipo_index};
    // ACE's climate families, in one agreement: each a forecast's, their variable lists naming scored variables, and
    // the valid times; ACE's gates (a trend needs two counted steps, annual means a run of more than 730 days).
    std::vector<ValidTime> pair_times;
    const AggregatorOptions& scoring = plan.scoring;
    double annual_timestep = 0.0;                       // with the annual means, the files' timestep
    std::optional<AreaWeights> nino34;                  // with the ENSO index, ACE's weights of its box
    std::optional<std::array<AreaWeights, 3>> tripole;  // with the IPO index, ACE's weights of its boxes
    std::vector<double> coefficient_index;              // with the ENSO coefficient, its index per pair
    if (plan.near_zero_fraction || scoring.trend || scoring.video || scoring.annual || scoring.seasonal ||
        plan.enso_index || plan.ipo_index || scoring.histogram || !plan.enso_coefficient_index.empty()) {
        std::vector<std::string> variable_names;
        for (const io::SourceVariable& v : variables) {
            variable_names.push_back(v.name);
        }
        const auto forecast_only = [&](const char* setting, const char* family) {
            if (scoring.report != ReportKind::forecast) {
                throw ArgumentError(setting_name(setting) + ": ACE's " + family + " a forecast's");
            }
        };
        // A family is a forecast's, and the variables it names are scored ones.
        const auto family = [&](const char* setting, const char* what, const std::vector<std::string>& names) {
            forecast_only(setting, what);
            check_variable_names(setting, "variables", names, variable_names);
        };
        check_collectively(
            world, attempt([&] {
                if (plan.near_zero_fraction) {
                    forecast_only("near_zero_fraction", "near-zero fractions are");
                    plan.near_zero_fraction->check(variable_names);
                }
                if (scoring.video) {
                    family("video", "video is", plan.video_variables);
                }
                if (scoring.trend) {
                    family("trend", "trend is", plan.trend_variables);
                    if (result.time_means.rows.size() < 2) {
                        throw ArgumentError(setting_name("trend") +
                                            ": a trend needs at least two counted lead times (ACE's rule), got " +
                                            std::to_string(result.time_means.rows.size()));
                    }
                }
                if (scoring.seasonal) {
                    family("seasonal", "seasonal means are", plan.seasonal_variables);
                }
                if (scoring.histogram) {
                    family("histogram", "histograms are", plan.histogram_variables);
                    if (plan.histogram_window < 0) {
                        throw ArgumentError(setting_name("forward_steps_in_memory") + ": " +
                                            std::to_string(plan.histogram_window) + " must be at least 1");
                    }
                }
                if (scoring.annual) {
                    family("annual", "annual means are", plan.annual_variables);
                    annual_timestep = longer_than_two_years(source, "annual", "annual means need");
                }
                if (plan.enso_index) {
                    family("enso_index", "ENSO index is", {});
                    longer_than_two_years(source, "enso_index", "ENSO index needs");
                    if (std::none_of(variables.begin(), variables.end(), [](const io::SourceVariable& v) {
                            return std::find(ace_sst_names.begin(), ace_sst_names.end(), v.name) != ace_sst_names.end();
                        })) {
                        throw ArgumentError(setting_name("enso_index") +
                                            ": no scored variable is named sst, surface_temperature or TS, the "
                                            "variables ACE forms its Nino 3.4 index of");
                    }
                    nino34 = ace_regional_weights(region_weights.front().weights.view(), g.lat_deg, g.lon_deg,
                                                  grid.box(), nino34_box);
                }
                if (plan.ipo_index) {
                    family("ipo_index", "IPO index is", {});
                    longer_than_days(source, 80 * 365, "ipo_index", "IPO index needs");
                    if (std::none_of(variables.begin(), variables.end(), [](const io::SourceVariable& v) {
                            return std::find(ace_ipo_names.begin(), ace_ipo_names.end(), v.name) != ace_ipo_names.end();
                        })) {
                        throw ArgumentError(
                            setting_name("ipo_index") +
                            ": no scored variable is named sst, the variable ACE forms its IPO index of");
                    }
                    tripole = ace_tripole_weights(g.lat_deg, g.lon_deg, grid.box());
                }
                if (!plan.enso_coefficient_index.empty()) {
                    forecast_only("enso_coefficient_index", "ENSO coefficient is");
                    coefficient_index = enso_coefficient_index(source, plan.enso_coefficient_index);
                }
                if (scoring.trend || scoring.annual || scoring.seasonal || plan.enso_index || plan.ipo_index) {
                    pair_times = valid_times(source, scoring.trend      ? "trend"
                                                     : scoring.annual   ? "annual"
                                                     : scoring.seasonal ? "seasonal"
                                                     : plan.enso_index  ? "enso_index"
                                                                        : "ipo_index");
                }
            }));
    }
    if (const std::optional<QuantileOptions>& quantiles = plan.scoring.quantiles) {  // the same plan on every rank
        if (quantiles->probabilities.empty()) {
            throw ArgumentError(setting_name("quantiles") + ": no probability given");
        }
        try {
            check_quantile_probabilities(quantiles->probabilities);
        } catch (const ArgumentError& error) {
            throw ArgumentError(setting_name("quantiles") + ": " + error.what());
        }
        result.quantiles = quantiles;
    }
    if (plan.scoring.spectrum) {
        result.spectrum = plan.scoring.spectrum;
        check_collectively(world, attempt([&] {
                               check_whole_circles(g.lon_deg);
                               result.spectrum_degrees = spectrum_size(plan.scoring.spectrum->spec, g.shape()).lmax;
                               if (plan.scoring.spectrum->fill) {
                                   validate_flood_fill(*plan.scoring.spectrum->fill, g.shape());
                               }
                           }));
        result.spectrum_latitude_offset_deg =
            latitude_offset_from_nodes_deg(plan.scoring.spectrum->spec.grid, g.lat_deg);
    }

    // Before anything field-sized is allocated: does every node hold what its ranks need?
    std::uint64_t largest = 0;
    for (const io::SourceVariable& v : variables) {
        const AggregatorShape one{extent, v.channels, work};
        AggregatorOptions sized = plan.scoring;
        if (plan.near_zero_fraction) {
            sized.near_zero_fraction = NearZeroFractionOptions{};
        }
        const std::uint64_t each =
            Aggregator::bytes(grid.box(), g.shape(), one, region_weights.size(),
                              v.type == io::ValueType::float64 ? 8 : 4, shape.data, shape.spatial_size(), sized);
        largest = std::max(largest, normalization ? 2 * each : each);  // a second aggregator, its buffers
    }
    check_memory_fits(world, largest,
                      "grid " + std::to_string(g.shape().nlat) + " x " + std::to_string(g.shape().nlon) + ", " +
                          std::to_string(layout.initial_conditions) + " initial conditions x " +
                          std::to_string(layout.members) + " members x " + std::to_string(layout.lead_times) +
                          " lead times, " + std::to_string(variables.size()) + " variables, mesh " + to_string(shape));

    const RunInputs inputs{plan,
                           source,
                           grid,
                           work,
                           rounds,
                           region_weights,
                           climatology.get(),
                           result.time_means,
                           normalization.get(),
                           pair_times,
                           annual_timestep,
                           nino34 ? &*nino34 : nullptr,
                           tripole ? &*tripole : nullptr,
                           coefficient_index};
    RunClock clock;
    std::int64_t done = 0;
    const std::int64_t total = work.pairs() * static_cast<std::int64_t>(variables.size());
    for (const io::SourceVariable& v : variables) {
        ScoredVariable scored = v.type == io::ValueType::float64 ? score_variable<double>(inputs, v, clock, done, total)
                                                                 : score_variable<float>(inputs, v, clock, done, total);
        std::move(scored.scores.begin(), scored.scores.end(), std::back_inserter(result.channels));
        std::move(scored.normalized.begin(), scored.normalized.end(), std::back_inserter(result.normalized));
    }
    if (normalization) {
        std::vector<double> rmse;
        std::vector<bool> missing;
        for (const ChannelScores& c : result.normalized) {
            for (const ScoreValue& v : c.regions.front().time_means) {
                if (v.score->ace_normalized && v.score->family == ScoreFamily::time_mean) {
                    rmse.push_back(v.value);
                    missing.push_back(target_missing_everywhere(c));
                }
            }
        }
        result.normalized_rmse_channel_mean = channel_mean(rmse, missing);
    }

    if (plan.timings) {
        // Every rank's phase times, each in its own slot of a world-wide sum (exact: one value a slot).
        const AggregatorTimings& a = clock.aggregation;
        const std::vector<double> mine = {clock.read,
                                          a.evaluation.agreement_s,
                                          a.evaluation.halo_s,
                                          a.evaluation.compute_s,
                                          a.evaluation.allreduce_s,
                                          a.zonal_s,
                                          a.time_sums_s,
                                          a.finish_s,
                                          MPI_Wtime() - run_started};
        result.timings.names = {"read",  "agreement", "halo",  "compute", "allreduce",
                                "zonal", "time_sums", "final", "total"};
        const std::size_t width = mine.size();
        const std::size_t first = width * static_cast<std::size_t>(world.rank());
        result.timings.per_rank.assign(width * static_cast<std::size_t>(world.size()), 0.0);
        std::copy(mine.begin(), mine.end(), result.timings.per_rank.begin() + static_cast<std::ptrdiff_t>(first));
        reduce_sum<double>(mesh, result.timings.per_rank);
        spatial_reduce_sum<double>(mesh, result.timings.per_rank);
        result.timings.steps = clock.steps;
    }
    result.sharded = grid;
    return result;
}

}  // namespace gridshard
