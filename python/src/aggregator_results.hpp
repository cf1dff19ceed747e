#pragma once
// The aggregator's results as dicts of bytes (aggregator_results.cpp), for aggregator_bindings.cpp.

#include <pybind11/pybind11.h>

#include <vector>

#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard::python {

/// Values as the bytes of float64s: the Python layer makes the arrays (np.frombuffer), so no numpy C API is
/// used here (pybind11's array_t misreads the dtypes of numpy 2, which ACE's environment brings).
pybind11::bytes packed(const std::vector<double>& values);

/// {key: (bytes, width)} of per-lead series.
pybind11::dict series_dict(const std::vector<ScoreSeries>& series);

/// A map's bytes, or None where this rank holds none.
pybind11::object map_bytes(const std::vector<double>& map);

/// One channel's scores as the dict finish() gives: its regions' per-lead series, time means and scores at lead
/// times, its profiles, spectra and maps, its calendar families' results, and whether its target was missing
/// everywhere.
pybind11::dict channel_dict(const ChannelScores& channel);

}  // namespace gridshard::python
