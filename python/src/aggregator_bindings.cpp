// The evaluation layer's streaming aggregator on buffers (evaluation/aggregator.hpp): one per variable, built
// from the mesh, the grid's latitudes and the forecast's shape, fed one (initial condition, lead time) of this
// rank's box at a time, finished into every score of the registry. The pure-Python layer
// (gridshard.Aggregator) checks the caller's arrays, turns them into these buffers and shapes the results; the
// numbers are the library's, the same bits as `gridshard eval` on the same data.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aggregator_results.hpp"
#include "aggregator_support.hpp"
#include "bindings.hpp"
#include "buffers.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/evaluation/score_registry.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/forecast_inputs.hpp"
#include "gridshard/io/normalization.hpp"
#include "python_mesh.hpp"

namespace gridshard::python {
namespace {

/// What an aggregator is built from, as the Python layer gives it.
struct AggregatorArguments {
    std::string problem;  // this rank's own argument problem, raised on every rank
    std::int64_t nlat = 0;
    std::int64_t nlon = 0;
    std::int64_t element_code = 0;  // 4: float32, 8: float64
    std::int64_t initial_conditions = 1;
    std::int64_t members = 1;
    std::int64_t lead_times = 1;
    std::int64_t channels = 1;
    Range mine{};  // the initial conditions this rank records
    std::vector<std::int64_t> counted_leads;
    bool maps = false;
    std::string policy;
    std::string report;
    std::vector<std::string> deterministic_keys{};  // empty: every one
    bool lead_ensemble_scores = true;
    std::vector<std::int64_t> ensemble_cell_leads{};
    bool ensemble_cell_maps = false;  // the statistics' maps too (ACE's log_mean_maps)
    double crps_alpha = 0.95;
    // The power spectra: none when `spectrum_grid` is empty; the fill's steps, or -1 for none.
    std::string spectrum_grid, spectrum_truncation, spectrum_convention;
    std::int64_t spectrum_lmax = 0, spectrum_mmax = 0, spectrum_fill_steps = -1;
    // A multiplier of the area weights on this rank's box, row-major (ACE's mask of the variable), or none.
    std::optional<std::vector<double>> mask{};
    // ACE's (mean, std) of the variable: its normalised scores beside the others (AggregatorOptions::normalization).
    std::optional<std::pair<double, double>> normalization{};
    // ACE's near-zero fractions at or below `near_zero_eps` (AggregatorOptions::near_zero_fraction), or none.
    std::optional<double> near_zero_eps{};
    bool near_zero_maps = false;
    // ACE's trend (AggregatorOptions::trend): each pair recorded with its time.
    bool trend = false;
    // ACE's video (AggregatorOptions::video), with its extended videos (AggregatorOptions::extended_video).
    bool video = false, extended_video = false;
    // ACE's annual means (AggregatorOptions::annual) of a run of this timestep (0: none), and seasonal means.
    double annual_timestep = 0.0;
    bool seasonal = false;
    // ACE's Niño 3.4 index (AggregatorOptions::regional_index) over the grid's longitudes `lon` (degrees), or none.
    std::optional<std::vector<double>> nino34_lon{};
    // ACE's histograms (AggregatorOptions::histogram): every record() a window.
    bool histogram = false;
    // ACE's ENSO coefficient (AggregatorOptions::index_regression): the index per (initial condition, lead), or none.
    std::optional<std::vector<double>> regression_index{};
    // ACE's IPO tripole index (AggregatorOptions::tripole_index) over the grid's longitudes, or none.
    std::optional<std::vector<double>> ipo_lon{};
    // Whether the aggregator needs each pair's valid time (the trend, annual or seasonal means, the indices).
    [[nodiscard]] bool timed() const {
        return trend || annual_timestep != 0.0 || seasonal || nino34_lon.has_value() || ipo_lon.has_value();
    }
};

/// The power spectra of `args` (none when it asks for none). Throws ArgumentError naming a bad name.
std::optional<PowerSpectrumOptions> spectrum_of(const AggregatorArguments& args) {
    if (args.spectrum_grid.empty()) {
        return std::nullopt;
    }
    PowerSpectrumOptions o;
    o.spec.grid = parse_sphere_grid(args.spectrum_grid);
    o.spec.truncation = parse_spectrum_truncation(args.spectrum_truncation);
    o.spec.convention = parse_spectrum_convention(args.spectrum_convention);
    o.spec.lmax = args.spectrum_lmax;
    o.spec.mmax = args.spectrum_mmax;
    if (args.spectrum_fill_steps < 0) {
        o.fill.reset();
    } else {
        o.fill->num_steps = static_cast<int>(args.spectrum_fill_steps);
    }
    return o;
}

/// One variable's aggregator, with what it was told and what it has been fed.
class PythonAggregator {
  public:
    /// Collective over the world: agrees on the arguments (grid, dtype, shape, lead times counted, options, the
    /// latitudes' bits), checks the ranks' ranges of initial conditions, and allocates the aggregator. Raises
    /// ArgumentError alike on every rank.
    PythonAggregator(PythonMesh& mesh, AggregatorArguments args, py::object lat_deg, py::object mask)
        : args_(std::move(args)) {
        std::vector<double> lat;
        AggregatorOptions options;
        if (args_.problem.empty()) {
            args_.problem =
                attempt([&] {
                    py::buffer b = lat_deg.cast<py::buffer>();
                    const auto span = contiguous_span<const double>(b, "lat", false);
                    lat.assign(span.begin(), span.end());
                    if (!mask.is_none()) {
                        py::buffer m = mask.cast<py::buffer>();
                        const auto values = contiguous_span<const double>(m, "mask", false);
                        args_.mask.emplace(values.begin(), values.end());
                    }
                    if (static_cast<std::int64_t>(lat.size()) != args_.nlat) {
                        throw ArgumentError("lat: " + std::to_string(lat.size()) + " latitudes for " +
                                            std::to_string(args_.nlat) + " rows");
                    }
                    options.policy = parse_validity_policy(args_.policy);
                    options.report = args_.report == "forecast" ? ReportKind::forecast
                                     : args_.report == "pair"   ? ReportKind::pair
                                                                : throw ArgumentError(
                                                                      "report must be 'forecast' or 'pair', "
                                                                        "not '" +
                                                                      args_.report + "'");
                    for (const std::int64_t row : args_.counted_leads) {
                        if (row < 0 || row >= args_.lead_times) {
                            throw ArgumentError("counted_leads: row " + std::to_string(row) + " is not one of the " +
                                                std::to_string(args_.lead_times) + " lead times");
                        }
                    }
                    if (args_.counted_leads.empty()) {
                        throw ArgumentError("counted_leads: the time means need at least one lead time");
                    }
                    options.spectrum = spectrum_of(args_);
                    if (args_.near_zero_eps) {  // the threshold's rule is the config's
                        options.near_zero_fraction =
                            NearZeroFractionConfig{.eps = *args_.near_zero_eps, .include_maps = args_.near_zero_maps}
                                .options_for("this variable");
                    }
                    options.trend = args_.trend;
                    options.video = args_.video;
                    options.extended_video = args_.extended_video;
                    if (args_.annual_timestep != 0.0) {
                        options.annual = AnnualOptions{args_.annual_timestep};
                    }
                    options.seasonal = args_.seasonal;
                    if (args_.histogram) {
                        options.histogram = HistogramOptions{};
                    }
                    if (args_.regression_index) {
                        options.index_regression = IndexRegressionOptions{*args_.regression_index};
                    }
                }).message;
        }
        py::gil_scoped_release release;
        const ShardedGrid& grid =
            mesh.grid_named(mesh.mesh().world(), args_.problem, {args_.nlat, args_.nlon}, args_.element_code);
        io::InputHash chosen;  // the counted lead times, the latitudes' bits and the scores, as one number
        for (const std::int64_t row : args_.counted_leads) {
            chosen.add(row);
        }
        chosen.add(std::span<const double>(lat));
        for (const std::string& key : args_.deterministic_keys) {
            chosen.add(key);
        }
        chosen.add(static_cast<std::int64_t>(args_.lead_ensemble_scores ? 1 : 0));
        for (const std::int64_t lead : args_.ensemble_cell_leads) {
            chosen.add(lead);
        }
        chosen.add(std::span<const double>(&args_.crps_alpha, 1));
        chosen.add(static_cast<std::int64_t>(args_.ensemble_cell_maps ? 1 : 0));
        chosen.add(static_cast<std::int64_t>(args_.mask ? 1 : 0));  // every rank its box's mask, or none
        // The registry's scores of the report (register_score on one rank only would change what this rank forms).
        for (const RegisteredScore* s :
             report_scores(options.report, {true, true, true, true, true, true, true, true, true, true, true})) {
            chosen.add(s->key);
        }
        for (const std::string& name : {args_.spectrum_grid, args_.spectrum_truncation, args_.spectrum_convention}) {
            chosen.add(name);
        }
        for (const std::int64_t value : {args_.spectrum_lmax, args_.spectrum_mmax, args_.spectrum_fill_steps}) {
            chosen.add(value);
        }
        const double near_zero[] = {args_.near_zero_eps.value_or(-1.0),
                                    args_.near_zero_maps ? 1.0 : 0.0,
                                    args_.trend ? 1.0 : 0.0,
                                    args_.video ? 1.0 : 0.0,
                                    args_.extended_video ? 1.0 : 0.0,
                                    args_.annual_timestep,
                                    args_.seasonal ? 1.0 : 0.0,
                                    args_.histogram ? 1.0 : 0.0,
                                    args_.regression_index ? 1.0 : 0.0};
        chosen.add(std::span<const double>(near_zero));
        if (args_.nino34_lon) {  // the index's longitudes, alike on every rank
            chosen.add(std::span<const double>(*args_.nino34_lon));
        }
        if (args_.ipo_lon) {
            chosen.add(std::span<const double>(*args_.ipo_lon));
        }
        agree_or_throw(
            mesh.mesh().world(), "",
            {args_.initial_conditions, args_.members, args_.lead_times, args_.channels, chosen.value(),
             args_.maps ? 1 : 0, static_cast<std::int64_t>(options.policy), static_cast<std::int64_t>(options.report)},
            "the aggregator's initial conditions, members, lead times, channels, counted lead times, "
            "maps, policy, report, latitudes, scores (and the registry's) and whether a mask is given");
        check_ranges(mesh.mesh(), args_.mine, args_.initial_conditions);
        options.summation = mesh.summation();
        options.counted_leads = args_.counted_leads;
        options.maps = args_.maps;
        options.deterministic_keys = args_.deterministic_keys;
        options.lead_ensemble_scores = args_.lead_ensemble_scores;
        options.ensemble_cell_leads = args_.ensemble_cell_leads;
        options.ensemble_cell_maps = args_.ensemble_cell_maps;
        options.crps_alpha = args_.crps_alpha;
        options.gather_maps = true;
        if (args_.normalization) {
            options.normalization = io::ChannelStats{{args_.normalization->first}, {args_.normalization->second}};
        }
        const AggregatorShape shape{
            {args_.initial_conditions, args_.members, args_.lead_times},
            args_.channels,
            {args_.mine, {0, args_.lead_times}, {0, args_.members}, DataSplit::initial_conditions}};
        grid_ = &grid;
        std::unique_ptr<Aggregator> made;
        check_collectively(
            mesh.mesh().world(), attempt([&] {
                const AreaWeights area = cos_lat_weights(lat, args_.nlon, grid.box().lat);
                const std::vector<RegionWeights> regions{
                    {"global", args_.mask ? masked_weights(area, *args_.mask, grid.box()) : area}};
                if (args_.nino34_lon) {  // ACE's regional means take no mask
                    if (static_cast<std::int64_t>(args_.nino34_lon->size()) != args_.nlon) {
                        throw ArgumentError("nino34_lon: " + std::to_string(args_.nino34_lon->size()) +
                                            " longitudes for " + std::to_string(args_.nlon) + " columns");
                    }
                    options.regional_index = RegionalIndexOptions{
                        ace_regional_weights(area.view(), lat, *args_.nino34_lon, grid.box(), nino34_box)};
                }
                if (args_.ipo_lon) {
                    if (static_cast<std::int64_t>(args_.ipo_lon->size()) != args_.nlon) {
                        throw ArgumentError("ipo_lon: " + std::to_string(args_.ipo_lon->size()) + " longitudes for " +
                                            std::to_string(args_.nlon) + " columns");
                    }
                    options.tripole_index = TripoleIndexOptions{ace_tripole_weights(lat, *args_.ipo_lon, grid.box())};
                }
                made = std::make_unique<Aggregator>(grid, shape, regions, options);
                recorded_.assign(static_cast<std::size_t>(args_.mine.size() * args_.lead_times), false);
            }));
        aggregator_ = std::move(made);
    }

