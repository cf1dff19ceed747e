// The files of ACE's climate families that hold no maps, each on world rank 0 from the scores every rank holds:
// annual_diagnostics.nc, enso_index_diagnostics.nc and histogram_diagnostics.nc, in ACE's layout.

#include <cmath>
#include <limits>
#include <optional>

#include "diagnostics_files.hpp"
#include "gridshard/io/calendar.hpp"

namespace gridshard::cli {

// ACE's annual_diagnostics.nc (fme's PairedGlobalMeanAnnualAggregator.get_dataset): per variable with annual means
// and `counts` (ACE's: 1 where a year is kept) over (source, sample, year), source = target, prediction.
io::Dataset annual_diagnostics(const EvaluationResult& result) {
    io::Dataset d;
    d.global_attributes = global_attributes("gridshard annual means of the global means, per sample (" +
                                            time_mean_rows_text(result) + ")");
    const AnnualMeans* first = nullptr;
    for (const ChannelScores& c : result.channels) {
        if (!c.annual) {
            continue;  // a variable without annual means
        }
        first = first == nullptr ? &*c.annual : first;
        std::vector<double> values = c.annual->truth;
        values.insert(values.end(), c.annual->prediction.begin(), c.annual->prediction.end());
        d.variables.push_back(
            {netcdf_name(c.name), {"source", "sample", "year"}, values, {{"long_name", c.name + " annual mean"}}});
    }
    if (first != nullptr) {
        std::vector<double> years(first->years.begin(), first->years.end());
        d.dims = {{"source", 2, {}, {}, false, {"target", "prediction"}},
                  {"sample", first->samples},
                  {"year", static_cast<std::int64_t>(years.size()), years, {{"long_name", "calendar year"}}}};
        std::vector<double> counts = first->counts;
        counts.insert(counts.end(), first->counts.begin(), first->counts.end());
        d.variables.push_back({"counts", {"source", "sample", "year"}, counts, {}});
    }
    return d;
}

// ACE's enso_index_diagnostics.nc (fme's PairedRegionalIndexAggregator.get_dataset): per variable with a Nino 3.4
// index its index over (source, sample, time), source = target, prediction, the time the 15th of each month in the
// files' calendar.
namespace {

/// A monthly index's file (ACE's regional index files): per variable with the index `gen` (and its truth `target`),
/// its values over (source = target, prediction; sample; time), the time the 15th of each month in the files'
/// calendar, as days since 1970.
io::Dataset monthly_index_file(const EvaluationResult& result, const std::string& title, const std::string& what,
                               std::optional<MonthlyIndex> ChannelScores::*gen,
                               std::optional<MonthlyIndex> ChannelScores::*target) {
    io::Dataset d;
    d.global_attributes = global_attributes(title);
    for (const ChannelScores& c : result.channels) {
        const std::optional<MonthlyIndex>& index = c.*gen;
        if (!index) {
            continue;  // a variable without an index
        }
        if (d.dims.empty()) {
            const io::Calendar calendar = io::parse_calendar(result.lead_times.calendar);
            std::vector<double> days;
            for (std::size_t m = 0; m < index->years.size(); ++m) {
                const io::DateTime mid{.year = index->years[m], .month = index->months[m], .day = 15};
                days.push_back(io::seconds_between({.year = 1970, .month = 1, .day = 1}, mid, calendar) / 86400.0);
            }
            const std::string calendar_name =
                result.lead_times.calendar.empty() ? "standard" : result.lead_times.calendar;
            d.dims = {{"source", 2, {}, {}, false, {"target", "prediction"}},
                      {"sample", index->samples},
                      {"time",
                       static_cast<std::int64_t>(days.size()),
                       days,
                       {{"units", "days since 1970-01-01 00:00:00"}, {"calendar", calendar_name}}}};
        }
        std::vector<double> values = (c.*target)->values;
        values.insert(values.end(), index->values.begin(), index->values.end());
        d.variables.push_back(
            {netcdf_name(c.name), {"source", "sample", "time"}, values, {{"long_name", c.name + " " + what}}});
    }
    return d;
}

}  // namespace

io::Dataset enso_index_diagnostics(const EvaluationResult& result) {
    return monthly_index_file(result,
                              "gridshard Nino 3.4 index per sample (ACE's 5-month running monthly anomalies of the "
                              "Nino 3.4 regional means)",
                              "Nino 3.4 index", &ChannelScores::index_prediction, &ChannelScores::index_truth);
}

// ACE's ipo_index_diagnostics.nc (fme's PairedIPOIndexAggregator.get_dataset): per variable with an IPO index its
// unfiltered monthly tripole index over (source, sample, time), as the ENSO index's file.
io::Dataset ipo_index_diagnostics(const EvaluationResult& result) {
    return monthly_index_file(result,
                              "gridshard IPO tripole index per sample (ACE's monthly anomalies of its three boxes' "
                              "means, T2 - (T1 + T3) / 2, unfiltered)",
                              "IPO tripole index", &ChannelScores::tripole_prediction, &ChannelScores::tripole_truth);
}

// ACE's histogram_diagnostics.nc (fme's ComparedDynamicHistograms.get_dataset): per variable with histograms its
// counts over (source, bin) and its edges as <name>_bin_edges over (source, bin_edges), source = target, prediction;
// the counts as doubles (exact: below 2^53), a histogram without a counted window NaN edges and 0 counts.
io::Dataset histogram_diagnostics(const EvaluationResult& result) {
    io::Dataset d;
    d.global_attributes =
        global_attributes("gridshard histograms in ACE's dynamic bins (" + time_mean_rows_text(result) + ")");
    for (const ChannelScores& c : result.channels) {
        if (!c.histograms) {
            continue;  // a variable without histograms
        }
        const ChannelHistograms& h = *c.histograms;
        const std::size_t bins = std::max(h.truth_counts.size(), h.prediction_counts.size());
        if (d.dims.empty()) {
            d.dims = {{"source", 2, {}, {}, false, {"target", "prediction"}},
                      {"bin", static_cast<std::int64_t>(bins)},
                      {"bin_edges", static_cast<std::int64_t>(bins + 1)}};
        }
        std::vector<double> counts, edges;
        for (const auto& [these, those] :
             {std::pair{&h.truth_counts, &h.truth_edges}, std::pair{&h.prediction_counts, &h.prediction_edges}}) {
            for (std::size_t k = 0; k < bins; ++k) {
                counts.push_back(k < these->size() ? static_cast<double>((*these)[k]) : 0.0);
            }
            for (std::size_t k = 0; k <= bins; ++k) {
                edges.push_back(k < those->size() ? (*those)[k] : std::numeric_limits<double>::quiet_NaN());
            }
        }
        const std::string name = netcdf_name(c.name);
        const std::string left_out = "windows left out (a value not finite at a counted point): target " +
                                     std::to_string(h.truth_windows_left_out) + ", prediction " +
                                     std::to_string(h.prediction_windows_left_out);
        d.variables.push_back({name,
                               {"source", "bin"},
                               counts,
                               {{"long_name", c.name + " histogram counts"}, {"comment", left_out}},
                               {},
                               {},
                               false});
        d.variables.push_back(
            {name + "_bin_edges", {"source", "bin_edges"}, edges, {{"long_name", c.name + " histogram bin edges"}}});
    }
    return d;
}

}  // namespace gridshard::cli
