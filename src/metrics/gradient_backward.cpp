// The adjoint of the gradient magnitude (include/gridshard/metrics/metrics.hpp): the per-shard kernel of the
// gradient metrics' backward. The stencil's transpose reads each neighbour's coefficient, so the coefficients travel
// by one padded halo exchange, as the field did for the magnitudes; each point's sum runs in a fixed order (its lat
// neighbours and itself, then its lon ones), the same on every layout. Fields and coefficients move in the field's
// type; each point's arithmetic is in double. The Python module's device path repeats this kernel in torch
// operations (python/gridshard/_device_gradient.py, magnitude_adjoint): a change here is made there too, and
// tests/python/test_device_path.py compares the two bit for bit.

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "../core/kernel_dispatch.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "metric_support.hpp"

namespace gridshard {

using namespace detail;  // NOLINT(google-build-using-namespace): the metrics layer's own helpers

namespace {

// torch.gradient's stencil along an axis of `n` points at global index `p` (unit spacing; one-sided at the ends
// unless periodic): the derivative is `before x[p-1] + here x[p] + after x[p+1]`.
struct Stencil {
    double before = -0.5;
    double here = 0.0;
    double after = 0.5;
};

Stencil stencil_at(std::int64_t p, std::int64_t n, bool periodic) {
    if (periodic || (p > 0 && p < n - 1)) {
        return {};
    }
    return p == 0 ? Stencil{0.0, -1.0, 1.0} : Stencil{-1.0, 1.0, 0.0};
}

// The stencils of the points `begin .. begin + count` of an axis of `n` points, one array per coefficient (so the
// row loops below vectorise), and for the transpose the coefficient each point's value gets from its neighbours'
// derivatives and its own: `from_before` is the coefficient of x[p] in the derivative at p - 1 (that stencil's
// `after`), `from_after` at p + 1 (its `before`), zero where that neighbour is beyond a non-periodic end.
struct AxisStencils {
    std::vector<double> before, here, after;
    std::vector<double> from_before, from_here, from_after;
};

AxisStencils axis_stencils(std::int64_t begin, std::int64_t count, std::int64_t n, bool periodic) {
    AxisStencils s;
    for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t p = begin + k;
        const Stencil at = stencil_at(p, n, periodic);
        s.before.push_back(at.before);
        s.here.push_back(at.here);
        s.after.push_back(at.after);
        s.from_before.push_back(periodic || p > 0 ? stencil_at((p - 1 + n) % n, n, periodic).after : 0.0);
        s.from_here.push_back(at.here);
        s.from_after.push_back(periodic || p < n - 1 ? stencil_at((p + 1) % n, n, periodic).before : 0.0);
    }
    return s;
}

// One row of the forward's derivatives and the coefficients `u dy / |grad|`, `u dx / |grad|` (zero where the
// upstream gradient is zero or the magnitude is zero or not finite). `middle` is the row in the padded field
// (its first point), `north`/`south` the rows above and below; `sy` the row's lat stencil, `bx/hx/ax` the lon
// stencils per column. Each point's arithmetic is in double, in a fixed order.
template <class T>
GRIDSHARD_KERNEL void coefficient_row(const T* north, const T* middle, const T* south, Stencil sy,
                                      const double* __restrict bx, const double* __restrict hx,
                                      const double* __restrict ax, const T* __restrict upstream, std::int64_t n,
                                      T* __restrict cy, T* __restrict cx) {
    constexpr double infinity = std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
        // A central difference does not read the point itself: a NaN there must not reach it (as 0 x NaN).
        const double here = static_cast<double>(middle[j]);
        const double dy = sy.before * static_cast<double>(north[j]) + (sy.here != 0.0 ? sy.here * here : 0.0) +
                          sy.after * static_cast<double>(south[j]);
        const double dx = bx[j] * static_cast<double>(middle[j - 1]) + (hx[j] != 0.0 ? hx[j] * here : 0.0) +
                          ax[j] * static_cast<double>(middle[j + 1]);
        const double magnitude = std::sqrt(dy * dy + dx * dx);
        const double u = static_cast<double>(upstream[j]);
        // NaN fails both comparisons, so only a positive finite magnitude with a non-zero u counts (`&`, no
        // branch: the loop vectorises).
        const bool counts = (u != 0.0) & (magnitude > 0.0) & (magnitude < infinity);
        const double ratio = u / magnitude;  // formed everywhere, used where the point counts (dy, dx may be NaN)
        cy[j] = static_cast<T>(counts ? dy * ratio : 0.0);
        cx[j] = static_cast<T>(counts ? dx * ratio : 0.0);
    }
}

