// The adjoint of the gradient magnitude (include/gridshard/metrics/metrics.hpp): the per-shard kernel of the
// gradient metrics' backward. The stencil's transpose reads each neighbour's coefficient, so the coefficients travel
// by one padded halo exchange, as the field did for the magnitudes; each point's sum runs in a fixed order (its lat
// neighbours and itself, then its lon ones), the same on every layout. Fields and coefficients move in the field's
// type; each point's arithmetic is in double.

#include <cmath>
#include <string>

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

// The stencils of the points `begin .. begin + count` of an axis of `n` points, and (for the transpose) the
// coefficient each point's value gets from its neighbours' derivatives and its own: `from_before` is the
// coefficient of x[p] in the derivative at p - 1 (that stencil's `after`), `from_after` at p + 1 (its `before`),
// zero where that neighbour is beyond a non-periodic end.
struct AxisStencils {
    std::vector<Stencil> at;
    std::vector<double> from_before, from_here, from_after;
};

AxisStencils axis_stencils(std::int64_t begin, std::int64_t count, std::int64_t n, bool periodic) {
    AxisStencils s;
    for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t p = begin + k;
        s.at.push_back(stencil_at(p, n, periodic));
        s.from_before.push_back(periodic || p > 0 ? stencil_at((p - 1 + n) % n, n, periodic).after : 0.0);
        s.from_here.push_back(stencil_at(p, n, periodic).here);
        s.from_after.push_back(periodic || p < n - 1 ? stencil_at((p + 1) % n, n, periodic).before : 0.0);
    }
    return s;
}

}  // namespace

template <class T>
std::vector<T> gradient_magnitude_backward(const ShardedGrid& grid, FieldShard<T> x, std::span<const T> upstream,
                                           const GradientOptions& options) {
    const Box& box = grid.box();
    const GridShape g = grid.grid();
    std::string error = shard_error(x, box, "x");
    if (error.empty() && upstream.size() != x.values.size()) {
        error =
            "upstream has " + std::to_string(upstream.size()) + " values for x's " + std::to_string(x.values.size());
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

    // The field with its halo, in double; then per point the coefficients of its two derivatives.
    const AxisStencils lat = axis_stencils(box.lat.begin, rows, g.nlat, false);
    const AxisStencils lon = axis_stencils(box.lon.begin, cols, g.nlon, periodic);
    std::vector<T> padded(static_cast<std::size_t>(channels) * plane);
    halo.exchange_agreed<T>(x.values, channels, padded);
    const auto area = static_cast<std::size_t>(rows * cols);
    // In T: the coefficients are rounded once to the field's precision, which the gradient has anyway.
    std::vector<T> coefficients(2 * static_cast<std::size_t>(channels) * area);  // lat planes, then lon planes
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < rows; ++i) {
            const Stencil sy = lat.at[static_cast<std::size_t>(i)];
            const T* middle = padded.data() + static_cast<std::size_t>(c) * plane +
                              static_cast<std::size_t>((i + 1) * padded_cols + 1);
            const T* north = middle - padded_cols;
            const T* south = middle + padded_cols;
            const auto first = static_cast<std::size_t>((c * rows + i) * cols);
            T* cy = coefficients.data() + first;
            T* cx = coefficients.data() + static_cast<std::size_t>(channels) * area + first;
            for (std::int64_t j = 0; j < cols; ++j) {
                const Stencil sx = lon.at[static_cast<std::size_t>(j)];
                const double dy = sy.before * static_cast<double>(north[j]) + sy.here * static_cast<double>(middle[j]) +
                                  sy.after * static_cast<double>(south[j]);
                const double dx = sx.before * static_cast<double>(middle[j - 1]) +
                                  sx.here * static_cast<double>(middle[j]) +
                                  sx.after * static_cast<double>(middle[j + 1]);
                const double magnitude = std::sqrt(dy * dy + dx * dx);
                const double u = static_cast<double>(upstream[first + static_cast<std::size_t>(j)]);
                const bool counts = u != 0.0 && magnitude > 0.0 && std::isfinite(magnitude);
                cy[j] = static_cast<T>(counts ? u * dy / magnitude : 0.0);
                cx[j] = static_cast<T>(counts ? u * dx / magnitude : 0.0);
            }
        }
    }
    // The transpose: each point gathers its neighbours' coefficients and its own, in a fixed order.
    std::vector<T> around(2 * static_cast<std::size_t>(channels) * plane);
    halo.exchange_agreed<T>(coefficients, 2 * channels, around);
    std::vector<T> result(x.values.size());
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < rows; ++i) {
            const auto ii = static_cast<std::size_t>(i);
            const T* cy = around.data() + static_cast<std::size_t>(c) * plane +
                          static_cast<std::size_t>((i + 1) * padded_cols + 1);
            const T* cx = around.data() + static_cast<std::size_t>(channels + c) * plane +
                          static_cast<std::size_t>((i + 1) * padded_cols + 1);
            T* out = result.data() + static_cast<std::size_t>((c * rows + i) * cols);
            for (std::int64_t j = 0; j < cols; ++j) {
                const auto jj = static_cast<std::size_t>(j);
                const double sum = lat.from_before[ii] * static_cast<double>(cy[j - padded_cols]) +
                                   lat.from_here[ii] * static_cast<double>(cy[j]) +
                                   lat.from_after[ii] * static_cast<double>(cy[j + padded_cols]) +
                                   lon.from_before[jj] * static_cast<double>(cx[j - 1]) +
                                   lon.from_here[jj] * static_cast<double>(cx[j]) +
                                   lon.from_after[jj] * static_cast<double>(cx[j + 1]);
                out[j] = static_cast<T>(sum);
            }
        }
    }
    return result;
}

template std::vector<float> gradient_magnitude_backward<float>(const ShardedGrid&, FieldShard<float>,
                                                               std::span<const float>, const GradientOptions&);
template std::vector<double> gradient_magnitude_backward<double>(const ShardedGrid&, FieldShard<double>,
                                                                 std::span<const double>, const GradientOptions&);

}  // namespace gridshard
