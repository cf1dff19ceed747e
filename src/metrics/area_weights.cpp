#include "gridshard/metrics/area_weights.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {
namespace {

double radians(double degrees) {
    return degrees * std::numbers::pi / 180.0;
}

double cos_lat(double lat_deg) {
    if (!std::isfinite(lat_deg) || lat_deg < -90.0 || lat_deg > 90.0) {
        throw ArgumentError("latitude must lie in [-90, 90], got " + std::to_string(lat_deg));
    }
    return std::abs(lat_deg) == 90.0 ? 0.0 : std::cos(radians(lat_deg));
}

void check_bounds(std::span<const double> bounds, const char* name) {
    if (bounds.size() % 2 != 0 || bounds.empty()) {
        throw ArgumentError(std::string(name) + " bounds must have shape (n, 2), got " + std::to_string(bounds.size()) +
                            " values");
    }
    for (double b : bounds) {
        if (!std::isfinite(b)) {
            throw ArgumentError(std::string(name) + " bounds must be finite, got " + std::to_string(b));
        }
    }
}

// Sums exactly, so every rank gets the same normaliser whatever rows it owns.
double exact_total(std::span<const double> values) {
    ExactSum sum;
    for (double v : values) {
        sum.add(v);
    }
    return sum.to_double();
}

}  // namespace

AreaWeights slice_weights(std::span<const double> global, const GridShape& grid, const Box& box) {
    AreaWeights weights;
    if (static_cast<std::int64_t>(global.size()) == grid.nlat) {
        weights.values.assign(global.begin() + box.lat.begin, global.begin() + box.lat.end);
        return weights;
    }
    if (static_cast<std::int64_t>(global.size()) != grid.nlat * grid.nlon) {
        throw ArgumentError("weights have " + std::to_string(global.size()) + " values but must be (nlat)=" +
                            std::to_string(grid.nlat) + " or (nlat, nlon)=" + std::to_string(grid.nlat * grid.nlon));
    }
    weights.per_point = true;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        const auto row = global.begin() + i * grid.nlon;
        weights.values.insert(weights.values.end(), row + box.lon.begin, row + box.lon.end);
    }
    return weights;
}

AreaWeights cos_lat_weights(std::span<const double> lat_deg, std::int64_t nlon, const Range& rows) {
    const auto nlat = static_cast<std::int64_t>(lat_deg.size());
    if (nlon < 1 || nlat < 1 || rows.begin < 0 || rows.end > nlat || rows.begin > rows.end) {
        throw ArgumentError("cos_lat_weights: rows [" + std::to_string(rows.begin) + ", " + std::to_string(rows.end) +
                            ") must lie in the " + std::to_string(nlat) + " latitudes, nlon=" + std::to_string(nlon) +
                            " must be >= 1");
    }
    std::vector<double> cosines(lat_deg.size());
    std::transform(lat_deg.begin(), lat_deg.end(), cosines.begin(), cos_lat);
    const double total = exact_total(cosines) * static_cast<double>(nlon);
    if (!(total > 0.0)) {
        throw ArgumentError("cos_lat_weights: every latitude is a pole, so the total weight is 0");
    }
    AreaWeights weights;
    for (std::int64_t i = rows.begin; i < rows.end; ++i) {
        weights.values.push_back(cosines[static_cast<std::size_t>(i)] / total);
    }
    return weights;
}

AreaWeights cell_area_weights(std::span<const double> lat_bounds_deg, std::span<const double> lon_bounds_deg,
                              const Box& box) {
    check_bounds(lat_bounds_deg, "latitude");
    check_bounds(lon_bounds_deg, "longitude");
    const auto nlat = static_cast<std::int64_t>(lat_bounds_deg.size() / 2);
    const auto nlon = static_cast<std::int64_t>(lon_bounds_deg.size() / 2);
    if (box.lat.end > nlat || box.lon.end > nlon) {
        throw ArgumentError("cell_area_weights: box exceeds the " + std::to_string(nlat) + " x " +
                            std::to_string(nlon) + " cells of the bounds");
    }
    std::vector<double> lat_extent(static_cast<std::size_t>(nlat));
    for (std::int64_t i = 0; i < nlat; ++i) {
        const double a = std::clamp(lat_bounds_deg[static_cast<std::size_t>(2 * i)], -90.0, 90.0);
        const double b = std::clamp(lat_bounds_deg[static_cast<std::size_t>(2 * i + 1)], -90.0, 90.0);
        lat_extent[static_cast<std::size_t>(i)] = std::abs(std::sin(radians(b)) - std::sin(radians(a)));
    }
    std::vector<double> lon_extent(static_cast<std::size_t>(nlon));
    for (std::int64_t j = 0; j < nlon; ++j) {
        lon_extent[static_cast<std::size_t>(j)] = radians(std::abs(lon_bounds_deg[static_cast<std::size_t>(2 * j + 1)] -
                                                                   lon_bounds_deg[static_cast<std::size_t>(2 * j)]));
    }
    const double lat_total = exact_total(lat_extent);
    const double total = lat_total * exact_total(lon_extent);
    if (!(total > 0.0)) {
        throw ArgumentError("cell_area_weights: the cells have zero total area");
    }
    AreaWeights weights;
    // Widths equal to rounding (bounds written in decimal) count as equal: one weight per row.
    const bool uniform_lon = std::all_of(lon_extent.begin(), lon_extent.end(), [&](double w) {
        return std::abs(w - lon_extent.front()) <= 1e-12 * lon_extent.front();
    });
    if (uniform_lon) {
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            weights.values.push_back(lat_extent[static_cast<std::size_t>(i)] / lat_total / static_cast<double>(nlon));
        }
        return weights;
    }
    weights.per_point = true;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
            weights.values.push_back(lat_extent[static_cast<std::size_t>(i)] * lon_extent[static_cast<std::size_t>(j)] /
                                     total);
        }
    }
    return weights;
}

std::vector<double> bounds_from_centres(std::span<const double> centres_deg, bool clamp_to_poles) {
    const std::size_t n = centres_deg.size();
    if (n < 2) {
        throw ArgumentError("bounds_from_centres: need at least 2 centres, got " + std::to_string(n));
    }
    std::vector<double> bounds(2 * n);
    for (std::size_t k = 0; k < n; ++k) {
        const double lower =
            k == 0 ? centres_deg[0] - (centres_deg[1] - centres_deg[0]) / 2 : (centres_deg[k - 1] + centres_deg[k]) / 2;
        const double upper = k + 1 == n ? centres_deg[n - 1] + (centres_deg[n - 1] - centres_deg[n - 2]) / 2
                                        : (centres_deg[k] + centres_deg[k + 1]) / 2;
        bounds[2 * k] = clamp_to_poles ? std::clamp(lower, -90.0, 90.0) : lower;
        bounds[2 * k + 1] = clamp_to_poles ? std::clamp(upper, -90.0, 90.0) : upper;
    }
    return bounds;
}

}  // namespace gridshard