    /// (rows, cols) of this rank's box.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> box() const {
        return {grid_->box().lat.size(), grid_->box().lon.size()};
    }

    /// Scores one (initial condition, lead time): `truth` (channels, rows, cols) and `members` (members,
    /// channels, rows, cols) of this rank's box, of the aggregator's dtype. Collective over the spatial group:
    /// one agreement (that every rank of it records the same pair, and any rank's problem), then the
    /// aggregator's record.
    void record(std::string problem, std::int64_t initial_condition, std::int64_t lead, py::object truth,
                py::object members, std::optional<std::tuple<double, std::int64_t, int>> time) {
        std::optional<py::buffer> t;
        std::optional<py::buffer> m;
        const auto [rows, cols] = box();
        const auto plane = static_cast<std::size_t>(args_.channels * rows * cols);
        if (problem.empty()) {
            problem = attempt([&] {
                          if (!args_.mine.contains(initial_condition)) {
                              throw ArgumentError("initial condition " + std::to_string(initial_condition) +
                                                  " is not one of this rank's, " + std::to_string(args_.mine.begin) +
                                                  ".." + std::to_string(args_.mine.end));
                          }
                          if (lead < 0 || lead >= args_.lead_times) {
                              throw ArgumentError("lead " + std::to_string(lead) + " is not one of the " +
                                                  std::to_string(args_.lead_times) + " lead times");
                          }
                          if (args_.timed() != time.has_value()) {
                              throw ArgumentError(args_.timed()
                                                      ? "time: the trend, annual and seasonal means need each pair's "
                                                        "valid time"
                                                      : "time: given to an aggregator without a trend, annual or "
                                                        "seasonal means");
                          }
                          if (time && (!std::isfinite(std::get<0>(*time)) || std::get<2>(*time) < 1 ||
                                       std::get<2>(*time) > 12)) {
                              throw ArgumentError("time: " + std::to_string(std::get<0>(*time)) + " seconds, month " +
                                                  std::to_string(std::get<2>(*time)) + " is not a valid time");
                          }
                          if (recorded_[slot(initial_condition, lead)]) {
                              throw ArgumentError("initial condition " + std::to_string(initial_condition) + ", lead " +
                                                  std::to_string(lead) + " was recorded already");
                          }
                          t = truth.cast<py::buffer>();
                          m = members.cast<py::buffer>();
                          const std::int64_t code = element_kind(*t) == ElementKind::float32   ? 4
                                                    : element_kind(*t) == ElementKind::float64 ? 8
                                                                                               : 0;
                          if (code != args_.element_code || element_kind(*m) != element_kind(*t)) {
                              throw ArgumentError(std::string("the fields' dtype must be the aggregator's, ") +
                                                  (args_.element_code == 4 ? "float32" : "float64"));
                          }
                          with_floating_type(*t, "target", [&](auto zero) {
                              using T = decltype(zero);
                              if (contiguous_span<const T>(*t, "target", false).size() != plane ||
                                  contiguous_span<const T>(*m, "prediction", false).size() !=
                                      plane * static_cast<std::size_t>(args_.members)) {
                                  throw ArgumentError("the fields are not this rank's box of " + std::to_string(rows) +
                                                      " x " + std::to_string(cols));
                              }
                          });
                      }).message;
        }
        py::gil_scoped_release release;
        agree_or_throw(grid_->mesh().spatial(), problem_of(problem),
                       {initial_condition, lead, std::bit_cast<std::int64_t>(time ? std::get<0>(*time) : 0.0),
                        time ? std::get<1>(*time) * 12 + std::get<2>(*time) : 0},
                       "the (initial condition, lead time, valid time) the ranks of a spatial group record");
        recorded_[slot(initial_condition, lead)] = true;
        if (time) {
            aggregator_->record_time(initial_condition, lead,
                                     {std::get<0>(*time), std::get<1>(*time), std::get<2>(*time)});
        }
        py::gil_scoped_acquire acquire;
        with_floating_type(*t, "target", [&](auto zero) {
            using T = decltype(zero);
            const auto truth_values = contiguous_span<const T>(*t, "target", false);
            const auto member_values = contiguous_span<const T>(*m, "prediction", false);
            py::gil_scoped_release again;
            aggregator_->record<T>(initial_condition, lead, {truth_values, args_.channels}, member_values);
        });
    }

