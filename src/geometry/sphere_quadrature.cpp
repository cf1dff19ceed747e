// The latitude quadratures of the spherical transform (include/gridshard/geometry/sphere_quadrature.hpp).

#include "gridshard/geometry/sphere_quadrature.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "../core/names.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

constexpr double pi = std::numbers::pi;

constexpr detail::NameTable<SphereGrid, 3> grid_names{{
    {"legendre-gauss", SphereGrid::legendre_gauss},
    {"equiangular", SphereGrid::equiangular},
    {"lobatto", SphereGrid::lobatto},
}};

// P_n(x) and P_{n-1}(x) by the three-term recurrence.
std::pair<double, double> legendre_pair(std::int64_t n, double x) {
    double p_previous = 1.0;
    double p = x;
    if (n == 0) {
        return {1.0, 0.0};
    }
    for (std::int64_t k = 2; k <= n; ++k) {
        const auto kd = static_cast<double>(k);
        const double next = ((2.0 * kd - 1.0) * x * p - (kd - 1.0) * p_previous) / kd;
        p_previous = p;
        p = next;
    }
    return {p, p_previous};
}

SphereQuadrature gauss_legendre(std::int64_t n) {
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const auto nd = static_cast<double>(n);
    for (std::int64_t i = 0; i < (n + 1) / 2; ++i) {
        // Newton from Tricomi's estimate of the i-th largest root.
        double x = std::cos(pi * (static_cast<double>(i) + 0.75) / (nd + 0.5));
        double derivative = 1.0;
        for (int iteration = 0; iteration < 100; ++iteration) {
            const auto [p, p_previous] = legendre_pair(n, x);
            derivative = nd * (x * p - p_previous) / (x * x - 1.0);
            const double step = p / derivative;
            x -= step;
            if (std::abs(step) < 1e-16) {
                break;
            }
        }
        const auto [p, p_previous] = legendre_pair(n, x);
        derivative = nd * (x * p - p_previous) / (x * x - 1.0);
        const double weight = 2.0 / ((1.0 - x * x) * derivative * derivative);
        const auto hi = static_cast<std::size_t>(n - 1 - i);
        const auto lo = static_cast<std::size_t>(i);
        q.nodes[hi] = x;
        q.nodes[lo] = -x;
        q.weights[hi] = weight;
        q.weights[lo] = weight;
    }
    if (n % 2 == 1) {
        q.nodes[static_cast<std::size_t>(n / 2)] = 0.0;
    }
    return q;
}

SphereQuadrature gauss_lobatto(std::int64_t n) {
    if (n < 2) {
        throw ArgumentError("nlat=" + std::to_string(n) + ": the lobatto grid needs at least 2 rows");
    }
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const std::int64_t degree = n - 1;
    const auto dd = static_cast<double>(degree);
    for (std::int64_t i = 0; i < n; ++i) {
        // Newton on (1 - x^2) P'_{n-1}(x) from the Chebyshev-Gauss-Lobatto nodes.
        double x = -std::cos(pi * static_cast<double>(i) / dd);
        if (i > 0 && i < degree) {
            for (int iteration = 0; iteration < 100; ++iteration) {
                const auto [p, p_previous] = legendre_pair(degree, x);
                // q(x) = P_{d-1} - x P_d is proportional to (1 - x^2) P'_d; q'(x) = -(d + 1) P_d.
                const double value = p_previous - x * p;
                const double slope = -(dd + 1.0) * p;
                const double step = value / slope;
                x -= step;
                if (std::abs(step) < 1e-16) {
                    break;
                }
            }
        }
        const double p = legendre_pair(degree, x).first;
        q.nodes[static_cast<std::size_t>(i)] = x;
        q.weights[static_cast<std::size_t>(i)] = 2.0 / (dd * (dd + 1.0) * p * p);
    }
    return q;
}

SphereQuadrature clenshaw_curtis(std::int64_t n) {
    if (n < 2) {
        throw ArgumentError("nlat=" + std::to_string(n) + ": the equiangular grid needs at least 2 rows");
    }
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const std::int64_t intervals = n - 1;
    const auto nd = static_cast<double>(intervals);
    for (std::int64_t j = 0; j <= intervals; ++j) {
        const double theta = pi * static_cast<double>(intervals - j) / nd;  // ascending nodes: theta from pi to 0
        q.nodes[static_cast<std::size_t>(j)] = std::cos(theta);
        double v = 1.0;
        const std::int64_t half = intervals / 2;
        for (std::int64_t k = 1; k <= half; ++k) {
            const auto kd = static_cast<double>(k);
            const double factor = (intervals % 2 == 0 && k == half) ? 1.0 : 2.0;  // Trefethen's clencurt
            v -= factor * std::cos(2.0 * kd * theta) / (4.0 * kd * kd - 1.0);
        }
        double weight = 2.0 * v / nd;
        if (j == 0 || j == intervals) {
            weight = intervals % 2 == 0 ? 1.0 / (nd * nd - 1.0) : 1.0 / (nd * nd);
        }
        q.weights[static_cast<std::size_t>(j)] = weight;
    }
    return q;
}

}  // namespace

SphereGrid parse_sphere_grid(std::string_view text) {
    return detail::parse_name(text, grid_names, "grid");
}

std::string_view to_string(SphereGrid grid) noexcept {
    return detail::name_of(grid, grid_names);
}

SphereQuadrature sphere_quadrature(SphereGrid grid, std::int64_t nlat) {
    if (nlat < 1) {
        throw ArgumentError("nlat=" + std::to_string(nlat) + " must be positive");
    }
    switch (grid) {
        case SphereGrid::legendre_gauss:
            return gauss_legendre(nlat);
        case SphereGrid::equiangular:
            return clenshaw_curtis(nlat);
        case SphereGrid::lobatto:
            return gauss_lobatto(nlat);
    }
    throw ArgumentError("grid: unknown value");
}

double latitude_offset_from_nodes_deg(SphereGrid grid, std::span<const double> lat_deg) {
    const auto n = static_cast<std::int64_t>(lat_deg.size());
    if (n < 1 || (grid != SphereGrid::legendre_gauss && n < 2)) {
        return 0.0;
    }
    const SphereQuadrature q = sphere_quadrature(grid, n);
    // The nodes ascend in cos(colatitude) = sin(latitude): south first. Compare in either order.
    double ascending = 0.0;
    double descending = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
        const double node_deg = std::asin(std::clamp(q.nodes[static_cast<std::size_t>(k)], -1.0, 1.0)) * 180.0 / pi;
        ascending = std::max(ascending, std::abs(lat_deg[static_cast<std::size_t>(k)] - node_deg));
        descending = std::max(descending, std::abs(lat_deg[static_cast<std::size_t>(n - 1 - k)] - node_deg));
    }
    return std::min(ascending, descending);
}

}  // namespace gridshard
