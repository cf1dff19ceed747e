// The forecast evaluation of `gridshard eval` (docs/forecast.md): forecasts from several initial conditions,
// each with one or more ensemble members, scored per lead time as ACE's inference aggregators score them.
//
// Work is split over the data group by initial condition, by lead time or by member; every rank reads only
// its box of its (initial condition, lead time, members). Per pair and region: one fused evaluation of this
// rank's members (one halo exchange, one allreduce over the spatial group), the ensemble scores (one
// allreduce; with the members split, their exchange over the data group first) and the anomaly correlation
// (one allreduce); per pair one zonal mean (one allreduce over the lon group). Every per-sample value is
// written into its own slot by exactly one rank, so the sums over the data and spatial groups at the end
// are exact, and the means over samples are then taken in sample order: the result does not depend on the
// mesh. The time means are per-point sums (metrics/time_mean.hpp) merged over the data group; the maps are
// gathered onto world rank 0, which writes every output.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "eval_support.hpp"
#include "forecast_output.hpp"
#include "forecast_source.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/memory_check.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/metrics/ensemble.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/time_mean.hpp"
#include "options.hpp"

namespace gridshard::cli {
namespace {

/// The valid time of every (initial condition, lead time), initial condition slowest: the initial time
/// plus the lead, or the lead coordinate itself when it is a time ("hours since ..."). Throws ArgumentError
/// when the forecast does not say.
std::vector<io::DateTime> valid_dates(const ForecastSource& source) {
    const ForecastLayout& l = source.layout();
    const LeadTimes& t = source.lead_times();
    const auto lead_count = static_cast<std::size_t>(l.lead_times);
    if (t.values.size() != lead_count) {
        throw ArgumentError("--climatology by day of year: the forecast has no lead-time coordinate");
    }
    std::vector<io::DateTime> dates;
    if (t.units.find(" since ") != std::string::npos) {
        const io::TimeAxis axis = io::parse_time_units(t.units, source.grid().time_calendar);
        for (std::int64_t ic = 0; ic < l.initial_conditions; ++ic) {
            for (const double v : t.values) {
                dates.push_back(axis.date_at(v));
            }
        }
        return dates;
    }
    const double lead_seconds = io::seconds_per_unit(t.units);
    if (lead_seconds == 0.0 || t.init_times.size() != static_cast<std::size_t>(l.initial_conditions)) {
        throw ArgumentError(
            "--climatology by day of year needs the initial times (init_time) and lead times in a "
            "unit of time; the forecast has lead-time units '" +
            t.units + "' and " + std::to_string(t.init_times.size()) + " initial times");
    }
    const io::TimeAxis axis = io::parse_time_units(t.init_time_units, t.calendar);
    for (const double init : t.init_times) {
        for (const double v : t.values) {
            dates.push_back(axis.date_after(init, v * lead_seconds));
        }
    }
    return dates;
}

/// The rows of `source`'s lead-time axis that the time means count. A row is at lead 0 where its lead-time value
/// is 0 in a unit of duration ("microseconds", "hours") or without units, or, on an axis of instants ("hours
/// since ..."), where it is the initial time of every initial condition; where the forecast does not say (no
/// lead-time coordinate, an axis of instants without initial times), no row is at lead 0. No MPI calls.
TimeMeanRows time_mean_rows(const ForecastSource& source, bool include_initial_step) {
    const ForecastLayout& l = source.layout();
    const LeadTimes& t = source.lead_times();
    TimeMeanRows out;
    std::vector<bool> initial(static_cast<std::size_t>(l.lead_times), false);
    out.leads_known = t.values.size() == initial.size();
    if (out.leads_known && t.units.find(" since ") == std::string::npos) {
        for (std::size_t k = 0; k < initial.size(); ++k) {
            initial[k] = t.values[k] == 0.0;
        }
    } else if (out.leads_known) {
        out.leads_known = !t.init_times.empty();
        try {
            const io::TimeAxis rows = io::parse_time_units(t.units, source.grid().time_calendar);
            const io::TimeAxis inits = io::parse_time_units(t.init_time_units, t.calendar);
            for (std::size_t k = 0; k < initial.size() && out.leads_known; ++k) {
                const io::DateTime row = rows.date_at(t.values[k]);
                initial[k] = std::all_of(t.init_times.begin(), t.init_times.end(), [&](double init) {
                    return io::same_date(row, inits.date_at(init), rows.calendar);
                });
            }
        } catch (const ArgumentError&) {  // times that are no dates: the lead of no row is known
            out.leads_known = false;
            initial.assign(initial.size(), false);
        }
    }
    out.initial_rows = std::count(initial.begin(), initial.end(), true);
    out.initial_counted = out.initial_rows > 0 && (include_initial_step || out.initial_rows == l.lead_times);
    for (std::size_t k = 0; k < initial.size(); ++k) {
        if (!initial[k] || out.initial_counted) {
            out.rows.push_back(static_cast<std::int64_t>(k));
        }
    }
    return out;
}

/// What each rank read of the forecast, for the agreement over ranks: the grid, the layout, the lead and
/// initial times and the variables to score.
InputHash forecast_hash(const ForecastSource& source, const std::vector<SourceVariable>& variables) {
    InputHash hash;
    hash.add(source.grid());
    const ForecastLayout& l = source.layout();
    for (const std::int64_t n :
         {l.initial_conditions, l.members, l.lead_times, std::int64_t{l.folded}, std::int64_t{l.truth_repeated}}) {
        hash.add(n);
    }
    for (const std::string* text : {&l.members_from, &l.initial_condition_dim, &l.member_dim}) {
        hash.add(*text);
    }
    const LeadTimes& t = source.lead_times();
    hash.add(t.values);
    hash.add(t.units);
    hash.add(t.init_times);
    hash.add(t.init_time_units);
    hash.add(t.calendar);
    for (const SourceVariable& v : variables) {
        hash.add(v);
    }
    return hash;
}

/// How one variable of a climatology is read: a plan and, per (initial condition, lead time), the indices of
/// its indexed dims (none for a single field).
struct ClimatologyPlan {
    io::VariableReader reader;
    std::vector<std::vector<std::int64_t>> positions;
    /// "time mean", "per lead time" or "day of year" (with "and hour").
    std::string kind;
};

/// The climatology of `--climatology`: per variable one field, one per lead time, or one per day of year
/// (and hour of day), as WeatherBench 2's climatologies are laid out (dims `dayofyear` 1..366 and `hour`).
class Climatology {
  public:
    Climatology(const std::string& path, const ForecastSource& source, const InputAccess& access)
        : reader_(access.open(path)), source_(source) {
        const SourceGrid& grid = source.grid();
        if (!io::same_grid(reader_.grid(), grid)) {
            throw ArgumentError("--climatology '" + path + "' (" + std::to_string(reader_.grid().shape().nlat) + " x " +
                                std::to_string(reader_.grid().shape().nlon) + ") is not on the forecast's grid (" +
                                std::to_string(grid.shape().nlat) + " x " + std::to_string(grid.shape().nlon) + ")");
        }
    }

