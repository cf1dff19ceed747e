// `gridshard eval`: scores a prediction against the truth, per variable and time step, over MPI.
//
// Every rank reads or generates only its own box of its own time steps. Per step, one fused evaluation
// (one halo exchange, one allreduce over the spatial group) and one zonal mean (one allreduce over the
// lon group); per variable at the end, the per-step scores and zonal means are summed over the data and
// spatial groups (each value is owned by exactly one rank, the others add zeros, so the sums are exact)
// and the per-point time sums are gathered over the data group. World rank 0 writes the outputs.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "eval_support.hpp"
#include "field_source.hpp"
#include "forecast_source.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/comm/memory_check.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/time_mean.hpp"
#include "options.hpp"
#include "output.hpp"

namespace gridshard::cli {

MeshShape default_mesh(int ranks) {
    int lat = 1;
    for (int h = 1; h * h <= ranks; ++h) {
        if (ranks % h == 0) {
            lat = h;
        }
    }
    return {1, lat, ranks / lat};
}

InputAccess input_access(const EvalOptions& options, const Communicator& world) {
    return {io::parse_io_mode(options.io, "--io"), &world};
}

AreaWeights make_weights(AreaWeighting kind, const SourceGrid& g, const Box& box) {
    if (kind == AreaWeighting::cos_lat) {
        return cos_lat_weights(g.lat_deg, g.shape().nlon, box.lat);
    }
    const auto lat_bounds = g.lat_bounds_deg.empty() ? bounds_from_centres(g.lat_deg, true) : g.lat_bounds_deg;
    const auto lon_bounds = g.lon_bounds_deg.empty() ? bounds_from_centres(g.lon_deg, false) : g.lon_bounds_deg;
    return cell_area_weights(lat_bounds, lon_bounds, box);
}

void InputHash::add(const SourceGrid& grid) {
    for (const std::vector<double>* values : {&grid.lat_deg, &grid.lon_deg, &grid.time_values}) {
        add(*values);
    }
    add(grid.time_units);
    add(grid.time_calendar);
}

void InputHash::add(const io::VariableShape& variable) {
    add(variable.name);
    for (std::size_t k = 0; k < variable.dim_names.size(); ++k) {
        add(variable.dim_names[k]);
        add(variable.dim_sizes[k]);
    }
    add(static_cast<std::int64_t>(variable.value_type));
    add(variable.units);
}

void InputHash::add(const SourceVariable& variable) {
    add(variable.name);
    add(variable.channels);
    add(static_cast<std::int64_t>(variable.type));
}

namespace {

/// Seconds this rank spent per phase of the run (MPI_Wtime), for --timings: reading (or generating) its
/// fields, the fused evaluation's argument agreement, halo exchange, pass over memory and allreduce, the
/// zonal means (their allreduce included), the time sums, and the reductions at the end of each variable.
struct PhaseTimes {
    double read = 0.0;
    EvaluationTimings evaluation;
    double zonal = 0.0;
    double time_sums = 0.0;
    double final = 0.0;
    std::int64_t steps = 0;