// One row of the transpose: each point's neighbours' coefficients and its own, lat then lon, in a fixed order.
// `cy`/`cx` are the row in the padded coefficient planes, `stride` their row length.
template <class T>
GRIDSHARD_KERNEL void transpose_row(const T* cy, const T* cx, std::int64_t stride, Stencil from_lat,
                                    const double* __restrict fb, const double* __restrict fh,
                                    const double* __restrict fa, std::int64_t n, T* __restrict out) {
    for (std::int64_t j = 0; j < n; ++j) {
        const double sum =
            from_lat.before * static_cast<double>(cy[j - stride]) + from_lat.here * static_cast<double>(cy[j]) +
            from_lat.after * static_cast<double>(cy[j + stride]) + fb[j] * static_cast<double>(cx[j - 1]) +
            fh[j] * static_cast<double>(cx[j]) + fa[j] * static_cast<double>(cx[j + 1]);
        out[j] = static_cast<T>(sum);
    }
}

}  // namespace

template <class T>
void gradient_magnitude_backward(const ShardedGrid& grid, FieldShard<T> x, std::span<const T> upstream,
                                 std::span<T> gradient, const GradientOptions& options) {
    const Box& box = grid.box();
    const GridShape g = grid.grid();
    std::string error = shard_error(x, box, "x");
    if (error.empty() && (upstream.size() != x.values.size() || gradient.size() != x.values.size())) {
        error = "upstream and gradient have " + std::to_string(upstream.size()) + " and " +
                std::to_string(gradient.size()) + " values for x's " + std::to_string(x.values.size());
    }
    if (error.empty() && options.metres) {
        error = "gradient_magnitude_backward: unit spacing only (options.metres is not supported)";
    }
    check_gradient_grid(g);  // the global grid: alike on every rank
    check_arguments(grid, error, x.channels);
    const std::int64_t channels = x.channels;
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    const bool periodic = options.periodic_lon;
    const PaddedHaloExchange halo(grid.mesh(), grid.decomposition(), {.width = 1, .periodic_lon = periodic});
    const std::int64_t padded_cols = halo.padded_cols();
    const auto plane = static_cast<std::size_t>(halo.padded_rows() * padded_cols);
    const auto area = static_cast<std::size_t>(rows * cols);
    const auto offset = [&](std::int64_t plane_index, std::int64_t i) {  // row i's first point in a padded plane
        return static_cast<std::size_t>(plane_index) * plane + static_cast<std::size_t>((i + 1) * padded_cols + 1);
    };
    const auto planes = static_cast<std::size_t>(channels);

    // Two buffers, written before they are read (so not zeroed): `padded` holds the field with its halo (its first
    // C planes), then the coefficients with theirs (2C planes); `coefficients` the compact coefficients between.
    const std::unique_ptr<T[]> padded = std::make_unique_for_overwrite<T[]>(2 * planes * plane);
    const std::unique_ptr<T[]> coefficients = std::make_unique_for_overwrite<T[]>(2 * planes * area);
    const std::span<T> field_padded(padded.get(), planes * plane);
    const std::span<T> coefficients_padded(padded.get(), 2 * planes * plane);
    const std::span<T> compact(coefficients.get(), 2 * planes * area);  // lat planes, then lon planes

    // Per point the coefficients of its two derivatives, in T: rounded once to the field's precision, which the
    // gradient has anyway.
    const AxisStencils lat = axis_stencils(box.lat.begin, rows, g.nlat, false);
    const AxisStencils lon = axis_stencils(box.lon.begin, cols, g.nlon, periodic);
    halo.exchange_agreed<T>(x.values, channels, field_padded);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < rows; ++i) {
            const auto ii = static_cast<std::size_t>(i);
            const T* middle = field_padded.data() + offset(c, i);
            const auto first = static_cast<std::size_t>((c * rows + i) * cols);
            coefficient_row<T>(middle - padded_cols, middle, middle + padded_cols,
                               {lat.before[ii], lat.here[ii], lat.after[ii]}, lon.before.data(), lon.here.data(),
                               lon.after.data(), upstream.data() + first, cols, compact.data() + first,
                               compact.data() + planes * area + first);
        }
    }
    // The transpose: each point gathers its neighbours' coefficients and its own.
    halo.exchange_agreed<T>(compact, 2 * channels, coefficients_padded);
    const T* around = coefficients_padded.data();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < rows; ++i) {
            const auto ii = static_cast<std::size_t>(i);
            transpose_row<T>(around + offset(c, i), around + offset(channels + c, i), padded_cols,
                             {lat.from_before[ii], lat.from_here[ii], lat.from_after[ii]}, lon.from_before.data(),
                             lon.from_here.data(), lon.from_after.data(), cols,
                             gradient.data() + static_cast<std::size_t>((c * rows + i) * cols));
        }
    }
}

template void gradient_magnitude_backward<float>(const ShardedGrid&, FieldShard<float>, std::span<const float>,
                                                 std::span<float>, const GradientOptions&);
template void gradient_magnitude_backward<double>(const ShardedGrid&, FieldShard<double>, std::span<const double>,
                                                  std::span<double>, const GradientOptions&);

}  // namespace gridshard
