#pragma once
// Where `gridshard eval` gets its fields: the built-in analytic case or a pair of netCDF files. A source
// describes the grid and the variables, and reads one rank's box of one time step. No MPI calls.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/netcdf.hpp"

namespace gridshard::cli {

/// The grid every variable of a source lies on, in the source's own index order (a netCDF file's, or
/// the built-in case's pole-to-pole one).
using SourceGrid = io::GridInfo;

/// A variable to score: `channels` planes per time step (levels; 1 for a 2-D field).
struct SourceVariable {
    std::string name;
    std::int64_t channels = 1;
};

class FieldSource {
  public:
    virtual ~FieldSource() = default;
    [[nodiscard]] virtual const SourceGrid& grid() const = 0;
    [[nodiscard]] virtual std::vector<SourceVariable> variables() const = 0;
    /// Reads `box` of time step `step` of `variable` from truth and prediction, (channels, rows, cols)
    /// each, missing values as NaN.
    virtual void read(const SourceVariable& variable, std::int64_t step, const Box& box, std::vector<float>& truth,
                      std::vector<float>& prediction) const = 0;
};

/// The built-in analytic case: a Rossby-Haurwitz wave (Williamson et al. 1992, case 6) height field,
/// a temperature with finer structure and a sea-surface temperature with a land mask of NaN, on a
/// regular `nlat x nlon` grid pole to pole over `ntime` six-hourly steps; the prediction is the truth
/// with a slightly wrong phase speed, a bias and deterministic noise. Every value depends only on its
/// global indices, so any rank generates its own box.
[[nodiscard]] std::unique_ptr<FieldSource> make_builtin_source(std::int64_t nlat, std::int64_t nlon,
                                                               std::int64_t ntime);

/// The variables of a truth and a prediction file (all with a lat and a lon dim, or `names`), checked
/// to share grid and shapes. Throws ArgumentError naming the file and the problem.
[[nodiscard]] std::unique_ptr<FieldSource> make_netcdf_source(const std::string& truth_path,
                                                              const std::string& prediction_path,
                                                              const std::vector<std::string>& names);

}  // namespace gridshard::cli