    /// The names, in the order of values().
    static constexpr const char* names[] = {"read",      "agreement", "halo",      "compute",
                                            "allreduce", "zonal",     "time_sums", "final"};
    [[nodiscard]] std::vector<double> values() const {
        return {read,
                evaluation.agreement_s,
                evaluation.halo_s,
                evaluation.compute_s,
                evaluation.allreduce_s,
                zonal,
                time_sums,
                final};
    }
};

/// Scores of one variable's channel: per step (ntime values) for each registered score.
struct ChannelReport {
    std::string name;
    std::vector<std::vector<double>> per_time;
    double rmse_of_time_mean = nan;
    double time_and_global_mean_bias = nan;
    std::vector<double> zonal_truth;  // (ntime, nlat)
    std::vector<double> zonal_prediction;
};

/// The bytes one rank allocates for the whole run, an estimate that errs high: per variable (one at a
/// time) the truth and prediction buffers in `T`, the per-point time sums, and their gather over the data
/// group; for every variable, its per-step scores and zonal means, held three times over (the sums, the
/// reports, the output).
std::uint64_t working_set_bytes(const SourceGrid& g, const std::vector<SourceVariable>& variables, const Box& box,
                                int data_ranks) {
    const auto area = static_cast<std::uint64_t>(box.area());
    const auto ntime = static_cast<std::uint64_t>(g.ntime);
    const auto nlat = static_cast<std::uint64_t>(g.shape().nlat);
    std::uint64_t largest = 0;
    std::uint64_t kept = 0;
    for (const SourceVariable& v : variables) {
        const auto points = static_cast<std::uint64_t>(v.channels) * area;
        const std::uint64_t value = v.type == io::ValueType::float64 ? 8 : 4;
        // 2 fields (+ a staging copy each for packed data), sums (8 + 8 + 1), the time means (2 x 8), and
        // with several data ranks the packed sums (3 x 8) and their gather (D x 3 x 8).
        const std::uint64_t per_point =
            2 * value + 2 * 8 + 17 + 16 + (data_ranks > 1 ? 24 + 24 * static_cast<std::uint64_t>(data_ranks) : 0);
        largest = std::max(largest, points * per_point);
        kept += 3 * static_cast<std::uint64_t>(v.channels) * ntime * (evaluation_scores().size() + 2 * nlat) * 8;
    }
    return largest + kept + area * 8;
}

/// Scores every channel of `variable` for this rank's steps, in `T`; collective over the world. With
/// collective reads every rank reads in `rounds` rounds (the most steps of any data rank), reading nothing
/// once its own steps are done.
template <class T>
std::vector<ChannelReport> score_variable(const FieldSource& source, const SourceVariable& variable,
                                          const ShardedGrid& grid, const Weights& weights, Summation summation,
                                          ValidityPolicy policy, Range steps, std::int64_t rounds, bool collective,
                                          Progress& progress, PhaseTimes& times) {
    const ProcessMesh& mesh = grid.mesh();
    const Box& box = grid.box();
    const SourceGrid& g = source.grid();
    const std::int64_t ntime = g.ntime;
    const std::int64_t nlat = g.shape().nlat;
    const std::int64_t channels = variable.channels;
    const std::int64_t points = channels * box.area();
    const std::size_t score_count = evaluation_scores().size();

    // Everything field-sized is allocated here, before the first collective, and the outcome agreed: a
    // rank that runs out of memory makes every rank raise the same SystemError instead of hanging.
    const std::string& name = variable.name;
    const auto shard_values = static_cast<std::size_t>(points);
    std::vector<double> per_time;
    std::vector<double> zonal;
    std::vector<T> truth;
    std::vector<T> prediction;
    std::unique_ptr<VariableSteps> reader;
    std::optional<TimeMeanAccumulator> time_sums;  // this rank's steps, then (merged) every step
    check_collectively(mesh.world(), attempt([&] {
                           // Owned values are written in place; everything else stays 0 so the sums are exact.
                           per_time = allocate_vector<double>(score_count * static_cast<std::size_t>(channels * ntime),
                                                              "the per-step scores of '" + name + "'");
                           zonal = allocate_vector<double>(static_cast<std::size_t>(2 * channels * ntime * nlat),
                                                           "the zonal means of '" + name + "'");
                           truth = allocate_vector<T>(shard_values, "the truth buffer of '" + name + "'");
                           prediction = allocate_vector<T>(shard_values, "the prediction buffer of '" + name + "'");
                           if (mesh.shape().data > 1 &&
                               3 * shard_values + 1 > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
                               // The time sums are gathered over the data group in one message: it must fit an MPI
                               // count.
                               throw ArgumentError("variable '" + name + "': the time sums of a rank's box (" +
                                                   std::to_string(3 * shard_values + 1) +
                                                   " values) exceed an MPI message; " + "use a finer mesh");
                           }
                           time_sums.emplace(grid, channels);
                           reader = source.open(variable, box);
                       }));
    Evaluator evaluator(grid, channels, weights, {.summation = summation, .policy = policy});
    LocalFailure failure;
    // Ranks that read together stop together when one cannot read: the spatial group, or the world when
    // every read is collective.
    const Communicator& together = collective ? mesh.world() : mesh.spatial();
    for (std::int64_t round = 0; round < rounds && !failure.failed(); ++round) {
        const std::int64_t step = steps.begin + round;
        const bool mine = step < steps.end;
        double t0 = MPI_Wtime();
        failure = attempt([&] {
            if (mine) {
                reader->read(step, std::span<T>(truth), std::span<T>(prediction));
            } else {
                reader->read_none();
            }
        });
        times.read += MPI_Wtime() - t0;
        const LocalFailure agreed = attempt([&] { check_collectively(together, failure); });
        if (agreed.failed()) {
            failure = agreed;  // the whole group stops here, then raises with the world
            break;
        }
        if (!mine) {
            continue;
        }
        const FieldShard<T> t{truth, channels};
        const FieldShard<T> p{prediction, channels};
        const Scores s = evaluator.evaluate(t, p);
        if (mesh.spatial().rank() == 0) {
            for (std::size_t k = 0; k < score_count; ++k) {
                for (std::int64_t c = 0; c < channels; ++c) {
                    per_time[(k * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)) *
                                 static_cast<std::size_t>(ntime) +
                             static_cast<std::size_t>(step)] = s.at(k)[static_cast<std::size_t>(c)];
                }
            }
        }
        t0 = MPI_Wtime();
        const FieldShard<T> both[] = {t, p};
        const auto zonal_means_of_both = zonal_means<T>(grid, both, summation);  // one allreduce over lon
        const std::vector<double>& zonal_truth = zonal_means_of_both[0];
        const std::vector<double>& zonal_prediction = zonal_means_of_both[1];
        if (mesh.coords().lon == 0) {
            for (std::int64_t c = 0; c < channels; ++c) {
                for (std::int64_t i = 0; i < box.lat.size(); ++i) {
                    const auto local = static_cast<std::size_t>(c * box.lat.size() + i);
                    const auto global = static_cast<std::size_t>((c * ntime + step) * nlat + box.lat.begin + i);
                    zonal[global] = zonal_truth[local];
                    zonal[static_cast<std::size_t>(channels * ntime * nlat) + global] = zonal_prediction[local];
                }
            }
        }
        const double t1 = MPI_Wtime();
        time_sums->add(t, p);
        const double t2 = MPI_Wtime();
        times.zonal += t1 - t0;
        times.time_sums += t2 - t1;
        ++times.steps;
        progress.step(variable.name);
    }
    const double final_started = MPI_Wtime();
    check_collectively(mesh.world(), failure);

