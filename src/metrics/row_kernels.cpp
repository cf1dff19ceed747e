#include "row_kernels.hpp"

#include <algorithm>
#include <limits>
#include <numbers>

#include "../core/kernel_dispatch.hpp"
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

std::string gradient_options_error(const GradientOptions& options, std::int64_t rows) {
    if (!options.metres) {
        return {};
    }
    auto positive = [](double v) { return std::isfinite(v) && v > 0.0; };
    if (!positive(options.radius_m) || !positive(options.dlat_deg) || !positive(options.dlon_deg)) {
        return "gradient in metres needs positive, finite radius_m, dlat_deg and dlon_deg, got " +
               std::to_string(options.radius_m) + ", " + std::to_string(options.dlat_deg) + ", " +
               std::to_string(options.dlon_deg);
    }
    if (static_cast<std::int64_t>(options.lat_deg.size()) != rows) {
        return "gradient in metres needs the latitude of each of this rank's " + std::to_string(rows) + " rows, got " +
               std::to_string(options.lat_deg.size());
    }
    for (double lat : options.lat_deg) {
        if (!std::isfinite(lat) || lat < -90.0 || lat > 90.0) {
            return "gradient in metres: latitude must lie in [-90, 90], got " + std::to_string(lat);
        }
    }
    return {};
}

void check_gradient_grid(const GridShape& grid) {
    if (grid.nlat < 2 || grid.nlon < 2) {
        throw ArgumentError("gradient needs at least 2 points along each spatial dim, got nlat=" +
                            std::to_string(grid.nlat) + " nlon=" + std::to_string(grid.nlon));
    }
}

namespace {

// The magnitude of one point from its latitude and longitude differences of neighbours (exact for
// neighbours within a factor 2, and always for subnormal ones) and the factors that turn them into
// derivatives (the halving of a central difference times the spacing's scale), in the field's type T: the one
// formula every point goes through. When the terms are large or tiny the factors are scaled by a power of two
// (exact) before the one rounding of each term, so neither a halving nor a square loses bits to underflow
// (a subnormal difference included) and no square overflows; the terms are the same bits as unscaled ones
// would be wherever those are normal. Branch-free, so rows vectorise. The device path mirrors it step for step
// (python/gridshard/_device_gradient.py, `magnitudes`): a change here is a change there, or its tests fail.
template <class T>
inline T magnitude(T lat_difference, T lon_difference, T lat_factor, T lon_factor) noexcept {
    constexpr int range = std::numeric_limits<T>::max_exponent / 2 - 2;  // squares of 2^range stay finite
    constexpr int large_shift = range + 4;                               // 2^(2 range) after it: no overflow
    // Puts the square of the smallest subnormal difference's term above the normal minimum, and keeps the
    // square of anything below 2^-range finite.
    constexpr int tiny_shift = std::numeric_limits<T>::max_exponent * 3 / 4 + 4;  // float 100, double 772
    const T big = std::ldexp(T{1}, range);
    const T small = std::ldexp(T{1}, -range);
    const T largest = std::max(std::abs(lat_difference * lat_factor), std::abs(lon_difference * lon_factor));
    const bool large = largest > big;
    const bool tiny = largest < small;
    const T scale = large ? std::ldexp(T{1}, -large_shift) : tiny ? std::ldexp(T{1}, tiny_shift) : T{1};
    const T unscale = large ? std::ldexp(T{1}, large_shift) : tiny ? std::ldexp(T{1}, -tiny_shift) : T{1};
    const T lat_term = lat_difference * (lat_factor * scale);
    const T lon_term = lon_difference * (lon_factor * scale);
    return std::sqrt(lat_term * lat_term + lon_term * lon_term) * unscale;
}

}  // namespace

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
      halo_channel0_(field_index * channels) {
    if (options.metres) {
        const double dlat = options.dlat_deg * std::numbers::pi / 180.0;
        lat_scale_ = static_cast<T>(1.0 / (options.radius_m * dlat));
    }
}

