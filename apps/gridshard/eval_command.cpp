// `gridshard eval`: the options become an EvaluationPlan, the files (or the built-in case) a source, and the
// library's evaluation (gridshard/evaluation/evaluate.hpp) scores them over MPI; world rank 0 (or, with --io
// collective, every rank) writes what comes back (report.hpp).

#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "eval_support.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/comm/threads.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/output_file.hpp"
#include "options.hpp"
#include "report.hpp"
#include "setting_flags.hpp"

namespace gridshard::cli {
namespace {

/// One of ACE's climate families as flags named after its config: `flag` turns it on, `flag`-variables (comma-
/// separated, ACE's `variables`) chooses the variables that have `what`, and needs `flag`.
void add_family(CLI::App* command, const std::string& flag, bool& on, std::string& variables, const std::string& what,
                const std::string& help) {
    CLI::Option* family = command->add_flag(flag, on, help);
    command
        ->add_option(flag + "-variables", variables,
                     "Comma-separated variables with " + what + " (ACE's variables; default: every variable)")
        ->needs(family);
}

/// The plan of `options`, for a pair or a forecast as `report` says.
EvaluationPlan make_plan(const EvalOptions& options, ReportKind report, const io::InputAccess& access) {
    EvaluationPlan plan;
    plan.scoring.report = report;
    plan.mesh = options.mesh;
    plan.split = options.split;
    plan.weights = options.weights;
    plan.scoring.summation = options.summation;
    plan.scoring.policy = options.policy;
    plan.data_split = options.data_split;
    plan.include_initial_step = options.include_initial_step;
    plan.climatology = options.climatology;
    plan.regions = options.regions;
    plan.scoring.maps =
        report == ReportKind::forecast && !options.diagnostics.empty();  // a pair's folder: spectra only
    plan.timings = options.timings;
    if (options.spectrum) {
        plan.scoring.spectrum = options.spectrum_options;
        plan.scoring.spectrum->fill->num_steps = static_cast<int>(options.spectrum_fill_steps);
        if (!options.spectrum_fill) {
            plan.scoring.spectrum->fill.reset();
        }
    }
    if (options.normalize.size() == 2) {
        plan.normalize_means = options.normalize[0];
        plan.normalize_stds = options.normalize[1];
    }
    if (options.near_zero_fraction) {
        plan.near_zero_fraction = options.near_zero_config;
        if (!options.near_zero_variables.empty()) {
            plan.near_zero_fraction->variables =
                parse_name_list("--near-zero-fraction-variables", options.near_zero_variables);
        }
    }
    plan.scoring.trend = options.trend;
    plan.trend_variables = parse_name_list("--trend-variables", options.trend_variables);
    plan.scoring.video = options.video;
    plan.scoring.extended_video = options.extended_videos;
    plan.video_variables = parse_name_list("--video-variables", options.video_variables);
    if (options.annual) {
        plan.scoring.annual = AnnualOptions{};  // its timestep: the files' lead-time step
    }
    plan.annual_variables = parse_name_list("--annual-variables", options.annual_variables);
    plan.annual_reference_data = options.annual_reference_data;
    plan.scoring.seasonal = options.seasonal;
    plan.enso_index = options.enso_index;
    plan.ipo_index = options.ipo_index;
    plan.enso_coefficient_index = options.enso_coefficient_index;
    plan.seasonal_variables = parse_name_list("--seasonal-variables", options.seasonal_variables);
    if (options.histogram) {
        plan.scoring.histogram = HistogramOptions{};
    }
    plan.histogram_variables = parse_name_list("--histogram-variables", options.histogram_variables);
    plan.histogram_window = options.forward_steps_in_memory;
    if (!options.quantiles.empty()) {
        plan.scoring.quantiles =
            QuantileOptions{parse_number_list("--quantiles", options.quantiles), options.quantile_method};
    }
    plan.access = access;
    return plan;
}

/// The source of `options`: the files, or the built-in pair or forecast. Throws ArgumentError as the sources do.
std::unique_ptr<io::ForecastSource> make_source(const EvalOptions& options, ReportKind report,
                                                const std::vector<std::string>& names, const io::InputAccess& access) {
    if (options.truth.empty()) {
        return report == ReportKind::pair
                   ? io::make_builtin_pair(options.nlat, options.nlon, options.ntime)
                   : io::make_builtin_forecast(options.nlat, options.nlon,
                                               std::max<std::int64_t>(options.initial_conditions, 1),
                                               std::max<std::int64_t>(options.ensemble_size, 1), options.ntime);
    }
    if (report == ReportKind::pair) {
        return io::make_netcdf_pair(options.truth, options.prediction, names, options.allow_time_mismatch, access);
    }
    return io::make_netcdf_forecast(options.truth, options.prediction, names,
                                    {options.ensemble_dim, options.ensemble_size}, options.allow_time_mismatch, access);
}

// The transform assumes its grid's latitudes whatever the files' are (as ACE's does): world rank 0 says so once when
// they differ by more than a float's rounding of a latitude.
void warn_about_latitudes(const Communicator& world, const EvaluationResult& result, bool quiet) {
    constexpr double rounding_deg = 1e-4;
    if (!result.spectrum || quiet || world.rank() != 0 || result.spectrum_latitude_offset_deg <= rounding_deg) {
        return;
    }
    std::fprintf(stderr,
                 "gridshard eval: warning: the grid's latitudes are not the %s grid's nodes (up to %.3g degrees "
                 "apart); the power spectrum takes each row as that node, as ACE's does (--spectrum-grid)\n",
                 std::string(to_string(result.spectrum->spec.grid)).c_str(), result.spectrum_latitude_offset_deg);
}

// Prints a failure every rank knows once, by world rank 0, and returns the exit status of its kind.
int report_failure(const Communicator& world, const std::string& message, ErrorKind kind) {
    if (world.rank() == 0) {
        std::cerr << "gridshard: error: " << with_flags(message) << "\n";
    }
    return kind == ErrorKind::argument ? exit_usage : exit_failure;
}

int run_eval(const EvalOptions& options) {
    MpiEnvironment environment(nullptr, nullptr);
    const Communicator world = Communicator::world();
    (void)use_cores_of_this_rank(world);  // threads per rank, so ranks on one node share its cores
    try {
        if (options.truth.empty() != options.prediction.empty()) {
            throw ArgumentError("--truth and --pred go together; got only " +
                                std::string(options.truth.empty() ? "--pred" : "--truth"));
        }
        const std::vector<std::string> names = parse_name_list("--vars", options.vars);
        const io::InputAccess access{io::parse_io_mode(options.io, "--io"), &world};
        // A forecast (a sample or member dim, or the built-in forecast) gets the forecast report.
        bool forecast = options.truth.empty() && (options.initial_conditions > 0 || options.ensemble_size > 0);
        if (!options.truth.empty()) {
            check_collectively(world, attempt([&] {
                                   forecast = io::is_forecast_file(
                                       options.prediction, {options.ensemble_dim, options.ensemble_size}, access);
                               }));
        }
        const ReportKind report = forecast ? ReportKind::forecast : ReportKind::pair;
        const bool forecast_only = !options.climatology.empty() || !options.regions.empty() ||
                                   options.include_initial_step || options.data_split.has_value() ||
                                   !options.normalize.empty() || options.near_zero_fraction || options.trend ||
                                   options.video || options.annual || options.seasonal || options.enso_index ||
                                   options.ipo_index || options.histogram || !options.enso_coefficient_index.empty();
        if (!forecast && forecast_only) {
            throw ArgumentError(
                "--climatology, --region, --include-initial-step, --data-split, --normalize, --near-zero-fraction, "
                "--trend, --video, --annual, --seasonal, --enso-index, --ipo-index, --enso-coefficient-index and "
                "--histogram need a forecast: "
                "files with a "
                "sample or "
                "member dim, or the "
                "built-in forecast "
                "(--initial-conditions, --ensemble-size)");
        }
        if (!forecast && !options.diagnostics.empty() && !options.spectrum) {
            throw ArgumentError(
                "--diagnostics of two fields writes their power spectra only: add --spectrum (ACE's other "
                "diagnostics files need a forecast: files with a sample or member dim, or the built-in forecast)");
        }
        if (forecast && !options.zonal.empty()) {
            throw ArgumentError(
                "--zonal is for two-field files; a forecast's zonal means go to --diagnostics DIR "
                "(zonal_mean_diagnostics.nc)");
        }
        // Before any work: no output may be an input or another output, or anything but a regular file. Every
        // rank checks (a node may see another file system), then all agree.
        const OutputPaths paths =
            output_paths(options.json, options.zonal, options.diagnostics,
                         {.forecast = forecast,
                          .spectrum = options.spectrum,
                          .near_zero_maps = options.near_zero_fraction && options.near_zero_config.include_maps,
                          .trend = options.trend,
                          .video = options.video,
                          .annual = options.annual,
                          .seasonal = options.seasonal,
                          .enso_index = options.enso_index,
                          .ipo_index = options.ipo_index,
                          .histogram = options.histogram,
                          .enso_coefficient = !options.enso_coefficient_index.empty()});
        std::vector<io::NamedPath> inputs = {{"--truth", options.truth},
                                             {"--pred", options.prediction},
                                             {"--climatology", options.climatology},
                                             {"--annual-reference-data", options.annual_reference_data},
                                             {"--enso-coefficient-index", options.enso_coefficient_index}};
        for (const std::string& stats : options.normalize) {
            inputs.push_back({"--normalize", stats});
        }
        check_collectively(world, attempt([&] {
                               for (const std::string& text : options.regions) {
                                   inputs.push_back({"--region", parse_region(text).mask_file});
                               }
                               check_diagnostics_folder(options.diagnostics);
                               io::check_output_paths(inputs, paths.named());
                           }));
        // Opening the files can fail on some ranks only (a node without the file system): agree first.
        std::unique_ptr<io::ForecastSource> source;
        check_collectively(world, attempt([&] { source = make_source(options, report, names, access); }));
        EvaluationPlan plan = make_plan(options, report, access);
        if (options.truth.empty()) {
            plan.variables = names;  // the built-in case's; the files' are chosen as they are opened
        }
        Progress progress(world.rank() == 0 && !options.quiet);
        plan.on_step = [&progress](const std::string& variable, std::int64_t done, std::int64_t total) {
            progress.step(variable, done, total);
        };
        const EvaluationResult result = evaluate(plan, *source, world);
        warn_about_latitudes(world, result, options.quiet);
        if (access.writes_collectively()) {
            write_outputs_collectively(result, paths, std::cout);
            return 0;
        }
        // World rank 0 writes; its output errors (a full disk) reach every rank.
        LocalFailure output_failure;
        if (world.rank() == 0) {
            output_failure = attempt([&] { write_outputs(result, paths, std::cout); });
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
        std::cerr << "gridshard: error on rank " << world.rank() << ": " << with_flags(error.what()) << "\n";
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
    command->add_option_function<std::string>(
        "--mesh",
        [options](const std::string& text) {
            try {
                options->mesh = parse_mesh_shape(text);
            } catch (const std::exception& error) {
                throw CLI::ValidationError("--mesh", error.what());
            }
        },
        "Mesh DxHxW (default 1xHxW, H the largest divisor <= sqrt(ranks))");
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
                      "Add every rank's seconds per phase (read, agreement, halo, compute, allreduce, zonal, "
                      "time_sums, final, total) and the pairs it scored to the JSON report");
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
                        "time_mean_diagnostics.nc (ACE's files) into this existing folder; with --spectrum, also "
                        "power_spectrum_diagnostics.nc (two fields: that file only)");
    CLI::Option* spectrum = command->add_flag(
        "--spectrum", options->spectrum,
        "Also the spherical power spectra, ACE's power_spectrum metric: the mean over the counted lead "
        "times (every step of two fields) and samples of each field's spectrum after ACE's NaN fill, "
        "the four norm biases in the table and JSON, the spectra in --diagnostics "
        "(docs/spectrum.md)");
    add_choice_option(
        *command, "--spectrum-grid", options->spectrum_options.spec.grid, parse_sphere_grid,
        [](SphereGrid g) { return to_string(g); },
        "The latitudes the transform assumes: legendre-gauss (ACE's), equiangular (with both poles) or lobatto")
        ->needs(spectrum);
    add_choice_option(
        *command, "--spectrum-truncation", options->spectrum_options.spec.truncation, parse_spectrum_truncation,
        [](SpectrumTruncation t) { return to_string(t); },
        "torch-harmonics-0.8 (ACE's: L = nlat, M = nlon/2+1) or triangular (L = M, Makani's)")
        ->needs(spectrum);
    add_count_option(*command, "--spectrum-lmax", options->spectrum_options.spec.lmax, 1, max_builtin_extent,
                     "Degrees of the spectrum (default: the truncation's)")
        ->needs(spectrum);
    add_count_option(*command, "--spectrum-mmax", options->spectrum_options.spec.mmax, 1, max_builtin_extent,
                     "Orders of the spectrum (default: the truncation's)")
        ->needs(spectrum);
    add_choice_option(
        *command, "--spectrum-convention", options->spectrum_options.spec.convention, parse_spectrum_convention,
        [](SpectrumConvention c) { return to_string(c); },
        "ace (each order m >= 0 once, ACE's) or full (m > 0 doubled, Makani's and Parseval's)")
        ->needs(spectrum);
    command
        ->add_option_function<std::string>(
            "--spectrum-fill",
            [options](const std::string& text) {
                if (text != "smooth" && text != "none") {
                    throw CLI::ValidationError("--spectrum-fill", "'" + text + "' is not one of smooth, none");
                }
                options->spectrum_fill = text == "smooth";
            },
            "NaN before the transform: smooth (ACE's SmoothFloodFill) or none (NaN propagates into the spectrum)")
        ->default_str("smooth")
        ->needs(spectrum);
    add_count_option(*command, "--spectrum-fill-steps", options->spectrum_fill_steps, 0, 10'000,
                     "The smooth fill's neighbour-averaging steps (ACE's num_steps)")
        ->default_str("4")
        ->needs(spectrum);
    command
        ->add_option("--normalize", options->normalize,
                     "Forecast: ACE's stats files MEANS.nc STDS.nc (one value per variable): also score the fields "
                     "normalised as ACE does, (x - mean) / std, under ACE's keys (mean_norm/*, time_mean_norm/rmse/*, "
                     "time_mean_norm/rmse/channel_mean) in the JSON report")
        ->expected(2);
    CLI::Option* near_zero = command->add_flag(
        "--near-zero-fraction", options->near_zero_fraction,
        "Forecast: also ACE's near_zero_fraction metric: per variable, over every counted lead time and sample, the "
        "area-weighted fraction of points at or below its eps (a missing value is not), averaged; the prediction's, "
        "the truth's and their difference (ACE's near_zero_fraction/gen and gen_minus_target) in the JSON report");
    command->add_option("--near-zero-fraction-eps", options->near_zero_config.eps, "The threshold (ACE's eps)")
        ->default_str("0")
        ->needs(near_zero);
    command
        ->add_option("--near-zero-fraction-variables", options->near_zero_variables,
                     "Comma-separated variables with near-zero fractions (ACE's variables; default: every variable)")
        ->needs(near_zero);
    command
        ->add_option_function<std::vector<std::string>>(
            "--near-zero-fraction-per-variable-eps",
            [options](const std::vector<std::string>& items) {
                for (const std::string& item : items) {
                    options->near_zero_config.per_variable_eps.push_back(
                        parse_named_number("--near-zero-fraction-per-variable-eps", item));
                }
            },
            "NAME=EPS: a variable's own threshold (ACE's per_variable_eps; repeatable)")
        ->needs(near_zero);
    command
        ->add_flag("--near-zero-fraction-include-maps", options->near_zero_config.include_maps,
                   "Also the per-cell fractions of the counted lead times and samples at or below eps, not "
                   "area-weighted (ACE's include_maps), in --diagnostics DIR/near_zero_fraction_diagnostics.nc")
        ->needs(near_zero);
    add_family(command, "--trend", options->trend, options->trend_variables, "a trend",
               "Forecast: also ACE's trend metric: per cell the least-squares slope per year (365.25 days) of the "
               "counted lead times' values against their valid times, of the prediction (every member) and of the "
               "truth, and the area-weighted RMSE of their difference (ACE's trend/weighted_rmse) in the JSON report; "
               "the maps in --diagnostics DIR/trend_diagnostics.nc");
    add_family(command, "--video", options->video, options->video_variables, "a video",
               "Forecast: also ACE's video metric: per counted lead time and cell the mean over every sample of the "
               "prediction and of the truth, in --diagnostics DIR/video_diagnostics.nc (lead times not counted: "
               "NaN)");
    command
        ->add_flag("--enable-extended-videos", options->extended_videos,
                   "Also ACE's extended videos (its enable_extended_videos): per counted lead time and cell the bias "
                   "of the mean maps, the RMSE, the least and the greatest error over every sample and the ratio of "
                   "the prediction's variance over samples to the truth's, in video_diagnostics.nc")
        ->needs("--video");
    add_family(command, "--annual", options->annual, options->annual_variables, "annual means",
               "Forecast: also ACE's annual metric: per sample and calendar year of the valid times the mean of the "
               "counted lead times' global means, kept where the year holds more than 350 days of steps (the run "
               "must be longer than 730 days), in --diagnostics DIR/annual_diagnostics.nc, and over more than one "
               "year ACE's RMSE of the yearly ensemble means and fair CRPS (annual/rmse, annual/crps) in the JSON "
               "report");
    command
        ->add_option("--annual-reference-data", options->annual_reference_data,
                     "ACE's monthly reference data of the annual means (its reference_data: fields over (sample, "
                     "time, lat, lon), counts and valid_time over (sample, time)): also ACE's R2 of the yearly "
                     "ensemble means of the truth and of the prediction against the reference's (annual/r2/VAR_target, "
                     "annual/r2/VAR_gen) for the variables it has")
        ->needs("--annual");
    add_family(command, "--seasonal", options->seasonal, options->seasonal_variables, "seasonal means",
               "Forecast: also ACE's seasonal metric: per season (DJF, MAM, JJA, SON) of the valid times the mean "
               "maps of the prediction and of the truth, and the area-weighted RMSE of their difference per season "
               "and over the four (seasonal/time-mean-rmse) in the JSON report");
    command->add_flag("--enso-index", options->enso_index,
                      "Forecast: also ACE's enso_index metric of the variables named sst, surface_temperature or TS: "
                      "per counted lead time the regional mean in ACE's Nino 3.4 box (5S-5N, 190-240E, ACE's "
                      "weights), per sample ACE's 5-month running index of its monthly anomalies, in --diagnostics "
                      "DIR/enso_index_diagnostics.nc, and ACE's summaries (nino34_index_std, its band powers and their "
                      "ratios to the truth's) in the JSON report; a run longer than 730 days");
    command->add_flag(
        "--ipo-index", options->ipo_index,
        "Forecast: also ACE's ipo_index metric of the variable named sst: per counted lead time the "
        "NaN-skipping means in ACE's three tripole boxes, per sample the monthly tripole index T2 - (T1 + "
        "T3) / 2 in --diagnostics DIR/ipo_index_diagnostics.nc, and the spread of its 13-year low-pass "
        "filtered form (ipo_tpi_std, ipo_tpi_std_norm) in the JSON report; a run longer than 80 years");
    command->add_option(
        "--enso-coefficient-index", options->enso_coefficient_index,
        "Forecast: also ACE's enso_coefficient metric of every variable against the reference index in FILE (a "
        "netCDF file with a CF time coordinate and one variable over time, such as ACE's historical Nino 3.4 index: "
        "python3 -m gridshard.ace.enso_reference_index FILE writes fme's): per sample its series over the run as ACE "
        "forms it, per cell the regression coefficient of the counted lead times' values on it, averaged over the "
        "samples it covers, in --diagnostics DIR/enso_coefficient_diagnostics.nc, and the area-weighted RMSE of the "
        "prediction's map against the truth's (enso_coefficient_rmse) in the JSON report; a run longer than 1800 days");
    CLI::Option* histogram = command->add_flag(
        "--histogram", options->histogram,
        "Forecast: also ACE's histogram metric: per variable the counts of the truth (once per member, as ACE's) and "
        "of "
        "the prediction in ACE's 200 dynamic bins over every counted lead time, in --diagnostics "
        "DIR/histogram_diagnostics.nc, and their 99.9999th percentiles (histogram/target/99.9999th-percentile, "
        "histogram/prediction/...) in the JSON report; the bins follow ACE's windows (--forward-steps-in-memory)");
    command
        ->add_option("--histogram-variables", options->histogram_variables,
                     "Comma-separated variables with histograms (ACE's variables; default: every variable)")
        ->needs(histogram);
    command
        ->add_option("--forward-steps-in-memory", options->forward_steps_in_memory,
                     "The counted lead times of one of ACE's windows (its inference forward_steps_in_memory), which "
                     "the histograms' edges follow as ACE's do; default: every counted lead time in one window")
        ->check(CLI::PositiveNumber)
        ->needs(histogram);
    CLI::Option* quantiles = command->add_option(
        "--quantiles", options->quantiles,
        "Comma-separated probabilities in [0, 1] (0.5,0.99,0.9999): each variable's exact quantiles over the whole "
        "run, "
        "every point and counted lead time (every step of two fields) of the truth and of the prediction (every "
        "member), globally and per --region: numpy's nanquantile of those values, bit for bit at every mesh, in the "
        "table and the JSON report; each pass after the first reads the run again (docs/evaluation.md)");
    add_choice_option(
        *command, "--quantile-method", options->quantile_method, parse_quantile_method,
        [](QuantileMethod m) { return to_string(m); }, "numpy's method: linear (its default) or inverted_cdf")
        ->needs(quantiles);
    command->add_flag("--include-initial-step", options->include_initial_step,
                      "Forecast: count lead 0 (the initial condition) in the time means; by default it is left "
                      "out, as ACE does");
    command->add_option_function<std::string>(
        "--data-split",
        [options](const std::string& text) {
            try {
                options->data_split =
                    text == "auto" ? std::nullopt : std::optional<DataSplit>(parse_data_split(text, "--data-split"));
            } catch (const std::exception& error) {
                throw CLI::ValidationError("--data-split", error.what());
            }
        },
        "Forecast: what the data ranks split: initial-conditions, lead-times, members or auto (default: initial "
        "conditions when there are at least as many as data ranks, else lead times when there are, else members)");
    return [options] { return run_eval(*options); };
}

}  // namespace gridshard::cli