    /// What this rank read of the file, for the agreement over ranks: its grid, its variables' dims, sizes and
    /// types, and its dayofyear and hour coordinates (the layout of its values and their coordinates).
    [[nodiscard]] std::int64_t hash() const {
        InputHash hash;
        hash.add(reader_.grid());
        for (const std::string& name : reader_.field_variables()) {
            hash.add(reader_.variable(name));
        }
        for (const std::string dim : {"dayofyear", "hour"}) {
            if (const std::optional<io::WholeVariable> coordinate = reader_.whole_variable(dim)) {
                hash.add(coordinate->values);
            }
        }
        return hash.value();
    }

    /// A plan for `variable` on `box`. Throws ArgumentError for a variable of other levels, or of a time
    /// axis that is neither one field nor one per lead time, or a day or hour it lacks.
    [[nodiscard]] ClimatologyPlan open(const SourceVariable& variable, const Box& box) const {
        const io::VariableShape v = reader_.variable(variable.name);
        const ForecastLayout& l = source_.layout();
        const std::string where = "--climatology '" + reader_.path() + "': variable '" + variable.name + "'";
        const auto has = [&](const std::string& dim) {
            return std::find(v.dim_names.begin(), v.dim_names.end() - 2, dim) != v.dim_names.end() - 2;
        };
        std::vector<std::string> indexed;
        std::string kind;
        if (has("dayofyear")) {
            for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
                if (v.dim_names[k] == "dayofyear" || v.dim_names[k] == "hour") {
                    indexed.push_back(v.dim_names[k]);
                }
            }
            kind = has("hour") ? "day of year and hour" : "day of year";
        } else if (v.time_index) {
            indexed.push_back(v.dim_names[static_cast<std::size_t>(*v.time_index)]);
            if (v.ntime != 1 && v.ntime != l.lead_times) {
                throw ArgumentError(where + " has " + std::to_string(v.ntime) +
                                    " times; it needs 1 (a time mean), one per lead time (" +
                                    std::to_string(l.lead_times) + ") or a dayofyear dim");
            }
            kind = v.ntime == l.lead_times && l.lead_times > 1 ? "per lead time" : "time mean";
        } else {
            kind = "time mean";
        }
        std::int64_t channels = 1;
        for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
            if (std::find(indexed.begin(), indexed.end(), v.dim_names[k]) == indexed.end()) {
                channels *= v.dim_sizes[k];
            }
        }
        if (channels != variable.channels) {
            throw ArgumentError(where + " has " + std::to_string(channels) + " levels per field, the forecast " +
                                std::to_string(variable.channels));
        }
        ClimatologyPlan plan{reader_.reader(variable.name, box, indexed), {}, kind};
        const std::size_t pairs = static_cast<std::size_t>(l.initial_conditions * l.lead_times);
        if (kind == "per lead time") {
            for (std::size_t k = 0; k < pairs; ++k) {
                plan.positions.push_back({static_cast<std::int64_t>(k) % l.lead_times});
            }
        } else if (kind == "time mean") {
            plan.positions.assign(pairs, std::vector<std::int64_t>(indexed.size(), 0));
        } else {
            const std::vector<io::DateTime> dates = valid_dates(source_);
            for (const io::DateTime& d : dates) {
                std::vector<std::int64_t> at;
                for (const std::string& dim : indexed) {
                    const int wanted = dim == "dayofyear" ? d.day_of_year : d.hour;
                    if (dim == "hour" && (d.minute != 0 || d.second != 0.0)) {
                        throw ArgumentError(where + ": a valid time at minute " + std::to_string(d.minute) +
                                            " is not on an hour of its 'hour' dim");
                    }
                    at.push_back(index_of(dim, wanted, v, where));
                }
                plan.positions.push_back(std::move(at));
            }
        }
        return plan;
    }

