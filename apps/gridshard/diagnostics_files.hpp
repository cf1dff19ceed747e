#pragma once
// What the writers of `gridshard eval`'s files share (report.cpp), and the files of ACE's climate families that are
// not maps (climate_diagnostics.cpp): each a Dataset from what the library's evaluation gives back, no MPI calls.

#include <string>

#include "gridshard/evaluation/evaluate.hpp"
#include "gridshard/io/dataset_writer.hpp"

namespace gridshard::cli {

/// A channel's name as a netCDF name: "ta[2]" is "ta_2".
[[nodiscard]] std::string netcdf_name(const std::string& name);

/// Which rows the time means count, for the table and the files' titles: "rows 1 to 4 of 5 (lead 0, the initial
/// condition, left out)".
[[nodiscard]] std::string time_mean_rows_text(const EvaluationResult& result);

/// A file's global attributes: its title and gridshard's version.
[[nodiscard]] io::Attributes global_attributes(const std::string& title);

/// ACE's annual_diagnostics.nc (fme's PairedGlobalMeanAnnualAggregator.get_dataset).
[[nodiscard]] io::Dataset annual_diagnostics(const EvaluationResult& result);

/// ACE's enso_index_diagnostics.nc (fme's PairedRegionalIndexAggregator.get_dataset).
[[nodiscard]] io::Dataset enso_index_diagnostics(const EvaluationResult& result);

/// ACE's ipo_index_diagnostics.nc (fme's PairedIPOIndexAggregator.get_dataset): the unfiltered tripole index.
[[nodiscard]] io::Dataset ipo_index_diagnostics(const EvaluationResult& result);

/// ACE's histogram_diagnostics.nc (fme's ComparedDynamicHistograms.get_dataset).
[[nodiscard]] io::Dataset histogram_diagnostics(const EvaluationResult& result);

}  // namespace gridshard::cli
