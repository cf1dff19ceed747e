#pragma once
/// @file
/// The inputs of a forecast evaluation beside the forecast itself: the climatology of the anomaly correlation
/// (one field, one per lead time, or WeatherBench 2's per day of year and hour, in the forecast's CF calendar),
/// the regions (named boxes and mask files) with each rank's weights, the rows the time means count, and the
/// fingerprint every rank agrees on before a collective depends on what it read. No MPI calls unless said.
///
/// @code
///   // What this rank read, as one number to agree on, and the rows the time means count.
///   std::int64_t fingerprint(const gridshard::io::ForecastSource& source) {
///       const gridshard::io::InputHash read = gridshard::io::forecast_hash(source, source.variables());
///       const gridshard::io::TimeMeanRows rows = gridshard::io::time_mean_rows(source, false);
///       return read.value() + static_cast<std::int64_t>(rows.rows.size());
///   }
/// @endcode

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "gridshard/io/netcdf_reader.hpp"

namespace gridshard::io {

/// What a rank read of its inputs, as one number every rank must agree on (with detail::agree_or_throw, beside
/// the sizes): a 63-bit FNV-1a hash of the coordinates, times, names, layouts and types it is given. Every rank
/// opens the files itself, so a file still being written, or a stale copy on one node, gives one rank other
/// values and so other collectives, or other numbers under the same sizes. Both evaluations agree on their
/// inputs through it. No MPI calls.
class InputHash {
  public:
    void add_bytes(const void* data, std::size_t bytes) noexcept {
        for (std::size_t k = 0; k < bytes; ++k) {
            hash_ = (hash_ ^ static_cast<const unsigned char*>(data)[k]) * 1099511628211ull;
        }
    }
    void add(std::span<const double> values) noexcept { add_bytes(values.data(), values.size_bytes()); }
    void add(const std::string& text) noexcept { add_bytes(text.c_str(), text.size() + 1); }
    void add(std::int64_t value) noexcept { add_bytes(&value, sizeof value); }
    /// A grid's coordinates and its time axis (values, units, calendar).
    void add(const SourceGrid& grid);
    /// A file's variable: its name, dims and their sizes, type and units.
    void add(const io::VariableShape& variable);
    /// A variable to score: its name, channels and type.
    void add(const SourceVariable& variable);
    [[nodiscard]] std::int64_t value() const noexcept { return static_cast<std::int64_t>(hash_ >> 1); }

  private:
    std::uint64_t hash_ = 14695981039346656037ull;
};

/// What each rank read of `source`, for the agreement over ranks: the grid, the layout, the lead and initial
/// times and `variables`, the variables to score.
[[nodiscard]] InputHash forecast_hash(const ForecastSource& source, const std::vector<SourceVariable>& variables);

/// The valid time of every (initial condition, lead time), initial condition slowest: the initial time plus the
/// lead, or the lead coordinate itself when it is a time ("hours since ..."). Throws ArgumentError when the
/// forecast does not say.
[[nodiscard]] std::vector<DateTime> valid_dates(const ForecastSource& source);

/// The rows of `source`'s lead-time axis that the time means count. A row is at lead 0 where its lead-time value
/// is 0 in a unit of duration ("microseconds", "hours") or without units, or, on an axis of instants ("hours
/// since ..."), where it is the initial time of every initial condition; where the forecast does not say (no
/// lead-time coordinate, an axis of instants without initial times), no row is at lead 0.
[[nodiscard]] TimeMeanRows time_mean_rows(const ForecastSource& source, bool include_initial_step);

/// Every row of `lead_times` rows, as a pair of fields counts its steps.
[[nodiscard]] TimeMeanRows every_row(std::int64_t lead_times);

/// How one variable of a climatology is read: a plan and, per (initial condition, lead time), the indices of
/// its indexed dims (none for a single field).
struct ClimatologyPlan {
    io::VariableReader reader;
    std::vector<std::vector<std::int64_t>> positions;
    /// "time mean", "per lead time" or "day of year" (with "and hour").
    std::string kind;
};

/// The climatology of `--climatology`: per variable one field, one per lead time, or one per day of year
/// (and hour of day), as WeatherBench 2's climatologies are laid out (dims `dayofyear` 1..366 and `hour`).
class Climatology {
  public:
    Climatology(const std::string& path, const ForecastSource& source, const InputAccess& access)
        : reader_(access.open(path)), source_(source) {
        const SourceGrid& grid = source.grid();
        if (!io::same_grid(reader_.grid(), grid)) {
            throw ArgumentError(setting_name("climatology") + " '" + path + "' (" +
                                std::to_string(reader_.grid().shape().nlat) + " x " +
                                std::to_string(reader_.grid().shape().nlon) + ") is not on the forecast's grid (" +
                                std::to_string(grid.shape().nlat) + " x " + std::to_string(grid.shape().nlon) + ")");
        }
    }

    /// What this rank read of the file, for the agreement over ranks: its grid, its variables' dims, sizes and
    /// types, and its dayofyear and hour coordinates (the layout of its values and their coordinates).
    [[nodiscard]] std::int64_t hash() const {
        InputHash hash;
        hash.add(reader_.grid());
        for (const std::string& name : reader_.field_variables()) {
            hash.add(reader_.variable(name));
        }
        for (const std::string dim : {"dayofyear", "hour"}) {
            if (const std::optional<io::WholeVariable> coordinate = reader_.whole_variable(dim)) {
                hash.add(coordinate->values);
            }
        }
        return hash.value();
    }

