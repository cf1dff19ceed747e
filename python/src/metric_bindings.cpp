// The metrics on buffers. Each binding reads its shards' shapes, finds the grid they form (one small
// collective, which also raises the Python layer's own argument problem on every rank), calls the library's
// metric with the GIL released, and writes its float64 results into the caller's buffer.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "bindings.hpp"
#include "buffers.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/ensemble.hpp"
#include "gridshard/metrics/flood_fill.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/spectrum.hpp"
#include "gridshard/metrics/terms.hpp"
#include "python_mesh.hpp"

namespace gridshard::python {
namespace {

/// What every metric binding takes: this rank's argument problem (empty when fine, and then the other
/// arguments are read), one or two fields `(channels, rows, cols)` of one dtype, the weights (float64,
/// `(rows,)` or `(rows, cols)`), and an optional region `(rows, cols)` in float64. They stay Python objects
/// until run_metric reads them, before the call's first collective, so that whatever fails there (a size
/// beyond int64, a buffer of the wrong kind) becomes this rank's problem, raised on every rank.
struct ShardArguments {
    std::string problem;
    std::int64_t signature = 0;  // what every rank must give alike: dtype, leading dims, weights or none
    py::object truth;
    py::object prediction;  // None for one-field metrics
    py::object weights;     // None for metrics without weights
    WeightsForm weights_form = WeightsForm::per_row;
    py::object region;     // None unless regional
    py::object img_shape;  // None, or the (nlat, nlon) the caller declares
    /// The prediction holds this many fields of the truth's channels, stacked slowest (ensemble members, or a
    /// prediction and its climatology).
    std::int64_t prediction_fields = 1;
};

/// `img_shape` as a grid shape: two ints, each within int64.
GridShape declared_shape(const py::object& img_shape) {
    try {
        const auto [nlat, nlon] = img_shape.cast<std::tuple<std::int64_t, std::int64_t>>();
        return {nlat, nlon};
    } catch (const py::cast_error&) {
        throw ArgumentError("img_shape=" + std::string(py::repr(img_shape)) +
                            ": expected (nlat, nlon), two ints between -2**63 and 2**63 - 1");
    }
}

/// Runs `compute(grid, truth, prediction, weights, region)` with T the fields' type and returns its values.
template <class Compute>
std::vector<double> metric_values(PythonMesh& self, ShardArguments args, Compute&& compute) {
    ShardShape shape;
    std::optional<py::buffer> truth;
    std::optional<py::buffer> prediction;
    std::optional<GridShape> declared;
    std::span<const double> weights;
    std::vector<double> expanded;
    std::span<const double> region;
    if (args.problem.empty()) {
        // Everything that reads or converts an argument is here, before the grid's allreduce: what fails on
        // this rank alone is its problem, raised there on every rank (never an exception on one rank while
        // the others wait).
        const LocalFailure failure = attempt([&] {
            if (!args.img_shape.is_none()) {
                declared = declared_shape(args.img_shape);
            }
            truth = args.truth.cast<py::buffer>();
            shape = shape_of(*truth, "data");
            if (element_kind(*truth) != ElementKind::float32 && element_kind(*truth) != ElementKind::float64) {
                throw ArgumentError("data: dtype must be float32 or float64");
            }
            if (!args.prediction.is_none()) {
                prediction = args.prediction.cast<py::buffer>();
                const ShardShape other = shape_of(*prediction, "predicted");
                if (other.channels != shape.channels * args.prediction_fields || other.rows != shape.rows ||
                    other.cols != shape.cols) {
                    throw ArgumentError(args.prediction_fields == 1
                                            ? "predicted: shape differs from truth's"
                                            : "predicted: expected " + std::to_string(args.prediction_fields) +
                                                  " fields of the truth's shape");
                }
                if (element_kind(*prediction) != element_kind(*truth)) {
                    throw ArgumentError("predicted: dtype differs from truth's");
                }
            }
            if (!args.weights.is_none()) {
                py::buffer w = args.weights.cast<py::buffer>();
                weights = contiguous_span<const double>(w, "weights", false);
                // Per-row weights are repeated along the row when the group's form is per point, which only
                // the allreduce tells: the room is taken now (address space only until it is written).
                if (args.weights_form == WeightsForm::per_row && shape.cols > 1) {
                    expanded.reserve(weights.size() * static_cast<std::size_t>(shape.cols));
                }
            }
            if (!args.region.is_none()) {
                py::buffer r = args.region.cast<py::buffer>();
                region = contiguous_span<const double>(r, "regional_weights", false);
            }
            with_floating_type(*truth, "data", [&](auto zero) {  // C order, as read after the allreduce
                using T = decltype(zero);
                (void)contiguous_span<const T>(*truth, "data", false);
                if (prediction) {
                    (void)contiguous_span<const T>(*prediction, "predicted", false);
                }
            });
        });
        args.problem = failure.message;
    }
    WeightsForm form = args.weights_form;
    const ShardedGrid* grid = nullptr;
    {
        py::gil_scoped_release release;
        grid = &self.grid_of_shards(args.problem, {shape.rows, shape.cols, args.signature}, declared, form);
    }
    // Every rank's arguments passed the checks above; the library's metric checks the rest collectively.
    // Weights come as (rows,) for per_row or either, (rows, cols) for per_point; a rank whose weights are
    // (rows,) while the group's are per point repeats them along its row, in the room taken above (a single
    // column: the same values; an empty shard: none).
    const bool per_point = form == WeightsForm::per_point;
    if (per_point && !weights.empty() && static_cast<std::int64_t>(weights.size()) != shape.rows * shape.cols) {
        for (const double a : weights) {
            expanded.insert(expanded.end(), static_cast<std::size_t>(shape.cols), a);
        }
        weights = expanded;
    }
    std::vector<double> result;
    with_floating_type(*truth, "data", [&](auto zero) {
        using T = decltype(zero);
        const FieldShard<T> t{contiguous_span<const T>(*truth, "data", false), shape.channels};
        FieldShard<T> p{};
        if (prediction) {
            p = {contiguous_span<const T>(*prediction, "predicted", false), shape.channels * args.prediction_fields};
        }
        py::gil_scoped_release release;
        result = compute(*grid, t, p, Weights{weights, per_point}, region);
    });
    return result;
}

/// metric_values into `out` (float64, as many values as the metric returns).
template <class Compute>
void run_metric(PythonMesh& self, ShardArguments args, py::buffer out, Compute&& compute) {
    const std::vector<double> result = metric_values(self, std::move(args), std::forward<Compute>(compute));
    const std::span<double> to = contiguous_span<double>(out, "out", true);
    if (to.size() != result.size()) {
        throw ArgumentError("out: room for " + std::to_string(to.size()) + " values, the metric gave " +
                            std::to_string(result.size()));
    }
    std::memcpy(to.data(), result.data(), result.size() * sizeof(double));
}

/// The weights' form as the Python layer gives it (0 per point, 1 per row, 2 either).
WeightsForm form_of(int code) {
    if (code < 0 || code > 2) {
        throw ArgumentError("weights form must be 0, 1 or 2, got " + std::to_string(code));
    }
    return static_cast<WeightsForm>(code);
}

ShardArguments one_field(std::string problem, std::int64_t signature, py::object data, py::object weights, int form) {
    return {std::move(problem), signature,     std::move(data), py::none(),
            std::move(weights), form_of(form), py::none(),      py::none()};
}

ShardArguments two_fields(std::string problem, std::int64_t signature, py::object truth, py::object predicted,
                          py::object weights, int form, py::object img_shape = py::none()) {
    return {std::move(problem), signature,     std::move(truth), std::move(predicted),
            std::move(weights), form_of(form), py::none(),       std::move(img_shape)};
}

/// Binds a one-field, weighted, per-channel metric `name` computed by `metric(grid, x, weights, summation)`.
template <class Metric>
void bind_weighted(py::module_& m, const char* name, Metric metric, const char* doc) {
    m.def(
        name,
        [metric](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data,
                 py::object weights, int form, py::buffer out) {
            run_metric(self, one_field(problem, signature, std::move(data), std::move(weights), form), std::move(out),
                       [&](const ShardedGrid& grid, auto x, auto, Weights a, auto) {
                           return metric(grid, x, a, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("weights"), py::arg("form"),
        py::arg("out"), doc);
}

/// Binds a two-field, weighted, per-channel metric computed by `metric(grid, truth, prediction, weights, summation)`.
template <class Metric>
void bind_paired(py::module_& m, const char* name, Metric metric, const char* doc) {
    m.def(
        name,
        [metric](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth,
                 py::object predicted, py::object weights, int form, py::buffer out) {
            run_metric(self,
                       two_fields(problem, signature, std::move(truth), std::move(predicted), std::move(weights), form),
                       std::move(out), [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                           return metric(grid, t, p, a, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"), py::arg("predicted"),
        py::arg("weights"), py::arg("form"), py::arg("out"), doc);
}

/// Binds a time-mean metric computed by `metric(grid, truth, prediction, ntime, weights, summation)` on fields
/// laid out (ntime * channels, rows, cols), time slowest.
template <class Metric>
void bind_time_mean(py::module_& m, const char* name, Metric metric, const char* doc) {
    m.def(
        name,
        [metric](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth,
                 py::object predicted, py::object weights, int form, std::int64_t ntime, py::buffer out) {
            run_metric(self,
                       two_fields(problem, signature, std::move(truth), std::move(predicted), std::move(weights), form),
                       std::move(out), [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                           return metric(grid, t, p, ntime, a, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"), py::arg("predicted"),
        py::arg("weights"), py::arg("form"), py::arg("ntime"), py::arg("out"), doc);
}

}  // namespace

void bind_metrics(py::module_& m) {
    constexpr const char* spatial_doc = "Collective over `spatial`; every spatial rank gets one value per channel.";
    bind_weighted(
        m, "weighted_sum", [](auto&&... a) { return weighted_sum(a...); }, spatial_doc);
    bind_weighted(
        m, "weighted_mean", [](auto&&... a) { return weighted_mean(a...); }, spatial_doc);
    bind_weighted(
        m, "weighted_nanmean", [](auto&&... a) { return weighted_nanmean(a...); }, spatial_doc);
    bind_weighted(
        m, "weighted_std", [](auto&&... a) { return weighted_std(a...); }, spatial_doc);
    bind_weighted(
        m, "weighted_mean_gradient_magnitude",
        [](const ShardedGrid& grid, auto x, Weights a, Summation s) {
            return weighted_mean_gradient_magnitude(grid, x, a, GradientOptions{}, s);
        },
        "Collective over `spatial` (one halo exchange); one value per channel.");
    bind_paired(
        m, "bias", [](auto&&... a) { return bias(a...); }, spatial_doc);
    bind_paired(
        m, "rmse", [](auto&&... a) { return rmse(a...); }, spatial_doc);
    bind_time_mean(
        m, "rmse_of_time_mean", [](auto&&... a) { return rmse_of_time_mean(a...); }, spatial_doc);
    bind_time_mean(
        m, "time_and_global_mean_bias", [](auto&&... a) { return time_and_global_mean_bias(a...); }, spatial_doc);

    m.def(
        "gradient_magnitude_means",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth, py::object predicted,
           py::object weights, int form, py::object img_shape, py::buffer out) {
            const bool paired = !predicted.is_none();
            run_metric(self,
                       two_fields(problem, signature, std::move(truth), std::move(predicted), std::move(weights), form,
                                  std::move(img_shape)),
                       std::move(out), [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                           GradientMagnitudeMeans means = gradient_magnitude_means(grid, t, paired ? &p : nullptr, a,
                                                                                   GradientOptions{}, self.summation());
                           means.mean.insert(means.mean.end(), means.weight.begin(), means.weight.end());
                           return means.mean;
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"), py::arg("predicted"),
        py::arg("weights"), py::arg("form"), py::arg("img_shape"), py::arg("out"),
        "Collective over `spatial`: one halo exchange of the fields (the truth, and the prediction unless None), one "
        "allreduce; into `out` the (fields, channels) means, then the (fields, channels) weights of their points.");
    m.def(
        "percent_difference",
        [](const std::vector<double>& truth, const std::vector<double>& prediction) {
            if (truth.size() != prediction.size()) {
                throw ArgumentError("prediction has " + std::to_string(prediction.size()) + " values for truth's " +
                                    std::to_string(truth.size()));
            }
            std::vector<double> result(truth.size());
            for (std::size_t k = 0; k < truth.size(); ++k) {
                result[k] = percent_difference(truth[k], prediction[k]);
            }
            return result;
        },
        py::arg("truth"), py::arg("prediction"), "`100 (prediction - truth) / truth`, elementwise. No MPI calls.");
    m.def(
        "gradient_magnitude_percent_diff",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth, py::object predicted,
           py::object weights, int form, py::object img_shape, py::buffer out) {
            run_metric(self,
                       two_fields(problem, signature, std::move(truth), std::move(predicted), std::move(weights), form,
                                  std::move(img_shape)),
                       std::move(out), [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                           return gradient_magnitude_percent_diff(grid, t, p, a, GradientOptions{}, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"), py::arg("predicted"),
        py::arg("weights"), py::arg("form"), py::arg("img_shape"), py::arg("out"),
        "Collective over `spatial`: one halo exchange of both fields, one allreduce; one value per channel.");
    m.def(
        "weighted_statistics",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, const std::string& statistic,
           py::object data, py::object predicted, py::object weights, int form, py::object region, py::buffer out) {
            const std::pair<const char*, WeightedStatistic> statistics[] = {
                {"sum", WeightedStatistic::sum},         {"mean", WeightedStatistic::mean},
                {"nanmean", WeightedStatistic::nanmean}, {"std", WeightedStatistic::std},
                {"bias", WeightedStatistic::bias},       {"rmse", WeightedStatistic::rmse}};
            const auto* chosen = std::find_if(std::begin(statistics), std::end(statistics),
                                              [&](const auto& s) { return statistic == s.first; });
            if (chosen == std::end(statistics)) {
                throw ArgumentError("weighted_statistics: no statistic '" + statistic + "'");
            }
            const bool paired = !predicted.is_none();
            const bool regional = !region.is_none();
            ShardArguments args =
                two_fields(problem, signature, std::move(data), std::move(predicted), std::move(weights), form);
            args.region = std::move(region);
            run_metric(self, std::move(args), std::move(out),
                       [&](const ShardedGrid& grid, auto x, auto p, Weights a, std::span<const double> r) {
                           WeightedStatistics s =
                               weighted_statistics(grid, chosen->second, x, paired ? &p : nullptr, a, self.summation(),
                                                   regional ? std::optional(r) : std::nullopt);
                           s.values.insert(s.values.end(), s.weights.begin(), s.weights.end());
                           s.values.insert(s.values.end(), s.means.begin(), s.means.end());
                           return s.values;
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("statistic"), py::arg("data"),
        py::arg("predicted"), py::arg("weights"), py::arg("form"), py::arg("regional_weights"), py::arg("out"),
        "A weighted statistic (sum, mean, nanmean, std; bias and rmse of `predicted` against `data`) with what its "
        "gradient needs (weighted_statistics, metrics/metrics.hpp): into `out` the values, then the weights of the "
        "points counted, then for std the means, one each per channel. Collective over `spatial`: one allreduce.");
    m.def(
        "regional_weighted_mean",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data, py::object weights,
           int form, py::object region, py::buffer out) {
            ShardArguments args = one_field(problem, signature, std::move(data), std::move(weights), form);
            args.region = std::move(region);
            run_metric(self, std::move(args), std::move(out),
                       [&](const ShardedGrid& grid, auto x, auto, Weights a, std::span<const double> r) {
                           return regional_weighted_mean(grid, x, a, r, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("weights"), py::arg("form"),
        py::arg("regional_weights"), py::arg("out"), spatial_doc);
    m.def(
        "ensemble_scores",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth, py::object members,
           std::int64_t count, py::object weights, int form, const std::string& score, bool with_sums, py::buffer out) {
            // The one score asked for, and only the statistics it needs (the CRPS' pair sum only for a CRPS).
            using Member = std::vector<double> EnsembleScores::*;
            const std::tuple<const char*, EnsembleSelection, Member> scores[] = {
                {"ensemble_mean_rmse", {true, false, false, false}, &EnsembleScores::ensemble_mean_rmse},
                {"spread", {false, true, false, false}, &EnsembleScores::spread},
                {"spread_skill_ratio", {true, true, false, false}, &EnsembleScores::spread_skill_ratio},
                {"crps", {false, false, true, false}, &EnsembleScores::crps},
                {"fair_crps", {false, false, false, true}, &EnsembleScores::fair_crps}};
            const auto* chosen = std::find_if(std::begin(scores), std::end(scores),
                                              [&](const auto& s) { return score == std::get<0>(s); });
            if (chosen == std::end(scores)) {
                throw ArgumentError("ensemble_scores: no ensemble score '" + score + "'");
            }
            ShardArguments args =
                two_fields(problem, signature, std::move(truth), std::move(members), std::move(weights), form);
            args.prediction_fields = std::max<std::int64_t>(count, 1);
            run_metric(
                self, std::move(args), std::move(out), [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                    using T = typename decltype(t.values)::element_type;
                    EnsembleScores e =
                        ensemble_scores(grid, t, EnsembleShard<std::remove_const_t<T>>{p.values, count, t.channels}, a,
                                        self.summation(), std::get<1>(*chosen));
                    std::vector<double> values = std::move(e.*std::get<2>(*chosen));
                    if (with_sums) {  // what the score's gradient needs, from the same call
                        values.insert(values.end(), e.weight.begin(), e.weight.end());
                        if (score == "spread_skill_ratio") {
                            values.insert(values.end(), e.spread.begin(), e.spread.end());
                            values.insert(values.end(), e.ensemble_mean_rmse.begin(), e.ensemble_mean_rmse.end());
                        }
                    }
                    return values;
                });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"), py::arg("members"),
        py::arg("count"), py::arg("weights"), py::arg("form"), py::arg("score"), py::arg("with_sums"), py::arg("out"),
        "Collective over `spatial`: members (count * channels, rows, cols), member slowest; out gets `score` "
        "(ensemble_mean_rmse, spread, spread_skill_ratio, crps or fair_crps), one value per channel, formed "
        "alone; `with_sums`: then the weight of the points counted per channel and, for the spread-skill ratio, the "
        "spread and the ensemble mean's RMSE (EnsembleScores).");
    m.def(
        "anomaly_correlation",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object truth,
           py::object prediction_and_climatology, py::object weights, int form, py::buffer out) {
            ShardArguments args = two_fields(problem, signature, std::move(truth),
                                             std::move(prediction_and_climatology), std::move(weights), form);
            args.prediction_fields = 2;
            run_metric(self, std::move(args), std::move(out),
                       [&](const ShardedGrid& grid, auto t, auto p, Weights a, auto) {
                           using Shard = decltype(t);
                           const std::size_t half = t.values.size();
                           return anomaly_correlation(grid, t, Shard{p.values.first(half), t.channels},
                                                      Shard{p.values.subspan(half), t.channels}, a, self.summation());
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("truth"),
        py::arg("prediction_and_climatology"), py::arg("weights"), py::arg("form"), py::arg("out"),
        "Collective over `spatial`: the prediction then the climatology stacked, (2 * channels, rows, cols); one "
        "value per channel.");
    m.def(
        "zonal_mean",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data, bool with_counts,
           py::buffer out) {
            run_metric(self, one_field(problem, signature, std::move(data), py::none(), 1), std::move(out),
                       [&](const ShardedGrid& grid, auto x, auto, Weights, auto) {
                           if (!with_counts) {
                               return zonal_mean(grid, x, self.summation());
                           }
                           ZonalMeanAndCount z = zonal_mean_and_count(grid, x, self.summation());
                           z.means.insert(z.means.end(), z.counts.begin(), z.counts.end());
                           return z.means;
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("with_counts"),
        py::arg("out"),
        "Collective over `lon`; (channels, rows) on every rank of the lon group, then with `with_counts` the valid "
        "points of each (zonal_mean_and_count).");
    m.def(
        "spherical_power_spectrum",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data,
           const std::string& grid_name, const std::string& truncation, std::int64_t lmax, std::int64_t mmax,
           const std::string& convention, const std::string& mode) {
            // The names were parsed in Python's checks; a rank with a problem takes the defaults and raises
            // it after the agreement, as every rank does.
            SpectrumSpec spec;
            if (problem.empty()) {
                spec.grid = parse_sphere_grid(grid_name);
                spec.truncation = parse_spectrum_truncation(truncation);
                spec.convention = parse_spectrum_convention(convention);
                spec.mode = parse_spectrum_mode(mode);
                spec.lmax = lmax;
                spec.mmax = mmax;
            }
            const std::vector<double> values =
                metric_values(self, one_field(problem, signature, std::move(data), py::none(), 1),
                              [&](const ShardedGrid& grid, auto x, auto, Weights, auto) {
                                  return self.spectrum_plan(grid, x.channels, spec)(x);  // kept in the mesh
                              });
            // Bytes, not a py::array: Debian's pybind11 predates numpy 2's descriptor layout (its strides would be
            // wrong under ACE's numpy 2), and bytes read alike under both.
            return py::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("grid"),
        py::arg("truncation"), py::arg("lmax"), py::arg("mmax"), py::arg("convention"), py::arg("mode"),
        "Collective over `spatial`; (channels * L,) on every rank of the spatial group. The plan is kept in the mesh.");
    m.def(
        "zonal_power_spectrum",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data,
           const std::string& weighting, py::object lat) {
            const ZonalWeighting w = problem.empty() ? parse_zonal_weighting(weighting) : ZonalWeighting::none;
            std::vector<double> lat_deg;
            if (!lat.is_none()) {
                lat_deg = lat.cast<std::vector<double>>();
            }
            const std::vector<double> values =
                metric_values(self, one_field(problem, signature, std::move(data), py::none(), 1),
                              [&](const ShardedGrid& grid, auto x, auto, Weights, auto) {
                                  return zonal_power_spectrum(grid, x, w, lat_deg);
                              });
            // Bytes, not a py::array: Debian's pybind11 predates numpy 2's descriptor layout (its strides would be
            // wrong under ACE's numpy 2), and bytes read alike under both.
            return py::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("weighting"),
        py::arg("lat"), "Collective over `lon`; (channels * rows * (nlon / 2 + 1),) for this rank's rows.");
    m.def(
        "latitude_offset_from_nodes_deg",
        [](const std::string& grid, const std::vector<double>& lat_deg) {
            return latitude_offset_from_nodes_deg(parse_sphere_grid(grid), lat_deg);
        },
        py::arg("grid"), py::arg("lat_deg"),
        "How far (degrees) the latitudes lie from the nodes of the spectrum's grid (metrics/spectrum.hpp). No MPI.");
    m.def(
        "smooth_flood_fill",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data, int num_steps,
           int blur_kernel_size, double blur_sigma) {
            const FloodFillOptions options{num_steps, blur_kernel_size, blur_sigma};
            const std::vector<double> values =
                metric_values(self, one_field(problem, signature, std::move(data), py::none(), 1),
                              [&](const ShardedGrid& grid, auto x, auto, Weights, auto) {
                                  return self.flood_fill_plan(grid, options)(x);  // kept in the mesh
                              });
            // Bytes, as the spectra (see spherical_power_spectrum).
            return py::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("num_steps"),
        py::arg("blur_kernel_size"), py::arg("blur_sigma"),
        "Collective over `spatial`; this rank's filled values, (channels * rows * cols,) in double. The plan is kept "
        "in "
        "the mesh.");
    m.def(
        "gradient_magnitude_backward",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data, py::object upstream,
           py::object out, bool periodic_lon) {
            metric_values(self, two_fields(problem, signature, std::move(data), std::move(upstream), py::none(), 1),
                          [&](const ShardedGrid& grid, auto x, auto u, Weights, auto) {
                              using T = std::remove_const_t<typename decltype(x.values)::element_type>;
                              std::span<T> gradient;  // left empty if `out` is not x's type: the
                              try {                   // library's argument agreement then raises on every rank
                                  const py::gil_scoped_acquire acquire;
                                  py::buffer buffer = out.cast<py::buffer>();
                                  gradient = contiguous_span<T>(buffer, "out", true);
                              } catch (const std::exception&) {
                                  gradient = {};
                              }
                              gradient_magnitude_backward(grid, x, u.values, gradient,
                                                          GradientOptions{.periodic_lon = periodic_lon});
                              return std::vector<double>{};
                          });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("upstream"), py::arg("out"),
        py::arg("periodic_lon"),
        "Collective over `spatial` (two halo exchanges): into `out` (the data's type and size), the gradient of "
        "sum(upstream * |grad data|) with respect to this rank's data.");
    m.def(
        "gradient_magnitude",
        [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object data, py::buffer out) {
            run_metric(self, one_field(problem, signature, std::move(data), py::none(), 1), std::move(out),
                       [&](const ShardedGrid& grid, auto x, auto, Weights, auto) {
                           return gradient_magnitude(grid, x, GradientOptions{});
                       });
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("out"),
        "Collective over `spatial` (one halo exchange); this rank's magnitudes, (channels, rows, cols).");
}

}  // namespace gridshard::python