  private:
    // The index of `value` on dim `dim` of `v`: by its coordinate variable, or (without one) day 1 at index 0
    // and hours evenly spread over the day.
    [[nodiscard]] std::int64_t index_of(const std::string& dim, int value, const io::VariableShape& v,
                                        const std::string& where) const {
        const std::int64_t size = v.dim_sizes[static_cast<std::size_t>(
            std::find(v.dim_names.begin(), v.dim_names.end(), dim) - v.dim_names.begin())];
        if (const std::optional<io::WholeVariable> coordinate = reader_.whole_variable(dim)) {
            for (std::size_t k = 0; k < coordinate->values.size(); ++k) {
                if (coordinate->values[k] == value) {
                    return static_cast<std::int64_t>(k);
                }
            }
        } else if (dim == "dayofyear" && value >= 1 && value <= size) {
            return value - 1;
        } else if (dim == "hour" && size > 0 && 24 % size == 0 && value % (24 / size) == 0) {
            return value / (24 / size);
        }
        throw ArgumentError(where + " has no " + (dim == "hour" ? "hour " : "day of year ") + std::to_string(value) +
                            " on its '" + dim + "' dim, which a valid time of the forecast needs");
    }

    io::NetcdfReader reader_;
    const ForecastSource& source_;
};

/// The regions to score, global first, with this rank's weights for each.
struct ScoredRegions {
    std::vector<Region> regions;
    std::vector<AreaWeights> weights;
    std::vector<std::int64_t> inside;  ///< this rank's grid points inside each box, or where each mask is not 0
    InputHash hash;                    ///< the regions as given and their mask files as this rank reads them
};

ScoredRegions make_regions(const std::vector<std::string>& texts, const SourceGrid& g, const Box& box,
                           const AreaWeights& base, const InputAccess& access) {
    ScoredRegions out;
    out.regions.push_back(named_regions().front());
    out.weights.push_back(base);
    out.inside.push_back(box.area());
    for (const std::string& text : texts) {
        Region r = parse_region(text);
        const auto same = [&](const Region& other) { return other.name == r.name; };
        if (std::any_of(out.regions.begin(), out.regions.end(), same)) {
            throw ArgumentError("--region '" + text + "': region '" + r.name + "' is given twice");
        }
        out.hash.add(r.name);
        out.hash.add(std::vector<double>{r.box.south, r.box.north, r.box.west, r.box.east});
        out.hash.add(std::int64_t{r.box.whole_longitude});
        if (r.mask_file.empty()) {
            out.weights.push_back(region_weights(base.view(), g.lat_deg, g.lon_deg, box, r.box));
            std::int64_t inside = 0;
            for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                    inside +=
                        in_box(r.box, g.lat_deg[static_cast<std::size_t>(i)], g.lon_deg[static_cast<std::size_t>(j)])
                            ? 1
                            : 0;
                }
            }
            out.inside.push_back(inside);
        } else {
            const io::NetcdfReader mask = access.open(r.mask_file);
            if (!io::same_grid(mask.grid(), g)) {
                throw ArgumentError("--region '" + text + "': '" + r.mask_file + "' is not on the forecast's grid");
            }
            out.hash.add(mask.grid());
            out.hash.add(mask.variable(r.mask_variable));
            io::VariableReader plan = mask.reader(r.mask_variable, box);
            if (plan.values_per_step() != static_cast<std::size_t>(box.area())) {
                throw ArgumentError("--region '" + text + "': variable '" + r.mask_variable +
                                    "' must be one lat x lon field");
            }
            std::vector<double> values(plan.values_per_step());
            if (access.collective()) {  // every rank stops at the same mask when one cannot read it
                check_collectively(*access.comm, attempt([&] { plan.read_step(0, std::span<double>(values)); }));
            } else {
                plan.read_step(0, std::span<double>(values));
            }
            out.weights.push_back(mask_weights(base.view(), box, values));
            out.inside.push_back(
                std::count_if(values.begin(), values.end(), [](double v) { return std::isfinite(v) && v != 0.0; }));
        }
        out.regions.push_back(std::move(r));
    }
    return out;
}

/// Collective over `spatial`: refuses, on every rank alike, a region whose weights are zero over the whole
/// grid, naming it, its box or mask and why (no grid point inside the box, or every weight zero), before a
/// score divides by its total weight. One allreduce.
void check_region_weights(const Communicator& spatial, const ScoredRegions& regions) {
    const std::size_t n = regions.regions.size();
    std::vector<std::int64_t> counts(2 * n, 0);
    for (std::size_t k = 0; k < n; ++k) {
        const std::vector<double>& w = regions.weights[k].values;
        counts[2 * k] = regions.inside[k];
        counts[2 * k + 1] = std::count_if(w.begin(), w.end(), [](double x) { return x > 0.0; });
    }
    detail::allreduce_sum_in_place(spatial, counts);
    for (std::size_t k = 0; k < n; ++k) {
        if (counts[2 * k + 1] > 0) {
            continue;
        }
        const Region& r = regions.regions[k];
        const bool box = r.mask_file.empty();
        char text[160];
        std::snprintf(text, sizeof text, "box %g,%g,%g,%g", r.box.south, r.box.north, r.box.west, r.box.east);
        const std::string where =
            box ? std::string(text) : "mask '" + r.mask_file + "' variable '" + r.mask_variable + "'";
        throw ArgumentError("--region: region '" + r.name + "' (" + where + "): " +
                            (box && counts[2 * k] == 0    ? "no grid point inside"
                             : !box && counts[2 * k] == 0 ? "every weight zero (the mask is 0 or NaN everywhere)"
                                                          : "every weight zero (the area weights vanish there)"));
    }
}

