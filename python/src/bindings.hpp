#pragma once
// The parts of the compiled module, one per concern.

#include <pybind11/pybind11.h>

namespace gridshard::python {

/// The metrics of metrics/metrics.hpp on buffers (metric_bindings.cpp).
void bind_metrics(pybind11::module_& m);

/// The evaluation layer's aggregator and score registry (aggregator_bindings.cpp).
void bind_aggregator(pybind11::module_& m);

/// The padded halo exchange and its adjoint (halo_bindings.cpp).
void bind_halo(pybind11::module_& m);

/// The atomic writer of the Python layer's files (output_bindings.cpp).
void bind_outputs(pybind11::module_& m);

/// A reference index's series over each sample's run (index_bindings.cpp).
void bind_reference_index(pybind11::module_& m);

}  // namespace gridshard::python