    /// With the histograms: ends the window of pairs recorded since the last call (collective over the world; every
    /// rank calls it once per window, then again while it returns true, having given the window's pairs again through
    /// replay_histogram).
    /// With the annual means: ACE's monthly reference data, `values` float64 (channels, samples, times, rows, cols)
    /// of this rank's box (Aggregator::set_annual_reference). Collective over the world.
    void set_annual_reference(std::string problem, py::object values, std::int64_t samples, std::vector<double> counts,
                              std::vector<std::int64_t> years) {
        std::optional<py::buffer> buffer;
        std::span<const double> span;
        if (problem.empty()) {
            problem = attempt([&] {
                          buffer = values.cast<py::buffer>();
                          span = contiguous_span<const double>(*buffer, "annual reference values", false);
                      }).message;
        }
        py::gil_scoped_release release;
        check_collectively(grid_->mesh().world(), problem_of(problem));
        aggregator_->set_annual_reference<double>(span, samples, counts, years);
    }

    bool end_histogram_window() {
        py::gil_scoped_release release;
        return aggregator_->end_histogram_window();
    }

    /// One pair of the window being ended again, for the histograms (no MPI calls); as record's fields.
    void replay_histogram(std::int64_t initial_condition, std::int64_t lead, py::buffer truth, py::buffer members) {
        with_floating_type(truth, "target", [&](auto zero) {
            using T = decltype(zero);
            const auto truth_values = contiguous_span<const T>(truth, "target", false);
            const auto member_values = contiguous_span<const T>(members, "prediction", false);
            if (static_cast<std::int64_t>(element_kind(truth) == ElementKind::float32 ? 4 : 8) != args_.element_code ||
                element_kind(members) != element_kind(truth) ||
                truth_values.size() * static_cast<std::size_t>(args_.members) != member_values.size()) {
                throw ArgumentError("replay_histogram: the fields are not the pair's as recorded");
            }
            py::gil_scoped_release release;
            aggregator_->replay_histogram<T>(initial_condition, lead, {truth_values, args_.channels}, member_values);
        });
    }