/// Which (initial condition, lead time) pairs a data rank scores.
struct WorkShare {
    Range initial_conditions;
    Range leads;
    Range members;
    std::string split;  // "initial-conditions", "lead-times" or "members"
};

/// By default initial conditions when there are at least as many as data ranks, else lead times when there
/// are (or the forecast has one member), else members; or as asked.
WorkShare share_work(const std::string& requested, const ForecastLayout& l, int data, int me) {
    std::string split = requested;
    if (split == "auto") {
        split = l.initial_conditions >= data            ? "initial-conditions"
                : l.lead_times >= data || l.members < 2 ? "lead-times"
                                                        : "members";
    }
    if (split == "members" && l.members < 2) {
        throw ArgumentError("--data-split members: the forecast has " + std::to_string(l.members) +
                            " member per initial condition");
    }
    const Range ics{0, l.initial_conditions};
    const Range leads{0, l.lead_times};
    const Range members{0, l.members};
    if (split == "initial-conditions") {
        return {data_block(l.initial_conditions, data, me, true), leads, members, split};
    }
    if (split == "lead-times") {
        return {ics, data_block(l.lead_times, data, me, true), members, split};
    }
    return {ics, leads, data_block(l.members, data, me, true), split};
}

/// Deterministic scores: ACE's names and the Evaluator scores they are.
const std::vector<std::pair<std::string, std::string>>& deterministic_scores() {
    static const std::vector<std::pair<std::string, std::string>> scores = {
        {"weighted_rmse", "rmse"},
        {"weighted_bias", "bias"},
        {"weighted_mean_gen", "mean_pred"},
        {"weighted_mean_target", "mean_truth"},
        {"weighted_std_gen", "std_pred"},
        {"weighted_grad_mag_percent_diff", "grad_mag_percent_diff_own_points"},  // ACE's rule: each field's own
    };
    return scores;
}

EvaluationOptions evaluator_options(const EvalOptions& options) {
    EvaluationOptions o{.summation = options.summation, .policy = options.policy};
    o.scores.clear();
    for (const auto& [ace_name, name] : deterministic_scores()) {
        o.scores.push_back(score_definition(name));
    }
    return o;
}

/// Everything one variable's evaluation holds for the report.
struct VariableResult {
    std::vector<ChannelForecast> channels;
};

/// Per-sample slots: index helpers over (sample, lead, region, score, channel).
struct Slots {
    std::int64_t samples, leads, regions, scores, channels;
    [[nodiscard]] std::size_t size() const {
        return static_cast<std::size_t>(samples * leads * regions * scores * channels);
    }
    [[nodiscard]] std::size_t at(std::int64_t s, std::int64_t l, std::int64_t r, std::int64_t k, std::int64_t c) const {
        return static_cast<std::size_t>((((s * leads + l) * regions + r) * scores + k) * channels + c);
    }
    /// The mean over samples, in sample order, of slot (l, r, k, c).
    [[nodiscard]] double sample_mean(const std::vector<double>& values, std::int64_t l, std::int64_t r, std::int64_t k,
                                     std::int64_t c) const {
        double sum = 0.0;
        for (std::int64_t s = 0; s < samples; ++s) {
            sum += values[at(s, l, r, k, c)];
        }
        return sum / static_cast<double>(samples);
    }
};

