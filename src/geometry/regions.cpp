#include "gridshard/geometry/regions.hpp"

#include <charconv>
#include <cmath>
#include <numbers>

#include "gridshard/core/error.hpp"

namespace gridshard {

const std::vector<Region>& named_regions() {
    static const std::vector<Region> regions = {
        {"global", {}, "", ""},
        {"tropics", {-20.0, 20.0, 0.0, 360.0, true}, "", ""},
        {"northern_extratropics", {20.0, 90.0, 0.0, 360.0, true}, "", ""},
        {"southern_extratropics", {-90.0, -20.0, 0.0, 360.0, true}, "", ""},
    };
    return regions;
}

namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
        const std::size_t end = text.find(separator, start);
        parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) {
            return parts;
        }
        start = end + 1;
    }
}

double parse_degrees(std::string_view text, std::string_view whole) {
    double value = 0.0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
        throw ArgumentError(setting_name("regions") + " '" + std::string(whole) + "': '" + std::string(text) +
                            "' is not a number of degrees");
    }
    return value;
}

double wrap360(double lon) {
    const double r = std::fmod(lon, 360.0);
    return r < 0.0 ? r + 360.0 : r;
}

}  // namespace

Region parse_region(std::string_view text) {
    const std::vector<std::string_view> parts = split(text, ':');
    const std::string name(parts.front());
    if (name.empty()) {
        throw ArgumentError(setting_name("regions") + " '" + std::string(text) + "': the region needs a name");
    }
    if (parts.size() == 1) {
        for (const Region& r : named_regions()) {
            if (r.name == name) {
                return r;
            }
        }
        throw ArgumentError(setting_name("regions") + " '" + name +
                            "': not a named region (global, tropics, northern_extratropics, southern_extratropics); " +
                            "give NAME:lat0,lat1,lon0,lon1 or NAME:FILE:VARIABLE");
    }
    if (parts.size() == 3) {
        if (parts[1].empty() || parts[2].empty()) {
            throw ArgumentError(setting_name("regions") + " '" + std::string(text) +
                                "': a mask region is NAME:FILE:VARIABLE");
        }
        return {name, {}, std::string(parts[1]), std::string(parts[2])};
    }
    const std::vector<std::string_view> numbers = split(parts[1], ',');
    if (parts.size() != 2 || numbers.size() != 4) {
        throw ArgumentError(setting_name("regions") + " '" + std::string(text) +
                            "': expected NAME, NAME:lat0,lat1,lon0,lon1 or NAME:FILE:VARIABLE");
    }
    LatLonBox box{parse_degrees(numbers[0], text), parse_degrees(numbers[1], text), parse_degrees(numbers[2], text),
                  parse_degrees(numbers[3], text), false};
    if (box.south < -90.0 || box.north > 90.0 || box.south > box.north) {
        throw ArgumentError(setting_name("regions") + " '" + std::string(text) + "': latitudes " +
                            std::to_string(box.south) + ", " + std::to_string(box.north) +
                            " must satisfy -90 <= lat0 <= lat1 <= 90");
    }
    box.whole_longitude = std::abs(box.east - box.west) >= 360.0;
    return {name, box, "", ""};
}

bool in_box(const LatLonBox& box, double lat_deg, double lon_deg) noexcept {
    if (!(lat_deg >= box.south && lat_deg <= box.north)) {
        return false;
    }
    if (box.whole_longitude) {
        return true;
    }
    const double west = wrap360(box.west);
    const double east = wrap360(box.east);
    const double lon = wrap360(lon_deg);
    return west <= east ? (lon >= west && lon <= east) : (lon >= west || lon <= east);
}

AreaWeights region_weights(Weights weights, std::span<const double> lat_deg, std::span<const double> lon_deg,
                           const Box& box_of_rank, const LatLonBox& region) {
    const auto rows = box_of_rank.lat.size();
    const auto cols = box_of_rank.lon.size();
    const bool per_point = weights.per_point || !region.whole_longitude;
    AreaWeights out{std::vector<double>(static_cast<std::size_t>(per_point ? rows * cols : rows)), per_point};
    for (std::int64_t i = 0; i < rows; ++i) {
        const double lat = lat_deg[static_cast<std::size_t>(box_of_rank.lat.begin + i)];
        if (!per_point) {
            out.values[static_cast<std::size_t>(i)] =
                in_box(region, lat, 0.0) ? weights.values[static_cast<std::size_t>(i)] : 0.0;
            continue;
        }
        for (std::int64_t j = 0; j < cols; ++j) {
            const double lon = lon_deg[static_cast<std::size_t>(box_of_rank.lon.begin + j)];
            const auto k = static_cast<std::size_t>(i * cols + j);
            const double w = weights.per_point ? weights.values[k] : weights.values[static_cast<std::size_t>(i)];
            out.values[k] = in_box(region, lat, lon) ? w : 0.0;
        }
    }
    return out;
}

AreaWeights ace_regional_weights(Weights weights, std::span<const double> lat_deg, std::span<const double> lon_deg,
                                 const Box& box_of_rank, const LatLonBox& region) {
    AreaWeights out = region_weights(weights, lat_deg, lon_deg, box_of_rank, region);
    const auto cols = out.per_point ? box_of_rank.lon.size() : 1;
    for (std::int64_t i = 0; i < box_of_rank.lat.size(); ++i) {
        const double lat = lat_deg[static_cast<std::size_t>(box_of_rank.lat.begin + i)];
        for (std::int64_t j = 0; j < cols; ++j) {
            out.values[static_cast<std::size_t>(i * cols + j)] *= std::cos(lat * std::numbers::pi / 180.0);
        }
    }
    return out;
}

std::array<AreaWeights, 3> ace_tripole_weights(std::span<const double> lat_deg, std::span<const double> lon_deg,
                                               const Box& box_of_rank) {
    const AreaWeights ones{std::vector<double>(static_cast<std::size_t>(box_of_rank.lat.size()), 1.0), false};
    std::array<AreaWeights, 3> out;
    for (std::size_t k = 0; k < out.size(); ++k) {
        out[k] = ace_regional_weights(ones.view(), lat_deg, lon_deg, box_of_rank, ipo_tripole_boxes[k]);
    }
    return out;
}

AreaWeights mask_weights(Weights weights, const Box& box_of_rank, std::span<const double> mask) {
    const auto rows = box_of_rank.lat.size();
    const auto cols = box_of_rank.lon.size();
    if (mask.size() != static_cast<std::size_t>(rows * cols)) {
        throw ArgumentError("region mask: " + std::to_string(mask.size()) + " values for a box of " +
                            std::to_string(rows) + " x " + std::to_string(cols));
    }
    AreaWeights out{std::vector<double>(mask.size()), true};
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            const auto k = static_cast<std::size_t>(i * cols + j);
            const double m = std::isnan(mask[k]) ? 0.0 : mask[k];
            if (!(m >= 0.0) || !std::isfinite(m)) {
                throw ArgumentError("region mask: value " + std::to_string(mask[k]) + " at row " +
                                    std::to_string(box_of_rank.lat.begin + i) + ", column " +
                                    std::to_string(box_of_rank.lon.begin + j) + " is negative or infinite");
            }
            const double w = weights.per_point ? weights.values[k] : weights.values[static_cast<std::size_t>(i)];
            out.values[k] = w * m;
        }
    }
    return out;
}

}  // namespace gridshard
