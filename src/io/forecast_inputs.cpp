// The inputs of a forecast evaluation beside the forecast: fingerprints, lead-time rows, climatologies and regions.

#include "gridshard/io/forecast_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard::io {

void InputHash::add(const SourceGrid& grid) {
    for (const std::vector<double>* values : {&grid.lat_deg, &grid.lon_deg, &grid.time_values}) {
        add(*values);
    }
    add(grid.time_units);
    add(grid.time_calendar);
}

void InputHash::add(const io::VariableShape& variable) {
    add(variable.name);
    for (std::size_t k = 0; k < variable.dim_names.size(); ++k) {
        add(variable.dim_names[k]);
        add(variable.dim_sizes[k]);
    }
    add(static_cast<std::int64_t>(variable.value_type));
    add(variable.units);
}

void InputHash::add(const SourceVariable& variable) {
    add(variable.name);
    add(variable.channels);
    add(static_cast<std::int64_t>(variable.type));
}

/// The valid time of every (initial condition, lead time), initial condition slowest: the initial time
/// plus the lead, or the lead coordinate itself when it is a time ("hours since ..."). Throws ArgumentError
/// when the forecast does not say.
std::vector<io::DateTime> valid_dates(const ForecastSource& source) {
    const ForecastLayout& l = source.layout();
    const LeadTimes& t = source.lead_times();
    const auto lead_count = static_cast<std::size_t>(l.lead_times);
    if (t.values.size() != lead_count) {
        throw ArgumentError(setting_name("climatology") + " by day of year: the forecast has no lead-time coordinate");
    }
    std::vector<io::DateTime> dates;
    if (t.units.find(" since ") != std::string::npos) {
        const io::TimeAxis axis = io::parse_time_units(t.units, source.grid().time_calendar);
        for (std::int64_t ic = 0; ic < l.initial_conditions; ++ic) {
            for (const double v : t.values) {
                dates.push_back(axis.date_at(v));
            }
        }
        return dates;
    }
    const double lead_seconds = io::seconds_per_unit(t.units);
    if (lead_seconds == 0.0 || t.init_times.size() != static_cast<std::size_t>(l.initial_conditions)) {
        throw ArgumentError(setting_name("climatology") +
                            " by day of year needs the initial times (init_time) and lead times in a "
                            "unit of time; the forecast has lead-time units '" +
                            t.units + "' and " + std::to_string(t.init_times.size()) + " initial times");
    }
    const io::TimeAxis axis = io::parse_time_units(t.init_time_units, t.calendar);
    for (const double init : t.init_times) {
        for (const double v : t.values) {
            dates.push_back(axis.date_after(init, v * lead_seconds));
        }
    }
    return dates;
}

/// The rows of `source`'s lead-time axis that the time means count. A row is at lead 0 where its lead-time value
/// is 0 in a unit of duration ("microseconds", "hours") or without units, or, on an axis of instants ("hours
/// since ..."), where it is the initial time of every initial condition; where the forecast does not say (no
/// lead-time coordinate, an axis of instants without initial times), no row is at lead 0. No MPI calls.
TimeMeanRows time_mean_rows(const ForecastSource& source, bool include_initial_step) {
    const ForecastLayout& l = source.layout();
    const LeadTimes& t = source.lead_times();
    TimeMeanRows out;
    std::vector<bool> initial(static_cast<std::size_t>(l.lead_times), false);
    out.leads_known = t.values.size() == initial.size();
    if (out.leads_known && t.units.find(" since ") == std::string::npos) {
        for (std::size_t k = 0; k < initial.size(); ++k) {
            initial[k] = t.values[k] == 0.0;
        }
    } else if (out.leads_known) {
        out.leads_known = !t.init_times.empty();
        try {
            const io::TimeAxis rows = io::parse_time_units(t.units, source.grid().time_calendar);
            const io::TimeAxis inits = io::parse_time_units(t.init_time_units, t.calendar);
            for (std::size_t k = 0; k < initial.size() && out.leads_known; ++k) {
                const io::DateTime row = rows.date_at(t.values[k]);
                initial[k] = std::all_of(t.init_times.begin(), t.init_times.end(), [&](double init) {
                    return io::same_date(row, inits.date_at(init), rows.calendar);
                });
            }
        } catch (const ArgumentError&) {  // times that are no dates: the lead of no row is known
            out.leads_known = false;
            initial.assign(initial.size(), false);
        }
    }
    out.initial_rows = std::count(initial.begin(), initial.end(), true);
    out.initial_counted = out.initial_rows > 0 && (include_initial_step || out.initial_rows == l.lead_times);
    for (std::size_t k = 0; k < initial.size(); ++k) {
        if (!initial[k] || out.initial_counted) {
            out.rows.push_back(static_cast<std::int64_t>(k));
        }
    }
    return out;
}

/// What each rank read of the forecast, for the agreement over ranks: the grid, the layout, the lead and
/// initial times and the variables to score.
InputHash forecast_hash(const ForecastSource& source, const std::vector<SourceVariable>& variables) {
    InputHash hash;
    hash.add(source.grid());
    const ForecastLayout& l = source.layout();
    for (const std::int64_t n :
         {l.initial_conditions, l.members, l.lead_times, std::int64_t{l.folded}, std::int64_t{l.truth_repeated}}) {
        hash.add(n);
    }
    for (const std::string* text : {&l.members_from, &l.initial_condition_dim, &l.member_dim}) {
        hash.add(*text);
    }
    const LeadTimes& t = source.lead_times();
    hash.add(t.values);
    hash.add(t.units);
    hash.add(t.init_times);
    hash.add(t.init_time_units);
    hash.add(t.calendar);
    for (const SourceVariable& v : variables) {
        hash.add(v);
    }
    return hash;
}

