#include "gridshard/io/normalization.hpp"

#include <cmath>
#include <string>

#include "gridshard/io/forecast_inputs.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "netcdf_handle.hpp"

namespace gridshard::io {
namespace {

// One variable's values of a stats file, one per channel.
std::vector<double> channel_values(const detail::NetcdfHandle& file, const std::string& flag,
                                   const SourceVariable& variable, bool positive) {
    const std::string where = flag + " '" + file.path() + "': variable '" + variable.name + "'";
    const std::optional<int> varid = file.find_var(variable.name);
    if (!varid) {
        throw ArgumentError(where + " is missing (ACE's stats files hold one value per variable)");
    }
    if (!detail::is_numeric(file.var_type(*varid))) {
        throw ArgumentError(where + " is not numeric");
    }
    for (const char* packing : {"scale_factor", "add_offset"}) {
        if (file.attribute_type(*varid, packing)) {
            throw ArgumentError(where + " is packed (" + packing + "); ACE reads stats files' raw values");
        }
    }
    std::size_t count = 1;
    const std::vector<int> dims = file.var_dims(*varid);
    for (const int dim : dims) {
        count *= static_cast<std::size_t>(file.dim_length(dim));
    }
    const auto channels = static_cast<std::size_t>(variable.channels);
    if (count != 1 && !(dims.size() == 1 && count == channels)) {
        throw ArgumentError(where + " has " + std::to_string(count) + " values in " + std::to_string(dims.size()) +
                            " dims; expected one, or one per channel (" + std::to_string(channels) + ")");
    }
    std::vector<double> values = file.read_all(*varid, count);
    values.resize(channels, values.front());  // one value: every channel's
    for (const double v : values) {
        if (!std::isfinite(v) || (positive && !(v > 0.0))) {
            throw ArgumentError(where + " is " + std::to_string(v) + "; expected a finite" +
                                (positive ? ", positive std" : " mean"));
        }
    }
    return values;
}

}  // namespace

Normalization::Normalization(std::string means_path, std::string stds_path,
                             const std::vector<SourceVariable>& variables)
    : means_path_(std::move(means_path)), stds_path_(std::move(stds_path)) {
    const detail::NetcdfHandle means(means_path_);
    const detail::NetcdfHandle stds(stds_path_);
    for (const SourceVariable& v : variables) {
        stats_[v.name] = {channel_values(means, setting_name("normalize_means"), v, false),
                          channel_values(stds, setting_name("normalize_stds"), v, true)};
    }
}

const ChannelStats& Normalization::of(const std::string& variable) const {
    const auto it = stats_.find(variable);
    if (it == stats_.end()) {
        throw ArgumentError(setting_name("normalization") + ": no stats read for variable '" + variable + "'");
    }
    return it->second;
}

std::int64_t Normalization::hash() const {
    InputHash hash;
    hash.add(means_path_);
    hash.add(stds_path_);
    for (const auto& [name, stats] : stats_) {
        hash.add(name);
        hash.add(std::span<const double>(stats.means));
        hash.add(std::span<const double>(stats.stds));
    }
    return hash.value();
}

template <class T>
void normalize(std::span<const T> in, std::span<T> out, std::int64_t points, const ChannelStats& stats) {
    const auto channels = static_cast<std::int64_t>(stats.means.size());
    if (out.size() != in.size() || points <= 0 || channels == 0 ||
        in.size() % static_cast<std::size_t>(points * channels) != 0) {
        throw ArgumentError("normalize: " + std::to_string(in.size()) + " values into " + std::to_string(out.size()) +
                            " for fields of " + std::to_string(points) + " points and " + std::to_string(channels) +
                            " channels");
    }
    const auto fields = static_cast<std::int64_t>(in.size()) / points;
    for (std::int64_t f = 0; f < fields; ++f) {
        const auto c = static_cast<std::size_t>(f % channels);
        const auto mean = static_cast<T>(stats.means[c]);
        const auto scale = static_cast<T>(stats.stds[c]);
        const std::size_t first = static_cast<std::size_t>(f * points);
        for (std::size_t k = first; k < first + static_cast<std::size_t>(points); ++k) {
            out[k] = (in[k] - mean) / scale;
        }
    }
}

template void normalize<float>(std::span<const float>, std::span<float>, std::int64_t, const ChannelStats&);
template void normalize<double>(std::span<const double>, std::span<double>, std::int64_t, const ChannelStats&);

}  // namespace gridshard::io