template <class T>
VariableResult score_forecast_variable(const ForecastSource& source, const SourceVariable& variable,
                                       const ShardedGrid& grid, const ScoredRegions& regions,
                                       const Climatology* climatology, const EvalOptions& options,
                                       const WorkShare& work, const TimeMeanRows& time_means, std::int64_t rounds,
                                       bool collective, bool maps_collectively, Progress& progress) {
    const ProcessMesh& mesh = grid.mesh();
    const Box& box = grid.box();
    const ForecastLayout& layout = source.layout();
    const std::int64_t members = layout.members;
    const std::int64_t leads = layout.lead_times;
    const std::int64_t channels = variable.channels;
    const std::int64_t nlat = grid.grid().nlat;
    const auto nregions = static_cast<std::int64_t>(regions.regions.size());
    const bool ensemble = members > 1;
    const bool with_acc = climatology != nullptr;
    std::vector<bool> counted(static_cast<std::size_t>(leads), false);  // the rows the time means count
    for (const std::int64_t row : time_means.rows) {
        counted[static_cast<std::size_t>(row)] = true;
    }
    const auto plane = static_cast<std::size_t>(channels * box.area());
    // With the members split over the data group, this rank holds its block of them (maybe none).
    const bool members_split = work.split == "members";
    const std::int64_t mine = work.members.size();
    const auto m_plane = plane * static_cast<std::size_t>(mine);
    const std::int64_t samples = layout.initial_conditions * members;
    const auto& det_names = deterministic_scores();
    const auto det_count = static_cast<std::int64_t>(det_names.size()) + (with_acc ? 1 : 0);
    const Slots det{samples, leads, nregions, det_count, channels};
    const Slots ens{layout.initial_conditions, leads, nregions, ensemble ? 5 : 0, channels};
    const Slots zonal_gen{samples, leads, 1, channels, nlat};
    const Slots zonal_target{layout.initial_conditions, leads, 1, channels, nlat};
    const std::string& name = variable.name;

    std::vector<double> det_values, ens_values, gen_zonal, target_zonal;
    std::vector<T> truth, truth_repeated, member_values, climatology_values, climatology_repeated;
    std::unique_ptr<ForecastSteps> reader;
    std::optional<ClimatologyPlan> climatology_plan;
    std::optional<TimeMeanAccumulator> gen_sums, bias_sums;
    check_collectively(mesh.world(), attempt([&] {
                           det_values = allocate_vector<double>(det.size(), "the per-sample scores of '" + name + "'");
                           ens_values = allocate_vector<double>(ens.size(), "the ensemble scores of '" + name + "'");
                           gen_zonal = allocate_vector<double>(zonal_gen.size(), "the zonal means of '" + name + "'");
                           target_zonal =
                               allocate_vector<double>(zonal_target.size(), "the zonal means of '" + name + "'");
                           truth = allocate_vector<T>(plane, "the truth buffer of '" + name + "'");
                           truth_repeated = allocate_vector<T>(m_plane, "the truth buffer of '" + name + "'");
                           member_values = allocate_vector<T>(m_plane, "the members buffer of '" + name + "'");
                           if (climatology) {
                               climatology_values = allocate_vector<T>(plane, "the climatology of '" + name + "'");
                               climatology_repeated = allocate_vector<T>(m_plane, "the climatology of '" + name + "'");
                               climatology_plan.emplace(climatology->open(variable, box));
                           }
                           gen_sums.emplace(grid, channels);
                           bias_sums.emplace(grid, channels);
                           reader = source.open(variable, box);
                       }));
    std::vector<Evaluator> evaluators;
    for (const AreaWeights& w : regions.weights) {
        if (mine > 0) {
            evaluators.emplace_back(grid, mine * channels, w.view(), evaluator_options(options));
        }
    }
    // Each per-sample value has one owner: spatial rank 0 of the data rank that scored it; the ensemble
    // scores, which every data rank gets when the members are split, data rank 0's.
    const bool owner = mesh.spatial().rank() == 0;
    const bool ensemble_owner = owner && (!members_split || mesh.coords().data == 0);
    // Ranks that score the same pairs together stop together when one cannot read, and with collective reads
    // every rank.
    const Communicator& together = members_split || collective ? mesh.world() : mesh.spatial();
    const auto repeat = [&](const std::vector<T>& one, std::vector<T>& many) {
        for (std::int64_t m = 0; m < mine; ++m) {
            std::copy(one.begin(), one.end(),
                      many.begin() + static_cast<std::ptrdiff_t>(m * static_cast<std::int64_t>(plane)));
        }
    };
    const std::vector<std::int64_t>* loaded_climatology = nullptr;  // the indices of the field in the buffer
    LocalFailure failure;
    // This rank's (initial condition, lead) pairs in order, one a round; with collective reads every rank
    // makes `rounds` rounds, reading nothing in those past its own pairs.
    const std::int64_t pairs = work.initial_conditions.size() * work.leads.size();
    for (std::int64_t round = 0; round < std::max(pairs, rounds) && !failure.failed(); ++round) {
        const bool has_pair = round < pairs;
        const std::int64_t ic = has_pair ? work.initial_conditions.begin + round / work.leads.size() : 0;
        const std::int64_t lead = has_pair ? work.leads.begin + round % work.leads.size() : 0;
        {
            ReadRound reads(collective);
            reads.read([&] {
                if (has_pair) {
                    reader->read(ic, lead, work.members, std::span<T>(truth), std::span<T>(member_values));
                } else {
                    reader->read_none();
                }
            });
            reads.read([&] {
                if (!climatology_plan) {
                    return;
                }
                const auto* at =
                    has_pair ? &climatology_plan->positions[static_cast<std::size_t>(ic * leads + lead)] : nullptr;
                if (at != nullptr && (loaded_climatology == nullptr || *loaded_climatology != *at)) {
                    loaded_climatology = nullptr;
                    climatology_plan->reader.read_at(*at, std::span<T>(climatology_values));
                    repeat(climatology_values, climatology_repeated);
                    loaded_climatology = at;
                } else {
                    climatology_plan->reader.read_none();  // collective reads: the others may read
                }
            });
            failure = attempt([&] { reads.finish(); });
            const LocalFailure agreed = attempt([&] { check_collectively(together, failure); });
            if (agreed.failed()) {
                failure = agreed;
                break;
            }
            if (!has_pair) {
                continue;
            }
        }
        repeat(truth, truth_repeated);
        const FieldShard<T> t{truth, channels};
        const FieldShard<T> t_all{truth_repeated, mine * channels};
        const FieldShard<T> p_all{member_values, mine * channels};
        for (std::int64_t r = 0; r < nregions; ++r) {
            const Weights w = regions.weights[static_cast<std::size_t>(r)].view();
            Scores s;
            std::vector<double> acc;
            if (mine > 0) {  // collective over spatial
                s = evaluators[static_cast<std::size_t>(r)].evaluate(t_all, p_all);
                if (with_acc) {
                    acc = anomaly_correlation<T>(
                        grid, t_all, p_all, FieldShard<T>{climatology_repeated, mine * channels}, w, options.summation);
                }
            }
            for (std::int64_t m = 0; m < mine && owner; ++m) {
                const std::int64_t sample = ic * members + work.members.begin + m;
                for (std::int64_t c = 0; c < channels; ++c) {
                    const auto mc = static_cast<std::size_t>(m * channels + c);
                    for (std::size_t k = 0; k < det_names.size(); ++k) {
                        det_values[det.at(sample, lead, r, static_cast<std::int64_t>(k), c)] =
                            s[det_names[k].second][mc];
                    }
                    if (with_acc) {
                        det_values[det.at(sample, lead, r, det_count - 1, c)] = acc[mc];
                    }
                }
            }
            if (ensemble) {
                const EnsembleShard<T> held{member_values, mine, channels};
                const EnsembleScores e = members_split
                                             ? ensemble_scores_over_data<T>(grid, t, held, w, options.summation)
                                             : ensemble_scores<T>(grid, t, held, w, options.summation);
                for (std::int64_t c = 0; c < channels && ensemble_owner; ++c) {
                    const auto cc = static_cast<std::size_t>(c);
                    const double values[] = {e.ensemble_mean_rmse[cc], e.spread[cc], e.spread_skill_ratio[cc],
                                             e.crps[cc], e.fair_crps[cc]};
                    for (std::int64_t k = 0; k < 5; ++k) {
                        ens_values[ens.at(ic, lead, r, k, c)] = values[k];
                    }
                }
            }
        }
        if (mine > 0) {
            const FieldShard<T> both[] = {t_all, p_all};
            const auto zonal = zonal_means<T>(grid, both, options.summation);  // one allreduce over lon
            for (std::int64_t m = 0; m < mine && mesh.coords().lon == 0; ++m) {
                const std::int64_t member = work.members.begin + m;
                for (std::int64_t c = 0; c < channels; ++c) {
                    for (std::int64_t i = 0; i < box.lat.size(); ++i) {
                        const auto local = static_cast<std::size_t>((m * channels + c) * box.lat.size() + i);
                        gen_zonal[zonal_gen.at(ic * members + member, lead, 0, c, box.lat.begin + i)] = zonal[1][local];
                        if (member == 0) {
                            target_zonal[zonal_target.at(ic, lead, 0, c, box.lat.begin + i)] = zonal[0][local];
                        }
                    }
                }
            }
        }
        if (counted[static_cast<std::size_t>(lead)]) {
            for (std::int64_t m = 0; m < mine; ++m) {
                const std::span<const T> member(member_values.data() + static_cast<std::size_t>(m) * plane, plane);
                gen_sums->add(FieldShard<T>{member, channels});
                bias_sums->add(t, FieldShard<T>{member, channels});
            }
        }
        progress.step(name);
    }
    check_collectively(mesh.world(), failure);

    // Each slot was written by one rank: the sums over the groups are exact.
    reduce_sum<double>(mesh, det_values);
    reduce_sum<double>(mesh, ens_values);
    spatial_reduce_sum<double>(mesh, gen_zonal);
    reduce_sum<double>(mesh, gen_zonal);
    spatial_reduce_sum<double>(mesh, target_zonal);
    reduce_sum<double>(mesh, target_zonal);
    gen_sums->merge_over_data();
    bias_sums->merge_over_data();

    VariableResult result;
    result.channels.resize(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        ChannelForecast& out = result.channels[static_cast<std::size_t>(c)];
        out.name = channels == 1 ? name : name + "[" + std::to_string(c) + "]";
        out.regions.resize(static_cast<std::size_t>(nregions));
    }
    for (std::int64_t r = 0; r < nregions; ++r) {
        const Weights w = regions.weights[static_cast<std::size_t>(r)].view();
        const std::vector<double> rmse = bias_sums->rmse_of_time_mean(w, options.policy, options.summation);
        const std::vector<double> bias = bias_sums->time_and_global_mean_bias(w, options.policy, options.summation);
        for (std::int64_t c = 0; c < channels; ++c) {
            RegionForecast& out = result.channels[static_cast<std::size_t>(c)].regions[static_cast<std::size_t>(r)];
            out.name = regions.regions[static_cast<std::size_t>(r)].name;
            const auto add_series = [&](const std::string& score, const auto& value_at) {
                std::vector<double> series(static_cast<std::size_t>(leads));
                for (std::int64_t l = 0; l < leads; ++l) {
                    series[static_cast<std::size_t>(l)] = value_at(l);
                }
                out.per_step.emplace_back(score, std::move(series));
            };
            for (std::size_t k = 0; k < det_names.size(); ++k) {
                add_series(det_names[k].first, [&](std::int64_t l) {
                    return det.sample_mean(det_values, l, r, static_cast<std::int64_t>(k), c);
                });
            }
            if (ensemble) {
                add_series("ensemble_mean_rmse",
                           [&](std::int64_t l) { return ens.sample_mean(ens_values, l, r, 0, c); });
                add_series("spread", [&](std::int64_t l) { return ens.sample_mean(ens_values, l, r, 1, c); });
                // The ratio of the means over initial conditions, as WeatherBench 2 forms it.
                add_series("spread_skill_ratio", [&](std::int64_t l) {
                    return ens.sample_mean(ens_values, l, r, 1, c) / ens.sample_mean(ens_values, l, r, 0, c);
                });
                add_series("crps", [&](std::int64_t l) { return ens.sample_mean(ens_values, l, r, 3, c); });
                add_series("fair_crps", [&](std::int64_t l) { return ens.sample_mean(ens_values, l, r, 4, c); });
            }
            if (with_acc) {
                add_series("acc", [&](std::int64_t l) { return det.sample_mean(det_values, l, r, det_count - 1, c); });
            }
            out.time_mean.emplace_back("rmse", rmse[static_cast<std::size_t>(c)]);
            out.time_mean.emplace_back("bias", bias[static_cast<std::size_t>(c)]);
            for (const auto& [score, series] : out.per_step) {
                double sum = 0.0;
                for (const std::int64_t row : time_means.rows) {
                    sum += series[static_cast<std::size_t>(row)];
                }
                out.time_mean.emplace_back(score, sum / static_cast<double>(time_means.rows.size()));
            }
        }
    }
    for (std::int64_t c = 0; c < channels; ++c) {
        ChannelForecast& out = result.channels[static_cast<std::size_t>(c)];
        out.zonal_gen.resize(static_cast<std::size_t>(leads * nlat));
        out.zonal_error.resize(out.zonal_gen.size());
        for (std::int64_t l = 0; l < leads; ++l) {
            for (std::int64_t i = 0; i < nlat; ++i) {
                const double gen = zonal_gen.sample_mean(gen_zonal, l, 0, c, i);
                const double target = zonal_target.sample_mean(target_zonal, l, 0, c, i);
                out.zonal_gen[static_cast<std::size_t>(l * nlat + i)] = gen;
                out.zonal_error[static_cast<std::size_t>(l * nlat + i)] = gen - target;
            }
        }
    }
    if (!options.diagnostics.empty()) {
        // With collective writes each rank keeps its box of the maps (data rank 0's) and writes it itself;
        // otherwise only world rank 0 ever holds a global map (one gather each). No rank holds one then.
        std::vector<double> gen_map = gen_sums->mean_difference(options.policy);
        std::vector<double> bias_map = bias_sums->mean_difference(options.policy);
        auto plane_size = static_cast<std::size_t>(box.area());
        bool holds = mesh.coords().data == 0;
        if (!maps_collectively) {
            const auto gather = [&](const std::vector<double>& part) {
                return gather_global<double>(mesh, grid.decomposition(),
                                             std::span<const double>(part.data(), holds ? part.size() : 0),
                                             holds ? 1 : 0, channels);
            };
            gen_map = gather(gen_map);
            bias_map = gather(bias_map);
            plane_size = static_cast<std::size_t>(grid.grid().nlat * grid.grid().nlon);
            holds = mesh.world().rank() == 0;
        }
        const auto channel_map = [&](const std::vector<double>& maps, std::int64_t c) {
            const auto first = maps.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c) * plane_size);
            return std::vector<double>(first, first + static_cast<std::ptrdiff_t>(plane_size));
        };
        for (std::int64_t c = 0; c < channels && holds; ++c) {
            ChannelForecast& out = result.channels[static_cast<std::size_t>(c)];
            out.gen_map = channel_map(gen_map, c);
            out.bias_map = channel_map(bias_map, c);
        }
    }
    return result;
}