TimeMeanRows every_row(std::int64_t lead_times) {
    TimeMeanRows out;
    for (std::int64_t k = 0; k < lead_times; ++k) {
        out.rows.push_back(k);
    }
    out.leads_known = false;
    return out;
}

ScoredRegions make_regions(const std::vector<std::string>& texts, const SourceGrid& g, const Box& box,
                           const AreaWeights& base, const InputAccess& access) {
    ScoredRegions out;
    out.regions.push_back(named_regions().front());
    out.weights.push_back(base);
    out.inside.push_back(box.area());
    out.cells.emplace_back();  // every point
    for (const std::string& text : texts) {
        Region r = parse_region(text);
        const auto same = [&](const Region& other) { return other.name == r.name; };
        if (std::any_of(out.regions.begin(), out.regions.end(), same)) {
            throw ArgumentError(setting_name("regions") + " '" + text + "': region '" + r.name + "' is given twice");
        }
        out.hash.add(r.name);
        out.hash.add(std::vector<double>{r.box.south, r.box.north, r.box.west, r.box.east});
        out.hash.add(std::int64_t{r.box.whole_longitude});
        if (r.mask_file.empty()) {
            out.weights.push_back(region_weights(base.view(), g.lat_deg, g.lon_deg, box, r.box));
            std::vector<std::int64_t> cells;
            for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                    if (in_box(r.box, g.lat_deg[static_cast<std::size_t>(i)], g.lon_deg[static_cast<std::size_t>(j)])) {
                        cells.push_back((i - box.lat.begin) * box.lon.size() + (j - box.lon.begin));
                    }
                }
            }
            out.inside.push_back(static_cast<std::int64_t>(cells.size()));
            out.cells.emplace_back(std::move(cells));
        } else {
            const io::NetcdfReader mask = access.open(r.mask_file);
            if (!io::same_grid(mask.grid(), g)) {
                throw ArgumentError(setting_name("regions") + " '" + text + "': '" + r.mask_file +
                                    "' is not on the forecast's grid");
            }
            out.hash.add(mask.grid());
            out.hash.add(mask.variable(r.mask_variable));
            io::VariableReader plan = mask.reader(r.mask_variable, box);
            if (plan.values_per_step() != static_cast<std::size_t>(box.area())) {
                throw ArgumentError(setting_name("regions") + " '" + text + "': variable '" + r.mask_variable +
                                    "' must be one lat x lon field");
            }
            std::vector<double> values(plan.values_per_step());
            if (access.collective()) {  // every rank stops at the same mask when one cannot read it
                check_collectively(*access.comm, attempt([&] { plan.read_step(0, std::span<double>(values)); }));
            } else {
                plan.read_step(0, std::span<double>(values));
            }
            out.weights.push_back(mask_weights(base.view(), box, values));
            std::vector<std::int64_t> cells;
            for (std::size_t k = 0; k < values.size(); ++k) {
                if (std::isfinite(values[k]) && values[k] != 0.0) {
                    cells.push_back(static_cast<std::int64_t>(k));
                }
            }
            out.inside.push_back(static_cast<std::int64_t>(cells.size()));
            out.cells.emplace_back(std::move(cells));
        }
        out.regions.push_back(std::move(r));
    }
    return out;
}

// Collective over `spatial`: refuses, on every rank alike, a region whose weights are zero over the whole
// grid, naming it, its box or mask and why (no grid point inside the box, or every weight zero), before a
// score divides by its total weight. One allreduce.
void check_region_weights(const Communicator& spatial, const ScoredRegions& regions) {
    const std::size_t n = regions.regions.size();
    std::vector<std::int64_t> counts(2 * n, 0);
    for (std::size_t k = 0; k < n; ++k) {
        const std::vector<double>& w = regions.weights[k].values;
        counts[2 * k] = regions.inside[k];
        counts[2 * k + 1] = std::count_if(w.begin(), w.end(), [](double x) { return x > 0.0; });
    }
    gridshard::allreduce_sum_in_place(spatial, counts);
    for (std::size_t k = 0; k < n; ++k) {
        if (counts[2 * k + 1] > 0) {
            continue;
        }
        const Region& r = regions.regions[k];
        const bool box = r.mask_file.empty();
        char text[160];
        std::snprintf(text, sizeof text, "box %g,%g,%g,%g", r.box.south, r.box.north, r.box.west, r.box.east);
        const std::string where =
            box ? std::string(text) : "mask '" + r.mask_file + "' variable '" + r.mask_variable + "'";
        throw ArgumentError(setting_name("regions") + ": region '" + r.name + "' (" + where + "): " +
                            (box && counts[2 * k] == 0    ? "no grid point inside"
                             : !box && counts[2 * k] == 0 ? "every weight zero (the mask is 0 or NaN everywhere)"
                                                          : "every weight zero (the area weights vanish there)"));
    }
}
}  // namespace gridshard::io
