// Area weights computed for one box at a time, against the whole-grid formulas. No MPI.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <numeric>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"

namespace gridshard {
namespace {

std::vector<double> quarter_degree_latitudes() {
    std::vector<double> lat(721);
    for (std::size_t i = 0; i < lat.size(); ++i) {
        lat[i] = -90.0 + 0.25 * static_cast<double>(i);
    }
    return lat;
}

TEST(CosLatWeights, BoxesConcatenateToTheGlobalWeights) {
    const auto lat = quarter_degree_latitudes();
    const AreaWeights all = cos_lat_weights(lat, 1440, {0, 721});
    EXPECT_FALSE(all.per_point);
    EXPECT_EQ(all.values.front(), 0.0);  // the poles weigh nothing
    EXPECT_EQ(all.values.back(), 0.0);
    EXPECT_NEAR(std::accumulate(all.values.begin(), all.values.end(), 0.0) * 1440, 1.0, 1e-12);
    const AreaWeights part = cos_lat_weights(lat, 1440, {300, 361});
    for (std::size_t k = 0; k < part.values.size(); ++k) {
        EXPECT_EQ(part.values[k], all.values[300 + k]);
    }
    double cosines = 0.0;
    for (double l : lat) {
        cosines += std::abs(l) == 90.0 ? 0.0 : std::cos(l * std::numbers::pi / 180.0);
    }
    EXPECT_NEAR(all.values[360], 1.0 / (1440 * cosines), 1e-18);  // the equator
    EXPECT_THROW((void)cos_lat_weights(lat, 1440, {700, 722}), ArgumentError);
    const std::vector<double> bad{0.0, 91.0};
    EXPECT_THROW((void)cos_lat_weights(bad, 4, {0, 2}), ArgumentError);
}

TEST(CellAreaWeights, ExactSphericalAreas) {
    const auto lat = quarter_degree_latitudes();
    const auto lat_bounds = bounds_from_centres(lat, true);
    EXPECT_EQ(lat_bounds.front(), -90.0);  // clamped at the pole
    EXPECT_EQ(lat_bounds[1], -89.875);
    std::vector<double> lon(1440);
    for (std::size_t j = 0; j < lon.size(); ++j) {
        lon[j] = 0.25 * static_cast<double>(j);
    }
    const auto lon_bounds = bounds_from_centres(lon, false);
    const AreaWeights all = cell_area_weights(lat_bounds, lon_bounds, {{0, 721}, {0, 1440}});
    EXPECT_FALSE(all.per_point);  // equal longitude widths: one weight per row
    EXPECT_NEAR(std::accumulate(all.values.begin(), all.values.end(), 0.0) * 1440, 1.0, 1e-12);
    // Each row's weight is its great-circle quadrilateral's area over the grid's total.
    EXPECT_NEAR(all.values[100] / all.values[200],
                spherical_cell_area(lat_bounds[200], lat_bounds[201], 0.0, 0.25) /
                    spherical_cell_area(lat_bounds[400], lat_bounds[401], 0.0, 0.25),
                1e-12);
    // Small cells are nearly latitude bands; a polar cell is a triangle.
    const double band = 2.0 * std::numbers::pi / 180.0 * 2.0 * std::sin(std::numbers::pi / 180.0);
    EXPECT_NEAR(spherical_cell_area(-1.0, 1.0, 0.0, 2.0) / band, 1.0, 2e-4);
    EXPECT_NEAR(spherical_cell_area(89.0, 90.0, 10.0, 20.0), spherical_cell_area(89.0, 90.0, 100.0, 110.0), 1e-15);
    EXPECT_GT(spherical_cell_area(89.0, 90.0, 10.0, 20.0), 0.0);
    // Uneven longitudes give per-point weights.
    const std::vector<double> uneven_lon{0, 10, 10, 30, 30, 60};
    const AreaWeights points = cell_area_weights(lat_bounds, uneven_lon, {{10, 12}, {1, 3}});
    EXPECT_TRUE(points.per_point);
    ASSERT_EQ(points.values.size(), 4u);
    EXPECT_NEAR(points.values[1] / points.values[0],
                spherical_cell_area(lat_bounds[20], lat_bounds[21], 30.0, 60.0) /
                    spherical_cell_area(lat_bounds[20], lat_bounds[21], 10.0, 30.0),
                1e-12);
}

TEST(SliceWeights, PerRowAndPerPoint) {
    const GridShape grid{3, 4};
    const std::vector<double> rows{1, 2, 3};
    EXPECT_EQ(slice_weights(rows, grid, {{1, 3}, {0, 2}}).values, (std::vector<double>{2, 3}));
    std::vector<double> points(12);
    std::iota(points.begin(), points.end(), 0.0);
    const AreaWeights p = slice_weights(points, grid, {{1, 3}, {2, 4}});
    EXPECT_TRUE(p.per_point);
    EXPECT_EQ(p.values, (std::vector<double>{6, 7, 10, 11}));
    EXPECT_THROW((void)slice_weights(std::vector<double>(5), grid, {{0, 1}, {0, 1}}), ArgumentError);
}

}  // namespace
}  // namespace gridshard
