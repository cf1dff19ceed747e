#include "gridshard/geometry/area_weights.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard {

std::string_view to_string(AreaWeighting weighting) noexcept {
    return weighting == AreaWeighting::cos_lat ? "cos_lat" : "cell_area";
}

AreaWeighting parse_area_weighting(std::string_view text) {
    if (text == "cos_lat") {
        return AreaWeighting::cos_lat;
    }
    if (text == "cell_area") {
        return AreaWeighting::cell_area;
    }
    throw ArgumentError("weights must be 'cos_lat' or 'cell_area', got '" + std::string(text) + "'");
}

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

// The unit vector at (lat, lon) in degrees.
std::array<double, 3> unit_vector(double lat_deg, double lon_deg) {
    const double lat = radians(lat_deg);
    const double lon = radians(lon_deg);
    return {std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), std::sin(lat)};
}

double dot(const std::array<double, 3>& a, const std::array<double, 3>& b) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// The area (steradians) of the spherical triangle abc with great-circle sides (Van Oosterom and
// Strackee 1983): tan(E/2) = |a.(b x c)| / (1 + a.b + b.c + c.a).
double triangle_area(const std::array<double, 3>& a, const std::array<double, 3>& b, const std::array<double, 3>& c) {
    const std::array<double, 3> bxc = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2], b[0] * c[1] - b[1] * c[0]};
    return 2.0 * std::atan2(std::abs(dot(a, bxc)), 1.0 + dot(a, b) + dot(b, c) + dot(c, a));
}

}  // namespace

double spherical_cell_area(double south_deg, double north_deg, double west_deg, double east_deg) {
    const auto sw = unit_vector(south_deg, west_deg);
    const auto se = unit_vector(south_deg, east_deg);
    const auto ne = unit_vector(north_deg, east_deg);
    const auto nw = unit_vector(north_deg, west_deg);
    return triangle_area(sw, se, ne) + triangle_area(sw, ne, nw);
}

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
    auto lat_edges = [&](std::int64_t i) {
        return std::pair{std::clamp(lat_bounds_deg[static_cast<std::size_t>(2 * i)], -90.0, 90.0),
                         std::clamp(lat_bounds_deg[static_cast<std::size_t>(2 * i + 1)], -90.0, 90.0)};
    };
    auto lon_edges = [&](std::int64_t j) {
        return std::pair{lon_bounds_deg[static_cast<std::size_t>(2 * j)],
                         lon_bounds_deg[static_cast<std::size_t>(2 * j + 1)]};
    };
    std::vector<double> lon_width(static_cast<std::size_t>(nlon));
    for (std::int64_t j = 0; j < nlon; ++j) {
        const auto [west, east] = lon_edges(j);
        lon_width[static_cast<std::size_t>(j)] = std::abs(east - west);
    }
    // Widths equal to rounding (bounds written in decimal) count as equal: one weight per row, and the
    // grid's total is nlon times a column's, computed from the rows alone.
    const double width = lon_width.front();
    const bool uniform_lon =
        std::all_of(lon_width.begin(), lon_width.end(), [&](double w) { return std::abs(w - width) <= 1e-12 * width; });
    AreaWeights weights;
    if (uniform_lon) {
        std::vector<double> row_area(static_cast<std::size_t>(nlat));
        for (std::int64_t i = 0; i < nlat; ++i) {
            const auto [south, north] = lat_edges(i);
            row_area[static_cast<std::size_t>(i)] = spherical_cell_area(south, north, 0.0, width);
        }
        const double total = exact_total(row_area) * static_cast<double>(nlon);
        if (!(total > 0.0)) {
            throw ArgumentError("cell_area_weights: the cells have zero total area");
        }
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            weights.values.push_back(row_area[static_cast<std::size_t>(i)] / total);
        }
        return weights;
    }
    // Uneven longitudes: every cell's own area; the total needs every cell (computed, not stored).
    ExactSum total_sum;
    for (std::int64_t i = 0; i < nlat; ++i) {
        const auto [south, north] = lat_edges(i);
        for (std::int64_t j = 0; j < nlon; ++j) {
            const auto [west, east] = lon_edges(j);
            total_sum.add(spherical_cell_area(south, north, west, east));
        }
    }
    const double total = total_sum.to_double();
    if (!(total > 0.0)) {
        throw ArgumentError("cell_area_weights: the cells have zero total area");
    }
    weights.per_point = true;
    for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
        const auto [south, north] = lat_edges(i);
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
            const auto [west, east] = lon_edges(j);
            weights.values.push_back(spherical_cell_area(south, north, west, east) / total);
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