    /// A plan for `variable` on `box`. Throws ArgumentError for a variable of other levels, or of a time
    /// axis that is neither one field nor one per lead time, or a day or hour it lacks.
    [[nodiscard]] ClimatologyPlan open(const SourceVariable& variable, const Box& box) const {
        const io::VariableShape v = reader_.variable(variable.name);
        const ForecastLayout& l = source_.layout();
        const std::string where =
            setting_name("climatology") + " '" + reader_.path() + "': variable '" + variable.name + "'";
        const auto has = [&](const std::string& dim) {
            return std::find(v.dim_names.begin(), v.dim_names.end() - 2, dim) != v.dim_names.end() - 2;
        };
        std::vector<std::string> indexed;
        std::string kind;
        if (has("dayofyear")) {
            for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
                if (v.dim_names[k] == "dayofyear" || v.dim_names[k] == "hour") {
                    indexed.push_back(v.dim_names[k]);
                }
            }
            kind = has("hour") ? "day of year and hour" : "day of year";
        } else if (v.time_index) {
            indexed.push_back(v.dim_names[static_cast<std::size_t>(*v.time_index)]);
            if (v.ntime != 1 && v.ntime != l.lead_times) {
                throw ArgumentError(where + " has " + std::to_string(v.ntime) +
                                    " times; it needs 1 (a time mean), one per lead time (" +
                                    std::to_string(l.lead_times) + ") or a dayofyear dim");
            }
            kind = v.ntime == l.lead_times && l.lead_times > 1 ? "per lead time" : "time mean";
        } else {
            kind = "time mean";
        }
        std::int64_t channels = 1;
        for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
            if (std::find(indexed.begin(), indexed.end(), v.dim_names[k]) == indexed.end()) {
                channels *= v.dim_sizes[k];
            }
        }
        if (channels != variable.channels) {
            throw ArgumentError(where + " has " + std::to_string(channels) + " levels per field, the forecast " +
                                std::to_string(variable.channels));
        }
        ClimatologyPlan plan{reader_.reader(variable.name, box, indexed), {}, kind};
        const std::size_t pairs = static_cast<std::size_t>(l.initial_conditions * l.lead_times);
        if (kind == "per lead time") {
            for (std::size_t k = 0; k < pairs; ++k) {
                plan.positions.push_back({static_cast<std::int64_t>(k) % l.lead_times});
            }
        } else if (kind == "time mean") {
            plan.positions.assign(pairs, std::vector<std::int64_t>(indexed.size(), 0));
        } else {
            const std::vector<io::DateTime> dates = valid_dates(source_);
            for (const io::DateTime& d : dates) {
                std::vector<std::int64_t> at;
                for (const std::string& dim : indexed) {
                    const int wanted = dim == "dayofyear" ? d.day_of_year : d.hour;
                    if (dim == "hour" && (d.minute != 0 || d.second != 0.0)) {
                        throw ArgumentError(where + ": a valid time at minute " + std::to_string(d.minute) +
                                            " is not on an hour of its 'hour' dim");
                    }
                    at.push_back(index_of(dim, wanted, v, where));
                }
                plan.positions.push_back(std::move(at));
            }
        }
        return plan;
    }

  private:
    // The index of `value` on dim `dim` of `v`: by its coordinate variable, or (without one) day 1 at index 0
    // and hours evenly spread over the day.
    [[nodiscard]] std::int64_t index_of(const std::string& dim, int value, const io::VariableShape& v,
                                        const std::string& where) const {
        const std::int64_t size = v.dim_sizes[static_cast<std::size_t>(
            std::find(v.dim_names.begin(), v.dim_names.end(), dim) - v.dim_names.begin())];
        if (const std::optional<io::WholeVariable> coordinate = reader_.whole_variable(dim)) {
            for (std::size_t k = 0; k < coordinate->values.size(); ++k) {
                if (coordinate->values[k] == value) {
                    return static_cast<std::int64_t>(k);
                }
            }
        } else if (dim == "dayofyear" && value >= 1 && value <= size) {
            return value - 1;
        } else if (dim == "hour" && size > 0 && 24 % size == 0 && value % (24 / size) == 0) {
            return value / (24 / size);
        }
        throw ArgumentError(where + " has no " + (dim == "hour" ? "hour " : "day of year ") + std::to_string(value) +
                            " on its '" + dim + "' dim, which a valid time of the forecast needs");
    }

    io::NetcdfReader reader_;
    const ForecastSource& source_;
};

/// The regions to score, global first, with this rank's weights for each.
struct ScoredRegions {
    std::vector<Region> regions;
    std::vector<AreaWeights> weights;
    std::vector<std::int64_t> inside;  ///< this rank's grid points inside each box, or where each mask is not 0
    /// Per region, the indices of those points in this rank's box (row-major; none for the global region, which
    /// holds every point).
    std::vector<std::optional<std::vector<std::int64_t>>> cells;
    InputHash hash;  ///< the regions as given and their mask files as this rank reads them
};

/// The global region and the regions of `texts` (parse_region: a named region, NAME:lat0,lat1,lon0,lon1 or
/// NAME:FILE:MASK_VARIABLE) with this rank's weights on `box`: `base` inside each box, or `base` times each mask
/// (read as `access` says). Throws ArgumentError for a region given twice, or a mask not on the grid or not one
/// lat x lon field.
[[nodiscard]] ScoredRegions make_regions(const std::vector<std::string>& texts, const SourceGrid& g, const Box& box,
                                         const AreaWeights& base, const InputAccess& access);

/// Collective over `spatial`: refuses, on every rank alike, a region whose weights are zero over the whole
/// grid, naming it, its box or mask and why (no grid point inside the box, or every weight zero), before a
/// score divides by its total weight. One allreduce.
void check_region_weights(const Communicator& spatial, const ScoredRegions& regions);

}  // namespace gridshard::io