    reduce_sum<double>(mesh, per_time);
    spatial_reduce_sum<double>(mesh, zonal);
    reduce_sum<double>(mesh, zonal);

    // Time means: every data rank's sums, merged over the data group; a point not finite at any step
    // is left out, as every score of eval does.
    time_sums->merge_over_data();
    const auto mean_difference = time_sums->time_and_global_mean_bias(weights, policy, summation);
    const auto rmse_of_time_mean = time_sums->rmse_of_time_mean(weights, policy, summation);
    times.final += MPI_Wtime() - final_started;
    const EvaluationTimings& e = evaluator.timings();
    times.evaluation.agreement_s += e.agreement_s;
    times.evaluation.halo_s += e.halo_s;
    times.evaluation.compute_s += e.compute_s;
    times.evaluation.allreduce_s += e.allreduce_s;
    times.evaluation.calls += e.calls;

    std::vector<ChannelReport> reports(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
        ChannelReport& r = reports[static_cast<std::size_t>(c)];
        r.name = channels == 1 ? variable.name : variable.name + "[" + std::to_string(c) + "]";
        r.per_time.resize(score_count);
        for (std::size_t k = 0; k < score_count; ++k) {
            const auto first =
                per_time.begin() +
                static_cast<std::ptrdiff_t>((k * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)) *
                                            static_cast<std::size_t>(ntime));
            r.per_time[k].assign(first, first + ntime);
        }
        r.time_and_global_mean_bias = mean_difference[static_cast<std::size_t>(c)];
        r.rmse_of_time_mean = rmse_of_time_mean[static_cast<std::size_t>(c)];
        const auto zonal_first = zonal.begin() + c * ntime * nlat;
        r.zonal_truth.assign(zonal_first, zonal_first + ntime * nlat);
        const auto prediction_first = zonal_first + channels * ntime * nlat;
        r.zonal_prediction.assign(prediction_first, prediction_first + ntime * nlat);
    }
    return reports;
}