    /// The deterministic per-lead scores of lead times first..stop-1, {key: (stop - first,)}, as finish() will give
    /// them. Collective over the world: one agreement (every rank has recorded those lead times of its initial
    /// conditions), one allreduce over the data group.
    py::dict lead_scores(std::int64_t first, std::int64_t stop) {
        std::string problem;
        if (first < 0 || stop > args_.lead_times || first >= stop) {
            problem = "lead_scores: leads " + std::to_string(first) + ".." + std::to_string(stop) + " of " +
                      std::to_string(args_.lead_times);
        }
        for (std::int64_t ic = args_.mine.begin; ic < args_.mine.end && problem.empty(); ++ic) {
            for (std::int64_t lead = first; lead < stop && problem.empty(); ++lead) {
                if (!recorded_[slot(ic, lead)]) {
                    problem = "lead_scores: initial condition " + std::to_string(ic) + ", lead " +
                              std::to_string(lead) + " was never recorded";
                }
            }
        }
        std::vector<std::vector<ScoreSeries>> scores;
        {
            py::gil_scoped_release release;
            agree_or_throw(grid_->mesh().world(), problem, {first, stop}, "the lead times of lead_scores");
            scores = aggregator_->lead_scores({first, stop});
        }
        py::dict out;
        for (const ScoreSeries& s : scores.at(0)) {
            out[py::str(s.score->key)] = packed(s.values);
        }
        return out;
    }

