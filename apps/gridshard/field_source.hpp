#pragma once
// Where `gridshard eval` gets its fields: the built-in analytic case or a pair of netCDF files. A source
// describes the grid and the variables, and opens a read plan per variable and box that fills the
// caller's buffers step by step. No MPI calls, unless its files are opened collectively (InputAccess).

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/grid_info.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/parallel_io.hpp"

namespace gridshard::cli {

/// How the netCDF inputs are opened (--io): by each rank on its own, or by every rank of `comm` together
/// (collective, and auto: netCDF-4 files collectively, classic ones independently), when the reads of their
/// plans may be collective over `comm` (io/parallel_io.hpp) and the callers read in rounds: every rank
/// reads, or calls read_none, once per round.
struct InputAccess {
    io::IoMode mode = io::IoMode::independent;
    const Communicator* comm = nullptr;  ///< the ranks that open the files together; unless independent
    /// Opens `path` as `mode` says. Collective over `comm` unless independent.
    [[nodiscard]] io::NetcdfReader open(const std::string& path) const {
        return mode == io::IoMode::independent ? io::NetcdfReader(path) : io::NetcdfReader(path, *comm, mode);
    }
    /// Whether reads may be collective: the callers then read in rounds and agree over `comm`.
    [[nodiscard]] bool collective() const noexcept { return mode != io::IoMode::independent; }
    /// Whether the diagnostics are written collectively (--io collective only: measured, docs/io.md).
    [[nodiscard]] bool writes_collectively() const noexcept { return mode == io::IoMode::collective; }
};

/// The reads of one round, made in order. In a collective round (`collective`) a read that throws does not
/// skip the ones after it, which the other ranks make too: finish() rethrows the first failure after the last.
class ReadRound {
  public:
    explicit ReadRound(bool collective) : collective_(collective) {}
    template <class Read>
    void read(Read&& read) {
        try {
            read();
        } catch (...) {
            if (!collective_) {
                throw;
            }
            if (!first_) {
                first_ = std::current_exception();
            }
        }
    }
    void finish() const {
        if (first_) {
            std::rethrow_exception(first_);
        }
    }

  private:
    bool collective_;
    std::exception_ptr first_;
};

/// ReadRound over `reads`, in order.
template <class... Reads>
void read_round(bool collective, Reads&&... reads) {
    ReadRound round(collective);
    (round.read(reads), ...);
    round.finish();
}

/// The grid every variable of a source lies on, in the source's own index order (a netCDF file's, or
/// the built-in case's pole-to-pole one).
using SourceGrid = io::GridInfo;

/// A variable to score: `channels` planes per time step (levels; 1 for a 2-D field), read and scored in
/// `type` (double when either file stores it in double, so nothing is rounded).
struct SourceVariable {
    std::string name;
    std::int64_t channels = 1;
    io::ValueType type = io::ValueType::float32;
};

/// One variable's box of truth and prediction, step by step, into the caller's buffers
/// ((channels, rows, cols) each, missing values as NaN).
class VariableSteps {
  public:
    virtual ~VariableSteps() = default;
    virtual void read(std::int64_t step, std::span<float> truth, std::span<float> prediction) = 0;
    virtual void read(std::int64_t step, std::span<double> truth, std::span<double> prediction) = 0;
    /// A round of collective reads in which this rank reads nothing (InputAccess); nothing otherwise.
    virtual void read_none() {}
};

class FieldSource {
  public:
    virtual ~FieldSource() = default;
    [[nodiscard]] virtual const SourceGrid& grid() const = 0;
    [[nodiscard]] virtual std::vector<SourceVariable> variables() const = 0;
    /// A read plan for `box` of `variable`.
    [[nodiscard]] virtual std::unique_ptr<VariableSteps> open(const SourceVariable& variable, const Box& box) const = 0;
};

/// The built-in analytic case: a Rossby-Haurwitz wave (Williamson et al. 1992, case 6) height field,
/// a temperature with finer structure and a sea-surface temperature with a land mask of NaN, on a
/// regular `nlat x nlon` grid pole to pole over `ntime` six-hourly steps; the prediction is the truth
/// with a slightly wrong phase speed, a bias and deterministic noise. Every value depends only on its
/// global indices, so any rank generates its own box. Float32.
[[nodiscard]] std::unique_ptr<FieldSource> make_builtin_source(std::int64_t nlat, std::int64_t nlon,
                                                               std::int64_t ntime);

/// The variables of a truth and a prediction file (all with a lat and a lon dim, or `names`), checked to
/// share grid, shapes, units (UDUNITS-2: "m/s" is "m s-1") and, unless `allow_time_mismatch`, time
/// coordinates (after unit conversion), opened as `access` says. Throws ArgumentError naming the files and
/// the problem.
[[nodiscard]] std::unique_ptr<FieldSource> make_netcdf_source(const std::string& truth_path,
                                                              const std::string& prediction_path,
                                                              const std::vector<std::string>& names,
                                                              bool allow_time_mismatch, const InputAccess& access);

}  // namespace gridshard::cli
