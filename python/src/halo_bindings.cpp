// The padded halo exchange on buffers (comm/padded_halo_exchange.hpp) and its adjoint, for
// Distributed.halo_exchange and its gradient: a shard `(channels, rows, cols)` padded by `width` cells on every side,
// corners included, and back. Values move unchanged in their own type.

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "buffers.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "python_mesh.hpp"

namespace gridshard::python {
namespace {

/// One exchange or its adjoint: `data` is the shard (forward) or the padded shard's gradient (adjoint, whose box is
/// `width` cells smaller on every side). Collective over `spatial`: the grid's agreement (which raises `problem` on
/// every rank, and agrees the spec), the plan's set-up the first time the (grid, width, periodic_lon, pole) is met
/// (kept in the mesh), the exchange's messages. Returns the padded shard, or the shard's gradient, as bytes of the
/// data's type.
py::bytes exchange(PythonMesh& self, std::string problem, std::int64_t signature, py::object data, int width,
                   bool periodic_lon, const std::string& pole, bool adjoint) {
    std::optional<py::buffer> buffer;
    ShardShape in;
    PaddedHaloSpec spec{width, periodic_lon, PoleRule::zero};
    if (problem.empty()) {
        problem =
            attempt([&] {
                spec.pole = parse_pole_rule(pole);
                buffer = data.cast<py::buffer>();
                in = shape_of(*buffer, adjoint ? "grad" : "data");
                if (element_kind(*buffer) != ElementKind::float32 && element_kind(*buffer) != ElementKind::float64) {
                    throw ArgumentError("data: dtype must be float32 or float64");
                }
                if (adjoint && (in.rows < 2 * width || in.cols < 2 * width)) {
                    throw ArgumentError("grad: " + std::to_string(in.rows) + " x " + std::to_string(in.cols) +
                                        " is no shard padded by width=" + std::to_string(width));
                }
            }).message;
    }
    const std::int64_t rows = adjoint ? in.rows - 2 * width : in.rows;
    const std::int64_t cols = adjoint ? in.cols - 2 * width : in.cols;
    WeightsForm form = WeightsForm::per_row;
    std::vector<char> out;
    {
        py::gil_scoped_release release;
        // The spec is agreed with the grid, so every rank finds the plan in the cache, or makes it, alike.
        const ShardExtent extent{rows,
                                 cols,
                                 signature,
                                 {spec.width, spec.periodic_lon ? 1 : 0, static_cast<std::int64_t>(spec.pole)},
                                 "width, periodic_lon or pole"};
        const ShardedGrid& grid = self.grid_of_shards(problem, extent, std::nullopt, form);
        const PaddedHaloExchange& plan = self.halo_plan(grid, spec);
        py::gil_scoped_acquire acquire;
        with_floating_type(*buffer, "data", [&](auto zero) {
            using T = decltype(zero);
            const std::span<const T> values = contiguous_span<const T>(*buffer, "data", false);
            const std::int64_t shard = in.channels * rows * cols;
            const std::int64_t padded = in.channels * plan.padded_rows() * plan.padded_cols();
            out.resize(static_cast<std::size_t>((adjoint ? shard : padded)) * sizeof(T));
            const std::span<T> to(reinterpret_cast<T*>(out.data()), out.size() / sizeof(T));
            py::gil_scoped_release again;
            // The arguments are agreed already: the grid, the spec and the channels (in the signature); the sizes
            // follow from them.
            if (adjoint) {
                plan.adjoint_agreed<T>(values, in.channels, to);
            } else {
                plan.exchange_agreed<T>(values, in.channels, to);
            }
        });
    }
    // Bytes, not a py::array, as the spectra's (Debian's pybind11 and numpy 2's descriptors).
    return {out.data(), out.size()};
}

}  // namespace

void bind_halo(py::module_& m) {
    m.def(
        "padded_halo",
        [](PythonMesh& self, std::string problem, std::int64_t signature, py::object data, int width, bool periodic_lon,
           const std::string& pole) {
            return exchange(self, std::move(problem), signature, std::move(data), width, periodic_lon, pole, false);
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("data"), py::arg("width"),
        py::arg("periodic_lon"), py::arg("pole"),
        "Collective over `spatial`: the shard (channels, rows, cols) padded by `width` on every side, as bytes of its "
        "type, (channels, rows + 2 width, cols + 2 width).");
    m.def(
        "padded_halo_adjoint",
        [](PythonMesh& self, std::string problem, std::int64_t signature, py::object grad, int width, bool periodic_lon,
           const std::string& pole) {
            return exchange(self, std::move(problem), signature, std::move(grad), width, periodic_lon, pole, true);
        },
        py::arg("mesh"), py::arg("problem"), py::arg("signature"), py::arg("grad"), py::arg("width"),
        py::arg("periodic_lon"), py::arg("pole"),
        "Collective over `spatial`: the adjoint of padded_halo, the padded gradient (channels, rows + 2 width, cols + "
        "2 width) summed back onto the shard (channels, rows, cols), as bytes of its type.");
}

}  // namespace gridshard::python