    /// Every score, on every rank (the maps on world rank 0 only). Collective over the world; once. Raises alike
    /// on every rank when a rank has not recorded every lead time of its initial conditions.
    py::dict finish(const std::string& variable) {
        std::string problem;
        if (finished_) {
            problem = "the aggregator of '" + variable + "' was finished already";
        }
        for (std::int64_t ic = args_.mine.begin; ic < args_.mine.end && problem.empty(); ++ic) {
            for (std::int64_t lead = 0; lead < args_.lead_times && problem.empty(); ++lead) {
                if (!recorded_[slot(ic, lead)]) {
                    problem = "'" + variable + "': initial condition " + std::to_string(ic) + ", lead " +
                              std::to_string(lead) +
                              " was never recorded; every lead time of every initial "
                              "condition must be, before the scores";
                }
            }
        }
        VariableScores scores;
        {
            py::gil_scoped_release release;
            check_collectively(grid_->mesh().world(), problem);
            finished_ = true;
            scores = aggregator_->finish(variable);
        }
        py::dict out;
        for (const ChannelScores& channel : scores) {
            out[py::str(channel.name)] = channel_dict(channel);
        }
        for (const ChannelScores& channel : aggregator_->normalized_scores()) {
            out[py::str(channel.name)].cast<py::dict>()["normalized"] = channel_dict(channel);
        }
        return out;
    }

  private:
    [[nodiscard]] std::size_t slot(std::int64_t ic, std::int64_t lead) const {
        return static_cast<std::size_t>((ic - args_.mine.begin) * args_.lead_times + lead);
    }

    AggregatorArguments args_;
    const ShardedGrid* grid_ = nullptr;
    std::unique_ptr<Aggregator> aggregator_;
    std::vector<bool> recorded_;
    bool finished_ = false;
};

}  // namespace

