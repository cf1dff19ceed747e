#include "row_kernels.hpp"

#include <numbers>

#include "gridshard/core/error.hpp"

namespace gridshard::detail {

RowWeights::RowWeights(Weights weights, const Box& box)
    : weights_(weights), rows_(box.lat.size()), cols_(box.lon.size()) {
    const std::int64_t expected = weights.per_point ? rows_ * cols_ : rows_;
    if (static_cast<std::int64_t>(weights.values.size()) != expected) {
        error_ = std::string("weights have ") + std::to_string(weights.values.size()) + " values but this rank's " +
                 (weights.per_point ? "points" : "rows") + " need " + std::to_string(expected);
        return;
    }
    for (double a : weights.values) {
        if (!std::isfinite(a) || a < 0.0) {
            error_ = "weights must be finite and non-negative, got " + std::to_string(a);
            return;
        }
    }
}

void RowWeights::add_total(PartialSums& sums, std::int64_t slot) const {
    if (!error_.empty()) {
        return;
    }
    for (std::int64_t i = 0; i < rows_; ++i) {
        if (per_point()) {
            sums.add_row(slot, points(i), cols_, 1.0);
        } else {
            sums.add_count(slot, row(i), cols_);
        }
    }
}

void check_gradient_grid(const GridShape& grid) {
    if (grid.nlat < 2 || grid.nlon < 2) {
        throw ArgumentError("gradient needs at least 2 points along each spatial dim, got nlat=" +
                            std::to_string(grid.nlat) + " nlon=" + std::to_string(grid.nlon));
    }
}

template <class T>
GradientRows<T>::GradientRows(const GridShape& grid, const Box& box, const GradientOptions& options,
                              std::span<const T> field, std::int64_t channels, const HaloBuffers<T>& halo,
                              std::int64_t field_index)
    : grid_(grid),
      box_(box),
      options_(options),
      field_(field),
      channels_(channels),
      halo_(&halo),
      halo_channel0_(field_index * channels),
      padded_(static_cast<std::size_t>(box.lon.size() + 2)),
      lat_difference_(static_cast<std::size_t>(box.lon.size())) {
    if (options.metres) {
        const double dlat = options.dlat_deg * std::numbers::pi / 180.0;
        lat_scale_ = 1.0 / (options.radius_m * dlat);
    }
}

template <class T>
void GradientRows<T>::row(std::int64_t c, std::int64_t i, double* out) {
    const std::int64_t rows = box_.lat.size();
    const std::int64_t cols = box_.lon.size();
    const std::int64_t gi = box_.lat.begin + i;
    const std::int64_t hc = halo_channel0_ + c;
    const T* here = field_.data() + (c * rows + i) * cols;
    // Rows above and below: from the shard, or the one-row halo strips at shard edges.
    auto neighbour_row = [&](Side side) -> const T* {
        const bool inside = side == Side::lat_prev ? i > 0 : i + 1 < rows;
        if (inside) {
            return here + (side == Side::lat_prev ? -cols : cols);
        }
        return halo_->has(side) ? halo_->strip(side).data() + hc * cols : nullptr;
    };
    const T* above = neighbour_row(Side::lat_prev);  // global row gi - 1
    const T* below = neighbour_row(Side::lat_next);  // global row gi + 1
    // The row with one halo cell each side, so the longitude stencil needs no branches inside.
    double* padded = padded_.data();
    for (std::int64_t j = 0; j < cols; ++j) {
        padded[j + 1] = static_cast<double>(here[j]);
    }
    padded[0] = halo_->has(Side::lon_prev) ? static_cast<double>(halo_->at(Side::lon_prev, hc, i, 0)) : 0.0;
    padded[cols + 1] = halo_->has(Side::lon_next) ? static_cast<double>(halo_->at(Side::lon_next, hc, i, 0)) : 0.0;

    double lon_scale = 1.0;
    if (options_.metres) {
        const double lat = options_.lat_deg[static_cast<std::size_t>(i)];
        const double cos_lat = std::abs(lat) == 90.0 ? 0.0 : std::cos(lat * std::numbers::pi / 180.0);
        const double dlon = options_.dlon_deg * std::numbers::pi / 180.0;
        lon_scale = cos_lat == 0.0 ? 0.0 : 1.0 / (options_.radius_m * cos_lat * dlon);
    }
    // torch.gradient: one-sided differences on the first and last global row, central ones inside.
    // One branch-free loop per case, so each vectorises.
    double* __restrict lat_difference = lat_difference_.data();
    if (gi == 0) {
        for (std::int64_t j = 0; j < cols; ++j) {
            lat_difference[j] = static_cast<double>(below[j]) - padded[j + 1];
        }
    } else if (gi == grid_.nlat - 1) {
        for (std::int64_t j = 0; j < cols; ++j) {
            lat_difference[j] = padded[j + 1] - static_cast<double>(above[j]);
        }
    } else {
        for (std::int64_t j = 0; j < cols; ++j) {
            lat_difference[j] = (static_cast<double>(below[j]) - static_cast<double>(above[j])) / 2.0;
        }
    }
    const double lat_scale = lat_scale_;
    auto magnitude = [&](std::int64_t j, double lon_difference) {
        const double lat_term = lat_difference[j] * lat_scale;
        const double lon_term = lon_difference * lon_scale;
        return std::sqrt(lat_term * lat_term + lon_term * lon_term);
    };
    for (std::int64_t j = 0; j < cols; ++j) {
        out[j] = magnitude(j, (padded[j + 2] - padded[j]) / 2.0);
    }
    // Likewise on the first and last global column, unless longitude is periodic.
    if (!options_.periodic_lon && box_.lon.begin == 0) {
        out[0] = magnitude(0, padded[2] - padded[1]);
    }
    if (!options_.periodic_lon && box_.lon.end == grid_.nlon) {
        out[cols - 1] = magnitude(cols - 1, padded[cols] - padded[cols - 1]);
    }
}

template class GradientRows<float>;
template class GradientRows<double>;

}  // namespace gridshard::detail