/// The bytes one rank allocates for one variable, an estimate that errs high.
std::uint64_t forecast_working_set(const ForecastLayout& l, const SourceVariable& v, const Box& box, std::int64_t nlat,
                                   std::size_t regions, int data_ranks) {
    const auto area = static_cast<std::uint64_t>(box.area());
    const auto c = static_cast<std::uint64_t>(v.channels);
    const auto m = static_cast<std::uint64_t>(l.members);
    const std::uint64_t value = v.type == io::ValueType::float64 ? 8 : 4;
    const std::uint64_t samples = static_cast<std::uint64_t>(l.initial_conditions) * m;
    const std::uint64_t leads = static_cast<std::uint64_t>(l.lead_times);
    // Fields: truth, truth repeated, members, climatology twice; the time sums (2 x 24 bytes) and their
    // gather over the data group; the per-sample slots and the zonal means.
    const std::uint64_t fields = c * area * (value * (2 + 3 * m) + 48 + 48 * static_cast<std::uint64_t>(data_ranks));
    const std::uint64_t slots =
        samples * leads * regions * 12 * c * 8 + 2 * samples * leads * c * 8 * static_cast<std::uint64_t>(nlat);
    return fields + slots;
}

}  // namespace

void run_forecast_eval(const EvalOptions& options, const Communicator& world) {
    const std::vector<std::string> names = parse_name_list("--vars", options.vars);
    const LayoutHints hints{options.ensemble_dim, options.ensemble_size};
    std::vector<io::NamedPath> inputs = {
        {"--truth", options.truth}, {"--pred", options.prediction}, {"--climatology", options.climatology}};
    for (const std::string& text : options.regions) {
        const Region r = parse_region(text);
        inputs.push_back({"--region", r.mask_file});
    }
    if (!options.zonal.empty()) {
        throw ArgumentError(
            "--zonal is for two-field files; a forecast's zonal means go to --diagnostics DIR "
            "(zonal_mean_diagnostics.nc)");
    }
    const ForecastOutputPaths paths = forecast_output_paths(options.diagnostics);
    const InputAccess access = input_access(options, world);
    check_collectively(world, attempt([&] {
                           check_diagnostics_folder(options.diagnostics);
                           io::check_output_paths(inputs, paths.named(options.json));
                       }));
    std::unique_ptr<ForecastSource> source;
    check_collectively(world, attempt([&] {
                           source = options.truth.empty()
                                        ? make_builtin_forecast(options.nlat, options.nlon,
                                                                std::max<std::int64_t>(options.initial_conditions, 1),
                                                                std::max<std::int64_t>(options.ensemble_size, 1),
                                                                options.ntime)
                                        : make_netcdf_forecast(options.truth, options.prediction, names, hints,
                                                               options.allow_time_mismatch, access);
                       }));
    const ForecastLayout& layout = source->layout();
    const SourceGrid& g = source->grid();
    std::vector<SourceVariable> variables = source->variables();
    if (options.truth.empty() && !names.empty()) {
        std::vector<SourceVariable> chosen;
        for (const std::string& n : names) {
            const auto it =
                std::find_if(variables.begin(), variables.end(), [&](const SourceVariable& v) { return v.name == n; });
            if (it == variables.end()) {
                throw ArgumentError("--vars: the built-in case has no variable '" + n + "' (it has h, t850, sst)");
            }
            chosen.push_back(*it);
        }
        variables = chosen;
    }
    // Every rank read the files itself: agree on what they hold before any collective depends on it, as the
    // two-field evaluation does.
    detail::agree_or_throw(
        world, "",
        {g.shape().nlat, g.shape().nlon, layout.initial_conditions, layout.members, layout.lead_times,
         static_cast<std::int64_t>(variables.size()), forecast_hash(*source, variables).value()},
        "the forecast as each rank reads it (grid, initial conditions, members, lead times, "
        "variables, hash of the coordinates, lead and initial times, names and types)");
    const TimeMeanRows time_means = time_mean_rows(*source, options.include_initial_step);

    const MeshShape shape = options.mesh.empty() ? default_mesh(world.size()) : parse_mesh_shape(options.mesh);
    const ProcessMesh mesh(world, shape);
    const ShardedGrid grid(mesh, g.shape(), options.split);
    const WorkShare work = share_work(options.data_split, layout, shape.data, mesh.coords().data);
    // Collective reads go in rounds: as many as the most (initial condition, lead) pairs of any data rank.
    std::int64_t rounds = 0;
    for (int d = 0; access.collective() && d < shape.data; ++d) {
        const WorkShare other = share_work(options.data_split, layout, shape.data, d);
        rounds = std::max(rounds, other.initial_conditions.size() * other.leads.size());
    }
    const AreaWeights weights = make_weights(options.weights, g, grid.box());
    ScoredRegions regions;
    std::unique_ptr<Climatology> climatology;
    std::int64_t climatology_hash = 0;
    check_collectively(world, attempt([&] {
                           regions = make_regions(options.regions, g, grid.box(), weights, access);
                           if (!options.climatology.empty()) {
                               climatology = std::make_unique<Climatology>(options.climatology, *source, access);
                               climatology_hash = climatology->hash();
                           }
                       }));
    // The climatology and the masks too: their content as each rank reads it, as the forecast's.
    detail::agree_or_throw(world, "", {climatology ? 1 : 0, climatology_hash},
                           "--climatology '" + options.climatology +
                               "' as each rank reads it (present, hash of its variables' dims, sizes and types and "
                               "of its coordinates)");
    detail::agree_or_throw(world, "", {static_cast<std::int64_t>(regions.regions.size()), regions.hash.value()},
                           "the --region boxes and masks as each rank reads them (regions, hash of the boxes and of "
                           "the mask files' coordinates and variables)");
    check_region_weights(mesh.spatial(), regions);
    std::uint64_t largest = 0;
    for (const SourceVariable& v : variables) {
        largest = std::max(
            largest, forecast_working_set(layout, v, grid.box(), g.shape().nlat, regions.regions.size(), shape.data));
    }
    check_memory_fits(world, largest,
                      "forecast of " + std::to_string(layout.initial_conditions) + " initial conditions x " +
                          std::to_string(layout.members) + " members x " + std::to_string(layout.lead_times) +
                          " lead times on " + std::to_string(g.shape().nlat) + " x " + std::to_string(g.shape().nlon) +
                          ", mesh " + to_string(shape));

    ForecastReport report;
    report.mesh = shape;
    report.split = std::string(to_string(options.split));
    report.weights = std::string(to_string(options.weights));
    report.summation = std::string(to_string(options.summation));
    report.policy = std::string(to_string(options.policy));
    report.grid = g;
    report.layout = layout;
    report.lead_times = source->lead_times();
    report.data_split = work.split;
    report.time_means = time_means;
    report.climatology = options.climatology;
    {
        Progress progress(world.rank() == 0 && !options.quiet, work.initial_conditions.size() * work.leads.size() *
                                                                   static_cast<std::int64_t>(variables.size()));
        for (const SourceVariable& v : variables) {
            VariableResult r = v.type == io::ValueType::float64
                                   ? score_forecast_variable<double>(
                                         *source, v, grid, regions, climatology.get(), options, work, time_means,
                                         rounds, access.collective(), access.writes_collectively(), progress)
                                   : score_forecast_variable<float>(
                                         *source, v, grid, regions, climatology.get(), options, work, time_means,
                                         rounds, access.collective(), access.writes_collectively(), progress);
            for (ChannelForecast& c : r.channels) {
                report.variables.push_back(std::move(c));
            }
        }
    }
    if (access.writes_collectively()) {
        // Every rank writes its box of the maps into the diagnostics files, together.
        write_forecast_outputs_collectively(report, options.json, paths, std::cout, grid);
        return;
    }
    LocalFailure output_failure;
    if (world.rank() == 0) {
        output_failure = attempt([&] { write_forecast_outputs(report, options.json, paths, std::cout); });
    }
    check_collectively(world, output_failure);
}

}  // namespace gridshard::cli