void bind_aggregator(py::module_& m) {
    py::class_<AggregatorArguments>(m, "AggregatorSettings",
                                    "One variable's aggregator settings, by keyword (AggregatorOptions and the "
                                    "forecast's shape; evaluation/aggregator.hpp).")
        .def(py::init([](const py::kwargs& given) {
                 AggregatorArguments a;
                 const std::pair<const char*, std::function<void(py::handle)>> fields[] = {
                     {"problem", [&](py::handle v) { a.problem = v.cast<std::string>(); }},
                     {"nlat", [&](py::handle v) { a.nlat = v.cast<std::int64_t>(); }},
                     {"nlon", [&](py::handle v) { a.nlon = v.cast<std::int64_t>(); }},
                     {"element_code", [&](py::handle v) { a.element_code = v.cast<std::int64_t>(); }},
                     {"initial_conditions", [&](py::handle v) { a.initial_conditions = v.cast<std::int64_t>(); }},
                     {"members", [&](py::handle v) { a.members = v.cast<std::int64_t>(); }},
                     {"lead_times", [&](py::handle v) { a.lead_times = v.cast<std::int64_t>(); }},
                     {"channels", [&](py::handle v) { a.channels = v.cast<std::int64_t>(); }},
                     {"mine",
                      [&](py::handle v) {
                          const auto r = v.cast<std::pair<std::int64_t, std::int64_t>>();
                          a.mine = {r.first, r.second};
                      }},
                     {"counted_leads", [&](py::handle v) { a.counted_leads = v.cast<std::vector<std::int64_t>>(); }},
                     {"maps", [&](py::handle v) { a.maps = v.cast<bool>(); }},
                     {"policy", [&](py::handle v) { a.policy = v.cast<std::string>(); }},
                     {"report", [&](py::handle v) { a.report = v.cast<std::string>(); }},
                     {"deterministic_keys",
                      [&](py::handle v) { a.deterministic_keys = v.cast<std::vector<std::string>>(); }},
                     {"lead_ensemble_scores", [&](py::handle v) { a.lead_ensemble_scores = v.cast<bool>(); }},
                     {"ensemble_cell_leads",
                      [&](py::handle v) { a.ensemble_cell_leads = v.cast<std::vector<std::int64_t>>(); }},
                     {"crps_alpha", [&](py::handle v) { a.crps_alpha = v.cast<double>(); }},
                     {"ensemble_cell_maps", [&](py::handle v) { a.ensemble_cell_maps = v.cast<bool>(); }},
                     {"spectrum_grid", [&](py::handle v) { a.spectrum_grid = v.cast<std::string>(); }},
                     {"spectrum_truncation", [&](py::handle v) { a.spectrum_truncation = v.cast<std::string>(); }},
                     {"spectrum_convention", [&](py::handle v) { a.spectrum_convention = v.cast<std::string>(); }},
                     {"spectrum_lmax", [&](py::handle v) { a.spectrum_lmax = v.cast<std::int64_t>(); }},
                     {"spectrum_mmax", [&](py::handle v) { a.spectrum_mmax = v.cast<std::int64_t>(); }},
                     {"spectrum_fill_steps", [&](py::handle v) { a.spectrum_fill_steps = v.cast<std::int64_t>(); }},
                     {"normalization",
                      [&](py::handle v) {
                          if (!v.is_none()) {
                              a.normalization = v.cast<std::pair<double, double>>();
                          }
                      }},
                     {"near_zero_eps",
                      [&](py::handle v) {
                          if (!v.is_none()) {
                              a.near_zero_eps = v.cast<double>();
                          }
                      }},
                     {"near_zero_maps", [&](py::handle v) { a.near_zero_maps = v.cast<bool>(); }},
                     {"trend", [&](py::handle v) { a.trend = v.cast<bool>(); }},
                     {"video", [&](py::handle v) { a.video = v.cast<bool>(); }},
                     {"extended_video", [&](py::handle v) { a.extended_video = v.cast<bool>(); }},
                     {"annual_timestep", [&](py::handle v) { a.annual_timestep = v.cast<double>(); }},
                     {"seasonal", [&](py::handle v) { a.seasonal = v.cast<bool>(); }},
                     {"histogram", [&](py::handle v) { a.histogram = v.cast<bool>(); }},
                     {"regression_index",
                      [&](py::handle v) {
                          if (!v.is_none()) {
                              a.regression_index = v.cast<std::vector<double>>();
                          }
                      }},
                     {"ipo_lon",
                      [&](py::handle v) {
                          if (!v.is_none()) {
                              a.ipo_lon = v.cast<std::vector<double>>();
                          }
                      }},
                     {"nino34_lon",
                      [&](py::handle v) {
                          if (!v.is_none()) {
                              a.nino34_lon = v.cast<std::vector<double>>();
                          }
                      }},
                 };
                 for (const auto& [key, value] : given) {
                     const std::string name = py::str(key);
                     const auto* field = std::find_if(std::begin(fields), std::end(fields),
                                                      [&](const auto& f) { return name == f.first; });
                     if (field == std::end(fields)) {
                         throw ArgumentError("AggregatorSettings: no setting '" + name + "'");
                     }
                     field->second(value);
                 }
                 return a;
             }),
             "Every setting by keyword: problem, nlat, nlon, element_code (4: float32, 8: float64), "
             "initial_conditions, members, lead_times, channels, mine ((first, stop) of this rank's initial "
             "conditions), counted_leads, maps, policy, report, deterministic_keys, lead_ensemble_scores, "
             "ensemble_cell_leads, ensemble_cell_maps, crps_alpha, spectrum_grid ('' for none), spectrum_truncation, "
             "spectrum_convention, "
             "spectrum_lmax, spectrum_mmax, spectrum_fill_steps (-1: no fill), normalization ((mean, std) or None), "
             "near_zero_eps (ACE's near-zero fractions at or below it, or None), near_zero_maps, trend (ACE's "
             "trend: each pair recorded with its time), video (ACE's video), extended_video (its extended videos), "
             "annual_timestep (ACE's annual means of "
             "a run of this timestep in seconds; 0: none), seasonal (ACE's seasonal means) and nino34_lon (ACE's Nino "
             "3.4 "
             "index over the grid's longitudes, or None) histogram (ACE's histograms, every record a window) and "
             "regression_index (ACE's ENSO coefficient: the "
             "index per (initial condition, lead time), NaN where not covered, or None).");

    py::class_<PythonAggregator>(m, "Aggregator", "One variable's streaming aggregator (evaluation/aggregator.hpp).")
        .def(py::init([](PythonMesh& mesh, AggregatorArguments settings, py::object lat_deg, py::object mask) {
                 return std::make_unique<PythonAggregator>(mesh, std::move(settings), std::move(lat_deg),
                                                           std::move(mask));
             }),
             py::arg("mesh"), py::arg("settings"), py::arg("lat"), py::arg("mask") = py::none(),
             "Collective over the world (agreement, one allreduce of the ranges, the allocation). `settings`: an "
             "AggregatorSettings; `mask`: float64 values of this rank's box that multiply the area weights (ACE's mask "
             "of the variable), or None.")
        .def_property_readonly("box", &PythonAggregator::box, "(rows, cols) of this rank's box")
        .def("record", &PythonAggregator::record, py::arg("problem"), py::arg("initial_condition"), py::arg("lead"),
             py::arg("truth"), py::arg("members"), py::arg("time") = py::none(),
             "Collective over the spatial group; `time` (with the trend, annual or seasonal means): the pair's valid "
             "time, (seconds since 2000-01-01 00:00:00 of the run's calendar, year, month).")
        .def("set_annual_reference", &PythonAggregator::set_annual_reference, py::arg("problem"), py::arg("values"),
             py::arg("samples"), py::arg("counts"), py::arg("years"),
             "Collective over the world: ACE's monthly reference data of the annual means (float64 values of this "
             "rank's box, (samples, times, rows, cols); counts per (sample, time); years per time).")
        .def("end_histogram_window", &PythonAggregator::end_histogram_window,
             "Collective over the world: ends a window of the histograms; true: give its pairs again "
             "(replay_histogram) and call again.")
        .def("replay_histogram", &PythonAggregator::replay_histogram, py::arg("initial_condition"), py::arg("lead"),
             py::arg("truth"), py::arg("members"), "No MPI calls: one pair of the window being ended, again.")
        .def("lead_scores", &PythonAggregator::lead_scores, py::arg("first"), py::arg("stop"),
             "Collective over the world: the deterministic per-lead scores of leads first..stop-1.")
        .def("finish", &PythonAggregator::finish, py::arg("variable"),
             "Collective over the world: every score on every rank, the maps on world rank 0.");

    m.def(
        "registered_scores",
        [] {
            py::list out;
            for (const RegisteredScore& s : registered_scores()) {
                py::dict d;
                d["report"] = s.report == ReportKind::forecast ? "forecast" : "pair";
                d["key"] = s.key;
                d["label"] = s.label;
                d["ace_key"] = s.ace_key;
                d["family"] = std::string(to_string(s.family));
                d["combination"] = std::string(to_string(s.combination));
                d["policy"] = std::string(to_string(s.policy));
                d["ace_normalized"] = s.ace_normalized;
                d["ace_step_log"] = std::string(to_string(s.ace_step_log));
                out.append(d);
            }
            return out;
        },
        "Every score of the registry (evaluation/score_registry.hpp), in order, as dicts.");
    m.def(
        "register_score",
        [](const std::string& report, const std::string& key, const std::string& definition, const std::string& label,
           const std::string& ace_key, const std::string& policy, bool ace_normalized, const std::string& ace_step_log,
           int table_order) {
            RegisteredScore score{.key = key, .label = label, .ace_key = ace_key};
            if (report != "pair" && report != "forecast") {
                throw ArgumentError("register_score: report '" + report + "' is not pair or forecast");
            }
            score.report = report == "forecast" ? ReportKind::forecast : ReportKind::pair;
            for (int k = 0;; ++k) {  // every EvaluatorScore, in order
                const auto id = static_cast<EvaluatorScore>(k);
                if (k > static_cast<int>(EvaluatorScore::grad_mag_percent_diff_own_points)) {
                    throw ArgumentError("register_score: definition '" + definition +
                                        "' is not one of the Evaluator's scores");
                }
                if (score_definition(id).name == definition) {
                    score.source = &score_definition(id);
                    break;
                }
            }
            const std::pair<const char*, PolicyRule> rules[] = {{"follows_option", PolicyRule::follows_option},
                                                                {"own_gradient", PolicyRule::own_gradient},
                                                                {"all_finite", PolicyRule::all_finite},
                                                                {"nan_fill", PolicyRule::nan_fill}};
            const auto* rule =
                std::find_if(std::begin(rules), std::end(rules), [&](const auto& r) { return policy == r.first; });
            if (rule == std::end(rules)) {
                throw ArgumentError("register_score: policy '" + policy +
                                    "' is not follows_option, own_gradient, all_finite or nan_fill");
            }
            score.policy = rule->second;
            score.ace_normalized = ace_normalized;
            const AceStepLog logs[] = {AceStepLog::none, AceStepLog::fields, AceStepLog::fields_and_normalized};
            const auto* log = std::find_if(std::begin(logs), std::end(logs),
                                           [&](AceStepLog l) { return ace_step_log == to_string(l); });
            if (log == std::end(logs)) {
                throw ArgumentError("register_score: ace_step_log '" + ace_step_log +
                                    "' is not none, fields or fields_and_normalized");
            }
            score.ace_step_log = *log;
            score.table_order = table_order;
            (void)register_score(std::move(score));
        },
        py::arg("report"), py::arg("key"), py::arg("definition"), py::arg("label") = "", py::arg("ace_key") = "",
        py::arg("policy") = "follows_option", py::arg("ace_normalized") = false, py::arg("ace_step_log") = "none",
        py::arg("table_order") = 1000,
        "Adds a deterministic score of the Evaluator's definition `definition` (metrics/scores.hpp, e.g. 'rmse') to "
        "the registry under `key` (register_score, evaluation/score_registry.hpp): every Aggregator built afterwards "
        "forms it. Call it on every rank alike, before building aggregators. No MPI calls.");
    m.def(
        "read_normalization",
        [](const std::string& means, const std::string& stds, const std::vector<std::string>& names) {
            std::vector<io::SourceVariable> variables;
            for (const std::string& name : names) {
                variables.push_back({name, 1, io::ValueType::float32});
            }
            const io::Normalization stats(means, stds, variables);
            py::dict out;
            for (const std::string& name : names) {
                out[py::str(name)] = py::make_tuple(stats.of(name).means.at(0), stats.of(name).stds.at(0));
            }
            return out;
        },
        py::arg("means"), py::arg("stds"), py::arg("names"),
        "{name: (mean, std)} from ACE's stats files, read and checked as `gridshard eval --normalize` reads them "
        "(io/normalization.hpp). No MPI calls.");
    m.def(
        "check_variable_names",
        [](const std::string& setting, const std::string& field, const std::vector<std::string>& names,
           const std::vector<std::string>& scored) { check_variable_names(setting, field, names, scored); },
        py::arg("setting"), py::arg("field"), py::arg("names"), py::arg("scored"),
        "Raises ArgumentError naming the setting for a name of `names` that is not among `scored` or is given twice "
        "(check_variable_names, evaluation/aggregator.hpp). No MPI calls.");
    m.def(
        "near_zero_fraction_options",
        [](const std::vector<std::string>& scored, const std::optional<std::vector<std::string>>& variables, double eps,
           const std::map<std::string, double>& per_variable_eps, bool include_maps) {
            NearZeroFractionConfig config{.variables = variables.value_or(std::vector<std::string>{}),
                                          .eps = eps,
                                          .per_variable_eps = {per_variable_eps.begin(), per_variable_eps.end()},
                                          .include_maps = include_maps};
            if (variables && variables->empty()) {
                throw ArgumentError(setting_name("near_zero_fraction") + ": variables is an empty list");
            }
            config.check(scored);
            py::dict out;
            for (const std::string& name : scored) {
                if (const std::optional<NearZeroFractionOptions> o = config.options_for(name)) {
                    out[py::str(name)] = py::make_tuple(o->eps, o->maps);
                }
            }
            return out;
        },
        py::arg("scored"), py::arg("variables"), py::arg("eps"), py::arg("per_variable_eps"), py::arg("include_maps"),
        "{name: (eps, include_maps)} of ACE's near_zero_fraction config fields over the `scored` variables "
        "(NearZeroFractionConfig, evaluation/aggregator.hpp: its names and thresholds checked as `gridshard eval "
        "--near-zero-fraction` checks them). No MPI calls.");
    m.def(
        "ace_key",
        [](const std::string& key, const std::string& variable, bool normalized, std::int64_t step) {
            for (const RegisteredScore& s : registered_scores()) {
                if (s.report == ReportKind::forecast && s.key == key) {
                    return ace_key_of(s, variable, normalized, step);
                }
            }
            throw ArgumentError("ace_key: no forecast score '" + key + "' in the registry");
        },
        py::arg("key"), py::arg("variable"), py::arg("normalized") = false, py::arg("step") = 0,
        "ACE's log key of the registry's forecast score `key` (evaluation/score_registry.hpp, ace_key_of).");
    m.def(
        "channel_mean",
        [](const std::vector<double>& values, const std::vector<bool>& missing) {
            return channel_mean(values, missing);
        },
        py::arg("values"), py::arg("missing"),
        "ACE's channel mean: the plain mean, in order, of the values whose channel is not missing (NaN if none).");
}

}  // namespace gridshard::python
