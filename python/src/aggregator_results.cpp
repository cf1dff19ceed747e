// The aggregator's results as the compiled module hands them to gridshard.Aggregator: dicts of float64 (and int64)
// bytes, which the Python layer makes into arrays.

#include "aggregator_results.hpp"

#include <cstdint>
#include <vector>

namespace gridshard::python {
namespace py = pybind11;

namespace {

/// Integers as the bytes of int64s (the Python layer's np.frombuffer).
py::bytes int64_bytes(const std::vector<std::int64_t>& values) {
    return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(std::int64_t)};
}

}  // namespace

py::bytes packed(const std::vector<double>& values) {
    return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double)};
}

py::dict series_dict(const std::vector<ScoreSeries>& series) {
    py::dict out;
    for (const ScoreSeries& s : series) {
        out[py::str(s.score->key)] = py::make_tuple(packed(s.values), s.width);
    }
    return out;
}

py::object map_bytes(const std::vector<double>& map) {
    if (map.empty()) {
        return py::none();
    }
    return packed(map);
}

py::dict channel_dict(const ChannelScores& channel) {
    py::dict c;
    py::dict regions;
    for (const RegionScores& region : channel.regions) {
        py::dict r;
        r["per_lead"] = series_dict(region.per_lead);
        py::dict means;
        for (const ScoreValue& v : region.time_means) {
            means[py::str(v.score->key)] = v.value;
        }
        r["time_means"] = means;
        py::dict at_leads;  // {key: {lead: value}}
        for (const ScoreAtLead& v : region.at_leads) {
            const py::str key(v.score->key);
            if (!at_leads.contains(key)) {
                at_leads[key] = py::dict();
            }
            at_leads[key].cast<py::dict>()[py::int_(v.lead)] = v.value;
        }
        r["at_leads"] = at_leads;
        regions[py::str(region.name)] = r;
    }
    c["regions"] = regions;
    c["profiles"] = series_dict(channel.profiles);
    c["spectra"] = series_dict(channel.spectra);
    c["prediction_map"] = map_bytes(channel.prediction_map);
    c["bias_map"] = map_bytes(channel.bias_map);
    c["near_zero_maps"] = channel.near_zero_prediction_map.empty()
                              ? py::object(py::none())
                              : py::object(py::make_tuple(map_bytes(channel.near_zero_prediction_map),
                                                          map_bytes(channel.near_zero_truth_map)));
    py::dict cell_maps;  // {key: {lead: map}} where this rank holds them
    for (const ScoreMapAtLead& m : channel.cell_maps) {
        if (!m.values.empty()) {
            if (!cell_maps.contains(m.score->key)) {
                cell_maps[py::str(m.score->key)] = py::dict();
            }
            cell_maps[py::str(m.score->key)].cast<py::dict>()[py::int_(m.lead)] = map_bytes(m.values);
        }
    }
    c["cell_maps"] = cell_maps;
    c["video"] = channel.video_prediction.empty()
                     ? py::object(py::none())
                     : py::object(py::make_tuple(map_bytes(channel.video_prediction), map_bytes(channel.video_truth)));
    c["extended_video"] =
        channel.video_bias.empty()
            ? py::object(py::none())
            : py::object(py::make_tuple(map_bytes(channel.video_bias), map_bytes(channel.video_rmse),
                                        map_bytes(channel.video_min_error), map_bytes(channel.video_max_error),
                                        map_bytes(channel.video_variance_ratio)));
    c["trend_maps"] =
        channel.trend_prediction_map.empty()
            ? py::object(py::none())
            : py::object(py::make_tuple(map_bytes(channel.trend_prediction_map), map_bytes(channel.trend_truth_map)));
    c["seasonal"] =
        !channel.seasonal_prediction.empty()
            ? py::object(py::make_tuple(map_bytes(channel.seasonal_prediction), map_bytes(channel.seasonal_truth)))
            : py::object(py::none());
    // A monthly index of the prediction and of the truth: its months and values (sample slowest), or None.
    const auto index_dict = [](const std::optional<MonthlyIndex>& gen, const std::optional<MonthlyIndex>& truth) {
        if (!gen) {
            return py::object(py::none());
        }
        py::dict index;
        index["years"] = py::bytes(reinterpret_cast<const char*>(gen->years.data()), gen->years.size() * 8);
        std::vector<std::int64_t> months(gen->months.begin(), gen->months.end());
        index["months"] = py::bytes(reinterpret_cast<const char*>(months.data()), months.size() * 8);
        index["samples"] = gen->samples;
        index["prediction"] = map_bytes(gen->values);
        index["target"] = map_bytes(truth->values);
        return py::object(index);
    };
    c["nino34_index"] = index_dict(channel.index_prediction, channel.index_truth);
    c["ipo_index"] = index_dict(channel.tripole_prediction, channel.tripole_truth);
    if (channel.annual) {
        const AnnualMeans& a = *channel.annual;
        py::dict annual;
        annual["years"] = int64_bytes(a.years);
        annual["samples"] = a.samples;
        annual["prediction"] = map_bytes(a.prediction);
        annual["target"] = map_bytes(a.truth);
        annual["counts"] = map_bytes(a.counts);
        c["annual"] = annual;
    } else {
        c["annual"] = py::none();
    }
    if (channel.histograms) {
        const ChannelHistograms& h = *channel.histograms;
        py::dict histogram;
        histogram["target_edges"] = map_bytes(h.truth_edges);
        histogram["target_counts"] = int64_bytes(h.truth_counts);
        histogram["prediction_edges"] = map_bytes(h.prediction_edges);
        histogram["prediction_counts"] = int64_bytes(h.prediction_counts);
        histogram["windows_left_out"] = py::make_tuple(h.truth_windows_left_out, h.prediction_windows_left_out);
        c["histogram"] = histogram;
    } else {
        c["histogram"] = py::none();
    }
    c["enso_coefficient_maps"] = channel.index_regression_prediction_map.empty()
                                     ? py::object(py::none())
                                     : py::object(py::make_tuple(map_bytes(channel.index_regression_prediction_map),
                                                                 map_bytes(channel.index_regression_truth_map)));
    c["target_missing"] = target_missing_everywhere(channel);
    return c;
}

}  // namespace gridshard::python