// The table, then the zonal file and the JSON report, all complete or none: both are written to their
// temporaries first, then renamed.
void write_outputs(const EvalOptions& options, const SourceGrid& g, const MeshShape& shape,
                   const std::vector<ChannelReport>& reports, const std::vector<double>& timings,
                   std::int64_t steps_per_rank) {
    Report report{shape,
                  std::string(to_string(options.split)),
                  std::string(to_string(options.weights)),
                  std::string(to_string(options.summation)),
                  std::string(to_string(options.policy)),
                  g.shape(),
                  g.ntime,
                  evaluation_scores(),
                  {}};
    for (const ChannelReport& r : reports) {
        report.variables.push_back({r.name, r.per_time, r.rmse_of_time_mean, r.time_and_global_mean_bias});
    }
    if (!timings.empty()) {
        std::vector<std::string> names(std::begin(PhaseTimes::names), std::end(PhaseTimes::names));
        names.emplace_back("total");
        report.timings = {names, timings, steps_per_rank};
    }
    print_table(report, std::cout);
    std::vector<io::OutputJob> jobs;
    if (!options.zonal.empty()) {
        jobs.push_back({options.zonal, [&](io::AtomicOutput& output) {
                            std::vector<std::pair<std::string, std::vector<double>>> fields;
                            for (const ChannelReport& r : reports) {
                                fields.emplace_back(r.name + "_truth", r.zonal_truth);
                                fields.emplace_back(r.name + "_pred", r.zonal_prediction);
                            }
                            write_zonal_file(output, g, fields);
                        }});
    }
    if (!options.json.empty()) {
        jobs.push_back({options.json, [&](io::AtomicOutput& output) {
                            std::ostringstream text;
                            write_json(report, text);
                            output.write(text.str());
                        }});
    }
    io::write_outputs_atomically(jobs);
}

// Prints a failure every rank knows once, by world rank 0, and returns the exit status of its kind.
int report_failure(const Communicator& world, const std::string& message, ErrorKind kind) {
    if (world.rank() == 0) {
        std::cerr << "gridshard: error: " << message << "\n";
    }
    return kind == ErrorKind::argument ? exit_usage : exit_failure;
}

