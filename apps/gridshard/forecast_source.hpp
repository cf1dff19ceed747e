#pragma once
// Where the forecast evaluation of `gridshard eval` gets its fields: forecasts from several initial
// conditions, each with one or more ensemble members, over lead times. A source describes the layout and
// opens a read plan per variable and box that fills the caller's buffers for one (initial condition, lead
// time). The netCDF source reads ACE's `autoregressive_{predictions,target}.nc` layout and its variants
// (docs/forecast.md); the built-in source is an analytic ensemble forecast. No MPI calls, unless the files
// are opened collectively (InputAccess).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "field_source.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard::cli {

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

/// The built-in forecast: the built-in analytic case (make_builtin_source) from `initial_conditions`
/// start times a day apart, `lead_times` six-hourly steps each (the first the initial condition, where
/// every member equals the truth), and `members` members whose errors grow with lead time. Float32.
[[nodiscard]] std::unique_ptr<ForecastSource> make_builtin_forecast(std::int64_t nlat, std::int64_t nlon,
                                                                    std::int64_t initial_conditions,
                                                                    std::int64_t members, std::int64_t lead_times);

}  // namespace gridshard::cli
