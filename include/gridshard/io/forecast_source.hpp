#pragma once
/// @file
/// Where an evaluation gets its fields: forecasts from one or more initial conditions, each with one or more
/// ensemble members, over lead times. A pair of fields (a truth and a prediction, step by step) is the forecast
/// of one initial condition and one member whose lead times are its steps. A source describes the grid, the
/// layout and the variables, and opens a read plan per variable and box that fills the caller's buffers for one
/// (initial condition, lead time). The netCDF sources read CF file pairs and ACE's
/// `autoregressive_{predictions,target}.nc` layout and its variants (docs/forecast.md); the built-in sources are
/// analytic. No MPI calls, unless the files are opened collectively (InputAccess).
///
/// @code
///   // The first variable of the built-in pair at step `lead`, this rank's `box` of it.
///   void read_one(const gridshard::Box& box, std::int64_t lead) {
///       const std::unique_ptr<gridshard::io::ForecastSource> source = gridshard::io::make_builtin_pair(181, 360, 4);
///       const std::unique_ptr<gridshard::io::ForecastSteps> steps = source->open(source->variables().front(), box);
///       std::vector<float> truth(static_cast<std::size_t>(box.area()));
///       std::vector<float> prediction(truth.size());
///       steps->read(0, lead, {0, 1}, std::span<float>(truth), std::span<float>(prediction));   // no MPI
///   }
/// @endcode

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

namespace gridshard::io {

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

/// How a forecast's samples are laid out in its files.
struct ForecastLayout {
    std::int64_t initial_conditions = 1;
    std::int64_t members = 1;  ///< ensemble members per initial condition (1: deterministic)
    std::int64_t lead_times = 1;
    /// How the members were found, for the report: "none", "ensemble_size", "init_time" or "dim NAME".
    std::string members_from = "none";
    /// The prediction's dims that number initial conditions and members (empty when absent or folded).
    std::string initial_condition_dim;
    std::string member_dim;
    /// True when the members are consecutive samples of initial_condition_dim, member fastest (ACE).
    bool folded = false;
    /// True when the truth holds one sample per prediction sample (ACE repeats the target per member).
    bool truth_repeated = false;
};

/// The lead-time axis: values and units as the prediction file stores them ("microseconds" in ACE's
/// files), and the initial conditions' times (empty when unknown).
struct LeadTimes {
    std::vector<double> values;
    std::string units;
    std::vector<double> init_times;
    std::string init_time_units;
    std::string calendar;
};

/// The rows of the lead-time axis the time means count (docs/forecast.md): every row at a lead time > 0; the rows
/// at lead 0 (an initial condition stored in the file) only with --include-initial-step, or when no row is at a
/// lead time > 0.
struct TimeMeanRows {
    std::vector<std::int64_t> rows;  ///< the counted rows, in order
    std::int64_t initial_rows = 0;   ///< the rows at lead 0, counted or not
    bool initial_counted = false;    ///< whether the rows at lead 0 count
    bool leads_known = true;         ///< false when no row's lead is known (no lead-time coordinate): all count
};

/// One variable's box, for one initial condition and lead time at a time: the truth (channels, rows,
/// cols) and the members of `members` (their count, channels, rows, cols), missing values as NaN.
class ForecastSteps {
  public:
    virtual ~ForecastSteps() = default;
    virtual void read(std::int64_t initial_condition, std::int64_t lead, Range members, std::span<float> truth,
                      std::span<float> member_values) = 0;
    virtual void read(std::int64_t initial_condition, std::int64_t lead, Range members, std::span<double> truth,
                      std::span<double> member_values) = 0;
    /// A round of collective reads in which this rank reads nothing (InputAccess); nothing otherwise.
    virtual void read_none() {}
};

class ForecastSource {
  public:
    virtual ~ForecastSource() = default;
    [[nodiscard]] virtual const SourceGrid& grid() const = 0;
    [[nodiscard]] virtual const ForecastLayout& layout() const = 0;
    [[nodiscard]] virtual const LeadTimes& lead_times() const = 0;
    [[nodiscard]] virtual std::vector<SourceVariable> variables() const = 0;
    [[nodiscard]] virtual std::unique_ptr<ForecastSteps> open(const SourceVariable& variable, const Box& box) const = 0;
};

/// What the user said about the layout: `--ensemble-dim` and `--ensemble-size` (0: not given).
struct LayoutHints {
    std::string ensemble_dim;
    std::int64_t ensemble_size = 0;
};

/// True when the prediction file's fields have a dim of io::is_ensemble_dim_name (or `hints.ensemble_dim`),
/// or hints are given: the file is a forecast, scored by the forecast evaluation. Opens the file as `access`
/// says. Throws NetcdfError for a file that cannot be read.
[[nodiscard]] bool is_forecast_file(const std::string& prediction_path, const LayoutHints& hints,
                                    const InputAccess& access);

/// The forecast in a truth and a prediction file (layouts in docs/forecast.md), checked to share grid,
/// lead times, initial times, units and shapes, opened as `access` says. Throws ArgumentError naming the
/// files and the problem.
[[nodiscard]] std::unique_ptr<ForecastSource> make_netcdf_forecast(const std::string& truth_path,
                                                                   const std::string& prediction_path,
                                                                   const std::vector<std::string>& names,
                                                                   const LayoutHints& hints, bool allow_time_mismatch,
                                                                   const InputAccess& access);

/// The built-in forecast: the built-in analytic pair (make_builtin_pair) from `initial_conditions`
/// start times a day apart, `lead_times` six-hourly steps each (the first the initial condition, where
/// every member equals the truth), and `members` members whose errors grow with lead time. Float32.
[[nodiscard]] std::unique_ptr<ForecastSource> make_builtin_forecast(std::int64_t nlat, std::int64_t nlon,
                                                                    std::int64_t initial_conditions,
                                                                    std::int64_t members, std::int64_t lead_times);

/// A pair of CF netCDF files as a forecast of one initial condition and one member over the files' steps: the
/// variables of a truth and a prediction file (all with a lat and a lon dim, or `names`), checked to share
/// grid, shapes, units (UDUNITS-2: "m/s" is "m s-1") and, unless `allow_time_mismatch`, time coordinates
/// (after unit conversion), opened as `access` says. The layout's lead times are the steps, and its lead-time
/// axis is empty (a pair has no initial time). Throws ArgumentError naming the files and the problem.
[[nodiscard]] std::unique_ptr<ForecastSource> make_netcdf_pair(const std::string& truth_path,
                                                               const std::string& prediction_path,
                                                               const std::vector<std::string>& names,
                                                               bool allow_time_mismatch, const InputAccess& access);

/// The built-in analytic pair as a forecast of one initial condition and one member: a Rossby-Haurwitz wave
/// (Williamson et al. 1992, case 6) height field, a temperature with finer structure and a sea-surface
/// temperature with a land mask of NaN, on a regular `nlat x nlon` grid pole to pole over `ntime` six-hourly
/// steps; the prediction is the truth with a slightly wrong phase speed, a bias and deterministic noise. Every
/// value depends only on its global indices, so any rank generates its own box. Float32.
[[nodiscard]] std::unique_ptr<ForecastSource> make_builtin_pair(std::int64_t nlat, std::int64_t nlon,
                                                                std::int64_t ntime);

}  // namespace gridshard::io