int run_eval(const EvalOptions& options) {
    MpiEnvironment environment(nullptr, nullptr);
    const Communicator world = Communicator::world();
    (void)use_cores_of_this_rank(world);  // threads per rank, so ranks on one node share its cores
    const bool root = world.rank() == 0;
    try {
        const SplitRule rule = options.split;
        const Summation summation = options.summation;
        if (options.truth.empty() != options.prediction.empty()) {
            throw ArgumentError("--truth and --pred go together; got only " +
                                std::string(options.truth.empty() ? "--pred" : "--truth"));
        }
        const std::vector<std::string> names = parse_name_list("--vars", options.vars);
        // Before any work: no output may be an input or another output, or anything but a regular file.
        // Every rank checks (a node may see another file system), then all agree.
        check_collectively(world, attempt([&] {
                               io::check_output_paths({{"--truth", options.truth}, {"--pred", options.prediction}},
                                                      {{"--json", options.json, true}, {"--zonal", options.zonal}});
                           }));
        // A forecast (a sample or member dim, or the built-in forecast) has its own evaluation.
        const InputAccess access = input_access(options, world);
        bool forecast = options.truth.empty() && (options.initial_conditions > 0 || options.ensemble_size > 0);
        if (!options.truth.empty()) {
            check_collectively(world, attempt([&] {
                                   forecast = is_forecast_file(options.prediction,
                                                               {options.ensemble_dim, options.ensemble_size}, access);
                               }));
        }
        const bool forecast_only = !options.climatology.empty() || !options.regions.empty() ||
                                   !options.diagnostics.empty() || options.include_initial_step ||
                                   options.data_split != "auto";
        if (!forecast && forecast_only) {
            throw ArgumentError(
                "--climatology, --region, --diagnostics, --include-initial-step and --data-split need a forecast: "
                "files with a sample or member dim, or the built-in forecast (--initial-conditions, --ensemble-size)");
        }
        if (forecast) {
            run_forecast_eval(options, world);
            return 0;
        }
        // Opening the files can fail on some ranks only (a node without the file system): agree first.
        std::unique_ptr<FieldSource> source;
        check_collectively(world, attempt([&] {
                               source = options.truth.empty()
                                            ? make_builtin_source(options.nlat, options.nlon, options.ntime)
                                            : make_netcdf_source(options.truth, options.prediction, names,
                                                                 options.allow_time_mismatch, access);
                           }));
        // Every rank opened the files itself: a file still being written, or a stale copy on one node, would
        // give ranks different step counts or variables and so different collectives. Agree first.
        std::vector<SourceVariable> variables = source->variables();
        InputHash read;
        read.add(source->grid());
        for (const SourceVariable& v : variables) {
            read.add(v);
        }
        detail::agree_or_throw(world, "",
                               {source->grid().shape().nlat, source->grid().shape().nlon, source->grid().ntime,
                                static_cast<std::int64_t>(variables.size()), read.value()},
                               "the inputs as each rank reads them (nlat, nlon, steps, variables, hash)");
        if (options.truth.empty() && !names.empty()) {
            std::vector<SourceVariable> chosen;
            for (const std::string& name : names) {
                const auto it = std::find_if(variables.begin(), variables.end(),
                                             [&](const SourceVariable& v) { return v.name == name; });
                if (it == variables.end()) {
                    throw ArgumentError("--vars: the built-in case has no variable '" + name +
                                        "' (it has h, t850, sst)");
                }
                chosen.push_back(*it);
            }
            variables = chosen;
        }

        const MeshShape shape = options.mesh.empty() ? default_mesh(world.size()) : parse_mesh_shape(options.mesh);
        const ProcessMesh mesh(world, shape);
        const SourceGrid& g = source->grid();
        const ShardedGrid grid(mesh, g.shape(), rule);
        const Range steps = data_block(g.ntime, shape.data, mesh.coords().data, true);
        std::int64_t rounds = steps.size();  // collective reads: the most steps of any data rank
        for (int d = 0; access.collective() && d < shape.data; ++d) {
            rounds = std::max(rounds, data_block(g.ntime, shape.data, d, true).size());
        }
        // Before anything field-sized is allocated: does every node hold what its ranks need?
        check_memory_fits(world, working_set_bytes(g, variables, grid.box(), shape.data),
                          "grid " + std::to_string(g.shape().nlat) + " x " + std::to_string(g.shape().nlon) + ", " +
                              std::to_string(g.ntime) + " steps, " + std::to_string(variables.size()) +
                              " variables, mesh " + to_string(shape));
        const AreaWeights weights = make_weights(options.weights, g, grid.box());

        std::vector<ChannelReport> reports;
        PhaseTimes times;
        const double run_started = MPI_Wtime();
        {
            Progress progress(root && !options.quiet, (steps.size()) * static_cast<std::int64_t>(variables.size()));
            for (const SourceVariable& variable : variables) {
                auto channel_reports =
                    variable.type == io::ValueType::float64
                        ? score_variable<double>(*source, variable, grid, weights.view(), summation, options.policy,
                                                 steps, rounds, access.collective(), progress, times)
                        : score_variable<float>(*source, variable, grid, weights.view(), summation, options.policy,
                                                steps, rounds, access.collective(), progress, times);
                reports.insert(reports.end(), channel_reports.begin(), channel_reports.end());
            }
        }

        // Every rank's phase times, each in its own slot of a world-wide sum (exact: one value a slot).
        std::vector<double> timings;
        if (options.timings) {
            const double total = MPI_Wtime() - run_started;
            const std::vector<double> mine = times.values();
            const std::size_t width = mine.size() + 1;
            const std::size_t first = width * static_cast<std::size_t>(world.rank());
            timings.assign(width * static_cast<std::size_t>(world.size()), 0.0);
            std::copy(mine.begin(), mine.end(), timings.begin() + static_cast<std::ptrdiff_t>(first));
            timings[first + mine.size()] = total;
            reduce_sum<double>(mesh, timings);
            spatial_reduce_sum<double>(mesh, timings);
        }
        // World rank 0 writes; its output errors (a full disk) reach every rank.
        LocalFailure output_failure;
        if (root) {
            output_failure = attempt([&] { write_outputs(options, g, shape, reports, timings, times.steps); });
        }
        check_collectively(world, output_failure);
        return 0;
    } catch (const ArgumentError& error) {
        return report_failure(world, error.what(), ErrorKind::argument);
    } catch (const SystemError& error) {
        // Every SystemError that reaches here was agreed by check_collectively: every rank has it.
        return report_failure(world, error.what(), ErrorKind::system);
    } catch (const std::exception& error) {
        // Seen by this rank only (an MPI failure, memory exhausted mid-run): end every rank now.
        std::cerr << "gridshard: error on rank " << world.rank() << ": " << error.what() << "\n";
        MpiEnvironment::abort(exit_failure);
    }
}

}  // namespace

