#pragma once
/// @file
/// ACE's monthly reference data of its annual metric (AnnualMetricConfig.reference_data, or the inference config's
/// monthly_reference_data): per variable its fields over (sample, time, lat, lon), `counts` (sample, time) and
/// `valid_time` (sample, time, CF units and calendar). This rank's box of one variable, for
/// Aggregator::set_annual_reference. No MPI calls.
///
/// @code
///   #include "gridshard/io/annual_reference.hpp"
///   void reference_of(const gridshard::Box& box) {
///       std::optional<gridshard::io::AnnualReference> ref =
///           gridshard::io::read_annual_reference("reference.nc", "TS", box, 180, 360);  // none: the file lacks TS
///   }
/// @endcode

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"

namespace gridshard::io {

/// One variable's reference data: this rank's box of its fields (samples, times, rows, cols; slowest first), their
/// counts per (sample, time) and per time the first sample's calendar year (by which ACE groups every sample).
struct AnnualReference {
    std::int64_t samples = 0;
    std::int64_t times = 0;
    std::vector<double> values;
    std::vector<double> counts;
    std::vector<std::int64_t> years;
};

/// Reads `box` of variable `name` of the reference data at `path`, whose grid must be `nlat` x `nlon`; none when the
/// file has no such variable (ACE gives that variable no R²). Throws ArgumentError naming `annual_reference_data`
/// for a file without `counts` or `valid_time` over (sample, time), another grid, a variable not over (sample, time,
/// lat, lon), or samples with other time axes (ACE's "All time axes must be the same"); NetcdfError when netCDF fails.
[[nodiscard]] std::optional<AnnualReference> read_annual_reference(const std::string& path, const std::string& name,
                                                                   const Box& box, std::int64_t nlat,
                                                                   std::int64_t nlon);

}  // namespace gridshard::io