template <class T>
typename GradientRows<T>::Stencil GradientRows<T>::stencil(std::int64_t c, std::int64_t i) const {
    const std::int64_t rows = box_.lat.size();
    const std::int64_t cols = box_.lon.size();
    const std::int64_t gi = box_.lat.begin + i;
    const std::int64_t hc = halo_channel0_ + c;
    Stencil s;
    s.here = field_.data() + (c * rows + i) * cols;
    // Rows above and below: from the shard, or the one-row halo strips at shard edges.
    auto neighbour_row = [&](Side side) -> const T* {
        const bool inside = side == Side::lat_prev ? i > 0 : i + 1 < rows;
        if (inside) {
            return s.here + (side == Side::lat_prev ? -cols : cols);
        }
        return halo_->has(side) ? halo_->strip(side).data() + hc * cols : nullptr;
    };
    s.above = neighbour_row(Side::lat_prev);  // global row gi - 1
    s.below = neighbour_row(Side::lat_next);  // global row gi + 1
    s.ahead = c * rows + i + 2 < channels_ * rows ? s.here + 2 * cols : nullptr;
    // The values left and right of the row: halo cells, or unused at a non-periodic global edge.
    const T left = halo_->has(Side::lon_prev) ? halo_->at(Side::lon_prev, hc, i, 0) : T{0};
    const T right = halo_->has(Side::lon_next) ? halo_->at(Side::lon_next, hc, i, 0) : T{0};

    T lon_scale = 1;
    if (options_.metres) {
        const double lat = options_.lat_deg[static_cast<std::size_t>(i)];
        const double cos_lat = std::abs(lat) == 90.0 ? 0.0 : std::cos(lat * std::numbers::pi / 180.0);
        const double dlon = options_.dlon_deg * std::numbers::pi / 180.0;
        lon_scale = static_cast<T>(cos_lat == 0.0 ? 0.0 : 1.0 / (options_.radius_m * cos_lat * dlon));
    }
    // torch.gradient: one-sided differences on the first and last global row, central ones inside.
    s.row_case = gi == 0 ? RowCase::first : gi == grid_.nlat - 1 ? RowCase::last : RowCase::interior;
    s.lat_factor = s.row_case == RowCase::interior ? lat_scale_ * T{0.5} : lat_scale_;
    s.lon_factor = lon_scale * T{0.5};  // central differences along longitude
    // The first and last column of the row: halo neighbours, or one-sided differences at the global
    // longitude edges unless longitude is periodic. (A one-column row needs both halo cells.)
    auto lat_difference = [&](std::int64_t j) -> T {
        return s.row_case == RowCase::first  ? GradientRows::lat_difference<RowCase::first>(s, j)
               : s.row_case == RowCase::last ? GradientRows::lat_difference<RowCase::last>(s, j)
                                             : GradientRows::lat_difference<RowCase::interior>(s, j);
    };
    auto value = [&](std::int64_t j) { return j < 0 ? left : j >= cols ? right : s.here[j]; };
    const bool west_edge = !options_.periodic_lon && box_.lon.begin == 0;
    const bool east_edge = !options_.periodic_lon && box_.lon.end == grid_.nlon;
    auto edge = [&](std::int64_t j) {
        const bool one_sided = (west_edge && j == 0) || (east_edge && j == cols - 1);
        const T lon_difference = (west_edge && j == 0)          ? value(1) - value(0)
                                 : (east_edge && j == cols - 1) ? value(cols - 1) - value(cols - 2)
                                                                : value(j + 1) - value(j - 1);
        return magnitude(lat_difference(j), lon_difference, s.lat_factor, one_sided ? lon_scale : s.lon_factor);
    };
    s.first = edge(0);
    s.last = edge(cols - 1);
    return s;
}

template <class T>
void GradientRows<T>::row(std::int64_t c, std::int64_t i, T* out) const {
    const std::int64_t cols = box_.lon.size();
    const Stencil s = stencil(c, i);
    switch (s.row_case) {
        case RowCase::first:
            stencil_row<RowCase::first>(s, cols, out);
            break;
        case RowCase::last:
            stencil_row<RowCase::last>(s, cols, out);
            break;
        case RowCase::interior:
            stencil_row<RowCase::interior>(s, cols, out);
            break;
    }
    out[0] = s.first;
    out[cols - 1] = s.last;
}

template <class T>
template <typename GradientRows<T>::RowCase row_case>
GRIDSHARD_KERNEL void GradientRows<T>::stencil_row(const Stencil& s, std::int64_t cols, T* __restrict out) const {
    // Interior columns in branch-free passes, so they vectorise (square root included: -fno-math-errno): the
    // unscaled formula first, and `magnitude`'s over the row again only where a point needed scaling (terms
    // beyond 2^+-62 in float), which geophysical fields never do. In blocks of four cache lines, each asking for
    // the matching part of the row `ahead` (a hint, no value changes): its first touch then overlaps this row's
    // arithmetic instead of stalling the next row's.
    constexpr std::int64_t block = 4 * 64 / static_cast<std::int64_t>(sizeof(T));
    unsigned any_scaled = 0;
    for (std::int64_t start = 1; start + 1 < cols; start += block) {
        prefetch_ahead(s, start, block, cols);
        const std::int64_t end = std::min(start + block, cols - 1);
        for (std::int64_t j = start; j < end; ++j) {
            bool needs_scaling = false;
            out[j] = interior_magnitude<row_case>(s, j, needs_scaling);
            any_scaled |= needs_scaling ? 1U : 0U;
        }
    }
    if (any_scaled != 0) {
        for (std::int64_t j = 1; j + 1 < cols; ++j) {
            out[j] =
                magnitude(lat_difference<row_case>(s, j), s.here[j + 1] - s.here[j - 1], s.lat_factor, s.lon_factor);
        }
    }
}

template class GradientRows<float>;
template class GradientRows<double>;

}  // namespace gridshard::detail
