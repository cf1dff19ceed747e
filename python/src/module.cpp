// gridshard._gridshard: the compiled half of the Python package. It binds the library's mesh, collectives and
// metrics on C-contiguous buffers; the pure-Python package (python/gridshard) turns numpy arrays and torch
// tensors into those buffers and shapes the results. No numerics live here: every number comes from the
// library. Every call that communicates releases the GIL.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "buffers.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/split.hpp"
#include "gridshard/metrics/quantile.hpp"
#include "python_mesh.hpp"

namespace gridshard::python {
namespace {

const Communicator& group_of(const ProcessMesh& mesh, const std::string& group) {
    if (group == "world") {
        return mesh.world();
    }
    if (group == "data") {
        return mesh.data();
    }
    if (group == "spatial") {
        return mesh.spatial();
    }
    if (group == "lat") {
        return mesh.lat();
    }
    if (group == "lon") {
        return mesh.lon();
    }
    if (group == "self") {
        static const Communicator self = Communicator::borrow(MPI_COMM_SELF);
        return self;
    }
    throw ArgumentError("group must be world, data, spatial, lat, lon or self, not '" + group + "'");
}

/// Runs the in-place collective `collective(span)` on a writable buffer of any element type the collectives
/// take, with the GIL released.
template <class Collective>
void in_place(py::buffer& values, Collective&& collective) {
    with_reducible_type(values, "tensor", [&](auto zero) {
        using T = decltype(zero);
        const std::span<T> span = contiguous_span<T>(values, "tensor", true);
        py::gil_scoped_release release;
        collective(span);
    });
}

/// `op` over the data group, in place, for any element type the collectives take.
void reduce_over_data(const PythonMesh& self, const std::string& op, py::buffer values) {
    in_place(values, [&](auto span) {
        using T = typename decltype(span)::value_type;
        if (op == "sum") {
            reduce_sum(self.mesh(), span);
        } else if (op == "exact_sum") {  // integers sum exactly as they are
            if constexpr (std::is_floating_point_v<T>) {
                reduce_sum_exact(self.mesh(), span);
            } else {
                reduce_sum(self.mesh(), span);
            }
        } else if (op == "mean") {
            if constexpr (std::is_floating_point_v<T>) {
                reduce_mean(self.mesh(), span);
            } else {
                throw ArgumentError("reduce_mean: an integer tensor has no mean in its own dtype");
            }
        } else if (op == "min") {
            reduce_min(self.mesh(), span);
        } else if (op == "max") {
            reduce_max(self.mesh(), span);
        } else {
            throw ArgumentError("op must be sum, exact_sum, mean, min or max, not '" + op + "'");
        }
    });
}

template <class T>
void copy_into(const std::vector<T>& from, py::buffer& out, const char* name) {
    const std::span<T> to = contiguous_span<T>(out, name, true);
    if (to.size() != from.size()) {
        throw ArgumentError(std::string(name) + ": room for " + std::to_string(to.size()) + " values, " +
                            std::to_string(from.size()) + " to write");
    }
    std::memcpy(to.data(), from.data(), from.size() * sizeof(T));
}

/// The grid a gather names, agreed over `group` together with the caller's problem and what the shards hold,
/// so a rank that sends another type or layout raises on every rank instead of garbling the message.
/// `signature` (the Python layer's code of the dtype and leading dims) is agreed with it.
const ShardedGrid& grid_for_gather(PythonMesh& self, const Communicator& group, std::string problem,
                                   std::int64_t signature, const py::object& shard,
                                   std::tuple<std::int64_t, std::int64_t> img) {
    if (problem.empty()) {  // what fails reading the shard is this rank's problem, agreed below
        problem = attempt([&] {
                      py::buffer in = shard.cast<py::buffer>();
                      if (element_kind(in) == ElementKind::other) {
                          throw ArgumentError("tensor: dtype must be float32, float64, int32 or int64");
                      }
                  }).message;
    }
    py::gil_scoped_release release;
    return self.grid_named(group, problem, {std::get<0>(img), std::get<1>(img)}, signature);
}

void bind_geometry(py::module_& m) {
    m.def(
        "split_sizes",
        [](std::int64_t n, int parts, const std::string& rule) {
            return split_sizes(n, parts, parse_split_rule(rule));
        },
        py::arg("n"), py::arg("parts"), py::arg("rule"),
        "The sizes of the parts of a dimension of n points split under `rule`. No MPI calls.");
    m.def(
        "local_slices",
        [](const std::vector<std::int64_t>& global_shape, std::tuple<int, int, int> mesh_shape,
           std::tuple<int, int, int> coords, const std::string& rule, std::optional<int> data_dim) {
            const auto [d, h, w] = mesh_shape;
            if (global_shape.size() < 2) {
                throw ArgumentError("tensor_shape must have at least two dims (lat, lon), got " +
                                    std::to_string(global_shape.size()));
            }
            const GridShape grid{global_shape[global_shape.size() - 2], global_shape.back()};
            const Decomposition decomposition(grid, {d, h, w}, parse_split_rule(rule));
            const auto [cd, ci, cj] = coords;
            std::vector<std::pair<std::int64_t, std::int64_t>> result;
            for (const Range& r : decomposition.local_slices(global_shape, {cd, ci, cj}, data_dim)) {
                result.emplace_back(r.begin, r.end);
            }
            return result;
        },
        py::arg("global_shape"), py::arg("mesh_shape"), py::arg("coords"), py::arg("rule"), py::arg("data_dim"),
        "The [begin, end) range of every dim that the rank at `coords` holds. No MPI calls.");
    m.def(
        "cos_lat_weights",
        [](py::buffer lat_deg, std::int64_t nlon, py::buffer out) {
            const auto lats = contiguous_span<const double>(lat_deg, "lats", false);
            const AreaWeights weights = cos_lat_weights(lats, nlon, Range{0, static_cast<std::int64_t>(lats.size())});
            copy_into(weights.values, out, "out");
        },
        py::arg("lat_deg"), py::arg("nlon"), py::arg("out"),
        "cos(latitude) per row, normalised to sum 1 over the lat x nlon grid. No MPI calls.");
    m.def(
        "quantile_weights_problem",
        [](py::buffer weights) {
            return quantile_weights_problem(contiguous_span<const double>(weights, "weights", false));
        },
        py::arg("weights"), "'' when every weight (float64) is finite and >= 0, else the problem. No MPI calls.");
    m.def(
        "quantile_probabilities_problem",
        [](py::buffer probabilities) {
            return quantile_probabilities_problem(contiguous_span<const double>(probabilities, "q", false));
        },
        py::arg("q"), "'' when every probability (float64) lies in [0, 1], else the problem. No MPI calls.");
}

void bind_mesh(py::module_& m) {
    py::class_<PythonMesh>(m, "Mesh", "A data x lat x lon process mesh over a caller's communicator.")
        .def(py::init([](std::int64_t fortran_handle, std::tuple<int, int, int> shape, const std::string& split,
                         const std::string& summation) {
                 const auto [d, h, w] = shape;
                 const SplitRule rule = parse_split_rule(split);
                 const Summation sum = parse_summation(summation);
                 const MPI_Comm parent = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_handle));
                 py::gil_scoped_release release;
                 return std::make_unique<PythonMesh>(parent, MeshShape{d, h, w}, rule, sum);
             }),
             py::arg("fortran_handle"), py::arg("shape"), py::arg("split"), py::arg("summation"),
             "Collective over the communicator whose Fortran handle (mpi4py's `comm.py2f()`) is given.")
        .def_property_readonly("shape",
                               [](const PythonMesh& self) {
                                   const MeshShape& s = self.mesh().shape();
                                   return std::make_tuple(s.data, s.lat, s.lon);
                               })
        .def_property_readonly("coords",
                               [](const PythonMesh& self) {
                                   const MeshCoords& c = self.mesh().coords();
                                   return std::make_tuple(c.data, c.lat, c.lon);
                               })
        .def_property_readonly("world_rank", [](const PythonMesh& self) { return self.mesh().world().rank(); })
        .def_property_readonly(
            "group_handles",
            [](const PythonMesh& self) {
                const auto handle = [](const Communicator& c) {
                    return static_cast<std::int64_t>(MPI_Comm_c2f(c.native()));
                };
                return std::make_tuple(handle(self.mesh().world()), handle(self.mesh().spatial()),
                                       handle(self.mesh().data()));
            },
            "The Fortran handles (mpi4py's `Intracomm.f2py`) of the mesh's own world, spatial and data groups, which "
            "it keeps and frees: the Python side's collectives run on the same groups as the library's. No MPI calls.")
        .def_property_readonly("split", [](const PythonMesh& self) { return std::string(to_string(self.rule())); })
        .def_property_readonly("summation",
                               [](const PythonMesh& self) { return std::string(to_string(self.summation())); })
        .def(
            "barrier",
            [](const PythonMesh& self, const std::string& group) {
                const Communicator& comm = group_of(self.mesh(), group);
                py::gil_scoped_release release;
                comm.barrier();
            },
            py::arg("group") = "world")
        .def(
            "agree",
            [](const PythonMesh& self, const std::string& problem, const std::string& group, std::int64_t signature) {
                const Communicator& comm = group_of(self.mesh(), group);
                py::gil_scoped_release release;
                agree_or_throw(comm, problem_of(problem), {signature}, "the arrays' dtype and shape");
            },
            py::arg("problem"), py::arg("group"), py::arg("signature") = 0,
            "Raises ArgumentError on every rank of `group` when any rank passes a non-empty problem, or when the "
            "ranks' signatures (a code of what their arrays must share) differ. Collective: one allreduce.")
        .def(
            "agree_shards",
            [](PythonMesh& self, const std::string& problem, std::int64_t signature, std::int64_t rows,
               std::int64_t cols, int form, std::optional<std::tuple<std::int64_t, std::int64_t>> img_shape) {
                if (form < 0 || form > 2) {
                    throw ArgumentError("weights form must be 0, 1 or 2, got " + std::to_string(form));
                }
                auto agreed = static_cast<WeightsForm>(form);
                std::optional<GridShape> declared;
                if (img_shape) {
                    declared = GridShape{std::get<0>(*img_shape), std::get<1>(*img_shape)};
                }
                py::gil_scoped_release release;
                const ShardedGrid& grid = self.grid_of_shards(problem, {rows, cols, signature}, declared, agreed);
                return std::make_tuple(static_cast<int>(agreed), grid.grid().nlat, grid.grid().nlon);
            },
            py::arg("problem"), py::arg("signature"), py::arg("rows"), py::arg("cols"), py::arg("form"),
            py::arg("img_shape") = py::none(),
            "The agreement a metric call makes before it reads any value, for a caller that sums on its own (the "
            "device path): `problem` raised on every rank, and shards that do not form a split of one grid (or "
            "not of `img_shape`, when given), or signatures that differ, raise on every rank. Returns the weights' "
            "form every rank takes (0 per point, 1 per row) and the grid's (nlat, nlon). Collective over `spatial`: "
            "one allreduce of int64.")
        .def("reduce", &reduce_over_data, py::arg("op"), py::arg("values"),
             "Elementwise sum, mean, min or max over the data group, in place. Collective over `data`.")
        .def(
            "sample_quantiles",
            [](const PythonMesh& self, const std::string& group, py::buffer values, std::int64_t samples,
               const std::vector<double>& q, const std::string& method, const py::object& weights) {
                const Communicator& comm = group_of(self.mesh(), group);
                const QuantileMethod chosen = parse_quantile_method(method);
                std::optional<py::buffer> weight_buffer;
                std::span<const double> weight_span;
                if (!weights.is_none()) {
                    if (chosen != QuantileMethod::inverted_cdf) {
                        throw ArgumentError("weights: only method 'inverted_cdf' takes weights, got '" + method + "'");
                    }
                    weight_buffer = weights.cast<py::buffer>();
                    weight_span = contiguous_span<const double>(*weight_buffer, "weights", false);
                }
                return with_floating_type(values, "data", [&](auto zero) {
                    using T = decltype(zero);
                    const std::span<const T> span = contiguous_span<const T>(values, "data", false);
                    SampleQuantiles result;
                    {
                        py::gil_scoped_release release;
                        result = weight_buffer
                                     ? sample_weighted_quantiles(comm, span, weight_span, samples,
                                                                 std::span<const double>(q))
                                     : sample_quantiles(comm, span, samples, std::span<const double>(q), chosen);
                    }
                    return py::make_tuple(result.values, result.counts);
                });
            },
            py::arg("group"), py::arg("values"), py::arg("samples"), py::arg("q"), py::arg("method"),
            py::arg("weights") = py::none(),
            "numpy's nanquantile of each of `samples` samples (equal runs of `values` on each rank, spread over "
            "`group`: spatial, lat, lon or self), weighted by `weights` (float64, one per value) when given: the "
            "(len(q), samples) float64 results flattened and each sample's count of values that are not NaN. "
            "Collective over `group`; the caller agrees the arguments first.")
        .def(
            "spatial_reduce_sum",
            [](const PythonMesh& self, py::buffer values) {
                in_place(values, [&](auto span) { spatial_reduce_sum(self.mesh(), span); });
            },
            py::arg("values"), "Elementwise sum over the spatial group, in place. Collective over `spatial`.")
        .def(
            "sum_over_lon",
            [](PythonMesh& self, std::string problem, std::int64_t signature, std::int64_t rows, std::int64_t cols,
               py::object values) {
                std::span<double> span;
                if (problem.empty()) {
                    problem = attempt([&] {
                                  py::buffer b = values.cast<py::buffer>();
                                  span = contiguous_span<double>(b, "upstream", true);
                              }).message;
                }
                py::gil_scoped_release release;
                WeightsForm form = WeightsForm::either;
                (void)self.grid_of_shards(problem, {rows, cols, signature}, std::nullopt, form);
                lon_sum_in_rank_order(self.mesh(), span);
            },
            py::arg("problem"), py::arg("signature"), py::arg("rows"), py::arg("cols"), py::arg("values"),
            "The sum over the lon group of every rank's float64 `values` (per row of its rows x cols shards: the "
            "adjoint of a result replicated over the group, as a zonal mean's), in place, the same bits on every "
            "rank of the group. Collective over `spatial` (the call's agreement: the shards' grid, the signature), "
            "then over `lon`.")
        .def(
            "broadcast_spatial",
            [](const PythonMesh& self, py::buffer values) {
                in_place(values, [&](auto span) { broadcast_spatial(self.mesh(), span); });
            },
            py::arg("values"), "Spatial rank 0's values to every rank of its spatial group, in place. Collective.")
        .def(
            "gather_spatial",
            [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object shard,
               std::tuple<std::int64_t, std::int64_t> img, std::int64_t channels, py::object out) {
                const ShardedGrid& sharded =
                    grid_for_gather(self, self.mesh().spatial(), problem, signature, shard, img);
                py::buffer in = shard.cast<py::buffer>();
                py::buffer to = out.cast<py::buffer>();
                with_reducible_type(in, "tensor", [&](auto zero) {
                    using T = decltype(zero);
                    const auto span = contiguous_span<const T>(in, "tensor", false);
                    std::vector<T> whole;
                    {
                        py::gil_scoped_release release;
                        whole = gather_spatial(self.mesh(), sharded.decomposition(), span, channels);
                    }
                    copy_into(whole, to, "out");
                });
            },
            py::arg("problem"), py::arg("signature"), py::arg("shard"), py::arg("img_shape"), py::arg("channels"),
            py::arg("out"),
            "All-gather of uneven shards (channels, box) into the whole field on every spatial rank. Collective "
            "over `spatial`.")
        .def(
            "gather_global",
            [](PythonMesh& self, const std::string& problem, std::int64_t signature, py::object shard,
               std::tuple<std::int64_t, std::int64_t> img, std::int64_t local_samples, std::int64_t channels,
               py::object out) {
                const ShardedGrid& sharded = grid_for_gather(self, self.mesh().world(), problem, signature, shard, img);
                py::buffer in = shard.cast<py::buffer>();
                with_reducible_type(in, "tensor", [&](auto zero) {
                    using T = decltype(zero);
                    const auto span = contiguous_span<const T>(in, "tensor", false);
                    std::vector<T> whole;
                    {
                        py::gil_scoped_release release;
                        whole = gather_global(self.mesh(), sharded.decomposition(), span, local_samples, channels);
                    }
                    if (!out.is_none()) {
                        py::buffer to = out.cast<py::buffer>();
                        copy_into(whole, to, "out");
                    }
                });
            },
            py::arg("problem"), py::arg("signature"), py::arg("shard"), py::arg("img_shape"), py::arg("local_samples"),
            py::arg("channels"), py::arg("out"),
            "Gathers (local_samples, channels, box) from every rank onto world rank 0. Collective over `world`.");
}

}  // namespace
}  // namespace gridshard::python

PYBIND11_MODULE(_gridshard, m) {
    namespace gp = gridshard::python;
    m.doc() = "gridshard's compiled core: mesh, collectives and metrics on C-contiguous buffers.";
    // ArgumentError is a ValueError and MpiError a RuntimeError, so callers can catch either by the builtin.
    pybind11::register_exception<gridshard::ArgumentError>(m, "ArgumentError", PyExc_ValueError);
    pybind11::register_exception<gridshard::MpiError>(m, "MpiError", PyExc_RuntimeError);
    pybind11::register_exception<gridshard::SystemError>(m, "SystemFailure", PyExc_RuntimeError);
    gp::bind_geometry(m);
    gp::bind_mesh(m);
    gp::bind_metrics(m);
    gp::bind_aggregator(m);
    gp::bind_halo(m);
    gp::bind_outputs(m);
    gp::bind_reference_index(m);
}