Runner add_eval_command(CLI::App& app) {
    auto options = std::make_shared<EvalOptions>();
    CLI::App* command = app.add_subcommand(
        "eval", "Score a prediction against the truth (CF netCDF files, or the built-in analytic case without them)");
    command->add_option("--truth", options->truth, "Truth file (CF netCDF)");
    command->add_option("--pred", options->prediction, "Prediction file (CF netCDF), same grid as the truth");
    command->add_option("--vars", options->vars, "Comma-separated variables (default: every variable on lat x lon)");
    command->add_option("--mesh", options->mesh, "Mesh DxHxW (default 1xHxW, H the largest divisor <= sqrt(ranks))");
    add_choice_option(
        *command, "--split", options->split, parse_split_rule, [](SplitRule r) { return to_string(r); },
        "Split rule: balanced or div_up");
    add_choice_option(
        *command, "--weights", options->weights, parse_area_weighting, [](AreaWeighting w) { return to_string(w); },
        "Area weights: cos_lat or cell_area");
    add_choice_option(
        *command, "--summation", options->summation, parse_summation, [](Summation m) { return to_string(m); },
        "reproducible or fast");
    add_choice_option(
        *command, "--policy", options->policy, parse_validity_policy, [](ValidityPolicy p) { return to_string(p); },
        "Which points count: skip_invalid_pairs (both fields finite), skip_nan or propagate");
    command->add_option("--json", options->json, "Write the scores as JSON to this file");
    command->add_option("--zonal", options->zonal, "Write the zonal means as CF netCDF to this file");
    command->add_flag("--quiet", options->quiet, "No progress on stderr");
    command->add_flag("--timings", options->timings,
                      "Two-field eval: add every rank's seconds per phase (read, agreement, halo, compute, allreduce, "
                      "zonal, time_sums, final, total) to the JSON report");
    command->add_option("--io", options->io,
                        "How the ranks read the netCDF inputs and write the diagnostics maps: auto (default: netCDF-4 "
                        "inputs read collectively, classic ones independently, the diagnostics written by rank 0), "
                        "independent (each rank opens the files itself) or collective (all ranks together, collective "
                        "MPI-IO through parallel netCDF and PnetCDF, the diagnostics too; docs/io.md)");
    command->add_flag("--allow-time-mismatch", options->allow_time_mismatch,
                      "Compare step by step even when the files' time coordinates differ");
    add_count_option(*command, "--nlat", options->nlat, 2, max_builtin_extent, "Built-in case: latitudes");
    add_count_option(*command, "--nlon", options->nlon, 2, max_builtin_extent, "Built-in case: longitudes");
    add_count_option(*command, "--ntime", options->ntime, 1, max_builtin_extent,
                     "Built-in case: time steps (lead times of the built-in forecast)");
    command->add_option("--ensemble-dim", options->ensemble_dim,
                        "Forecast: the prediction's dim of ensemble members (default: detected, docs/forecast.md)");
    add_count_option(*command, "--ensemble-size", options->ensemble_size, 1, max_builtin_extent,
                     "Forecast: members per initial condition, folded into the sample dim (default: from "
                     "init_time); with no files, the built-in forecast's members");
    add_count_option(*command, "--initial-conditions", options->initial_conditions, 1, max_builtin_extent,
                     "Built-in forecast: initial conditions, a day apart");
    command->add_option("--climatology", options->climatology,
                        "Forecast: climatology file (CF netCDF, the variables on the grid; one field, or one per "
                        "lead time) for the anomaly correlation acc");
    command->add_option("--region", options->regions,
                        "Forecast: also score a region: tropics, northern_extratropics, southern_extratropics, "
                        "NAME:lat0,lat1,lon0,lon1 or NAME:FILE:MASK_VARIABLE (repeatable)");
    command->add_option("--diagnostics", options->diagnostics,
                        "Forecast: write mean_diagnostics.nc, zonal_mean_diagnostics.nc and "
                        "time_mean_diagnostics.nc (ACE's files) into this existing folder");
    command->add_flag("--include-initial-step", options->include_initial_step,
                      "Forecast: count lead 0 (the initial condition) in the time means; by default it is left "
                      "out, as ACE does");
    command
        ->add_option("--data-split", options->data_split,
                     "Forecast: what the data ranks split: initial-conditions, lead-times, members or auto "
                     "(initial conditions when there are at least as many as data ranks, else lead times when "
                     "there are, else members)")
        ->check(CLI::IsMember({"auto", "initial-conditions", "lead-times", "members"}));
    return [options] { return run_eval(*options); };
}

}  // namespace gridshard::cli
