// ACE's SmoothFloodFill on shards (include/gridshard/metrics/flood_fill.hpp). Every step is a stencil over a padded
// shard (PaddedHaloExchange), evaluated per point in a fixed order, so a point's value does not depend on where the
// shard edges fall; the only sum over ranks, the channel's mean, is exact. Only the channels that hold a NaN somewhere
// are filled: the others are returned as they are.

#include "gridshard/metrics/flood_fill.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "../comm/thread_blocks.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "row_kernels.hpp"

namespace gridshard {
namespace {

std::string options_error(const FloodFillOptions& options, const GridShape& grid) {
    if (options.num_steps < 0) {
        return "num_steps=" + std::to_string(options.num_steps) + " must be >= 0";
    }
    if (options.blur_kernel_size < 1 || options.blur_kernel_size % 2 == 0) {
        return "blur_kernel_size=" + std::to_string(options.blur_kernel_size) + " must be odd and >= 1";
    }
    if (!(options.blur_sigma > 0.0) || !std::isfinite(options.blur_sigma)) {
        return "blur_sigma=" + std::to_string(options.blur_sigma) + " must be positive and finite";
    }
    const std::int64_t half = options.blur_kernel_size / 2;
    if (half > grid.nlat || half > grid.nlon) {
        return "blur_kernel_size=" + std::to_string(options.blur_kernel_size) + " reaches " + std::to_string(half) +
               " cells beyond a grid of nlat=" + std::to_string(grid.nlat) + ", nlon=" + std::to_string(grid.nlon);
    }
    return {};
}

// The blur's taps: exp(-d^2 / (2 sigma^2)) for d = -half..half, over their sum (added in index order).
std::vector<double> gaussian_taps(int size, double sigma) {
    const int half = size / 2;
    std::vector<double> taps;
    double total = 0.0;
    for (int d = -half; d <= half; ++d) {
        taps.push_back(std::exp(-static_cast<double>(d * d) / (2.0 * sigma * sigma)));
        total += taps.back();
    }
    for (double& tap : taps) {
        tap /= total;
    }
    return taps;
}

// The sum of the 3 x 3 cells around (i, j) of a padded plane with a halo of one, row by row.
double box_sum(const double* padded, std::int64_t padded_cols, std::int64_t i, std::int64_t j) noexcept {
    double sum = 0.0;
    for (std::int64_t di = 0; di < 3; ++di) {
        const double* row = padded + (i + di) * padded_cols + j;
        sum += row[0];
        sum += row[1];
        sum += row[2];
    }
    return sum;
}

// The work of one fill: the channels that hold a NaN, `planes` of `rows x cols`.
struct Planes {
    std::int64_t planes = 0;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    [[nodiscard]] std::int64_t area() const noexcept { return rows * cols; }
    [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(planes * area()); }
};

// One 3x3 step over every point that is not yet valid: `update(plane, i, j, padded plane)` for each, after the halo
// of `stacked` (several fields of `shape.planes` planes each) was exchanged with `halo` (width 1).
template <class Update>
void each_invalid_point(const PaddedHaloExchange& halo, const Planes& shape, const std::vector<double>& stacked,
                        std::int64_t fields, std::vector<double>& padded, const std::vector<double>& valid,
                        Update update) {
    const std::int64_t channels = fields * shape.planes;
    padded.resize(static_cast<std::size_t>(channels * halo.padded_rows() * halo.padded_cols()));
    halo.exchange_agreed<double>(stacked, channels, padded);
    const int threads = detail::threads_for(shape.planes * shape.rows, shape.cols);
    GRIDSHARD_PRAGMA(omp parallel for num_threads(threads) schedule(static))
    for (std::int64_t pi = 0; pi < shape.planes * shape.rows; ++pi) {
        const std::int64_t p = pi / shape.rows;
        const std::int64_t i = pi % shape.rows;
        for (std::int64_t j = 0; j < shape.cols; ++j) {
            if (valid[static_cast<std::size_t>(p * shape.area() + i * shape.cols + j)] == 0.0) {
                update(p, i, j);
            }
        }
    }
}

}  // namespace

void validate_flood_fill(const FloodFillOptions& options, const GridShape& grid) {
    if (std::string error = options_error(options, grid); !error.empty()) {
        throw ArgumentError(error);
    }
}

FloodFillPlan::FloodFillPlan(const ShardedGrid& grid, const FloodFillOptions& options)
    : grid_(grid), options_(options), error_(options_error(options, grid.grid())) {
    if (error_.empty()) {
        taps_ = gaussian_taps(options.blur_kernel_size, options.blur_sigma);
    }
}

template <class T>
std::vector<double> FloodFillPlan::operator()(FieldShard<T> field) {
    const ShardedGrid& grid = grid_;
    const FloodFillOptions& options = options_;
    const ProcessMesh& mesh = grid.mesh();
    const Box& box = grid.box();
    std::string error = detail::shard_error(field, box, "data");
    if (error.empty()) {
        error = error_;
    }
    detail::agree_or_throw(mesh.spatial(), error,
                           {field.channels, static_cast<std::int64_t>(sizeof(T)), options.num_steps,
                            options.blur_kernel_size, std::bit_cast<std::int64_t>(options.blur_sigma)},
                           "smooth_flood_fill channels, element size, num_steps, blur_kernel_size, blur_sigma");
    const std::int64_t channels = field.channels;
    const std::int64_t area = box.area();
    std::vector<double> out(field.values.begin(), field.values.end());
    std::vector<std::int64_t> nans(static_cast<std::size_t>(channels), 0);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t n = 0; n < area; ++n) {
            nans[static_cast<std::size_t>(c)] += std::isnan(out[static_cast<std::size_t>(c * area + n)]) ? 1 : 0;
        }
    }
    spatial_reduce_sum<std::int64_t>(mesh, nans);
    std::vector<std::int64_t> filled;  // the channels with a NaN somewhere on the grid
    for (std::int64_t c = 0; c < channels; ++c) {
        if (nans[static_cast<std::size_t>(c)] > 0) {
            filled.push_back(c);
        }
    }
    if (filled.empty()) {
        return out;
    }
    const std::vector<double> ones(static_cast<std::size_t>(box.lat.size()), 1.0);
    const std::vector<double> mean = weighted_nanmean<T>(grid, field, Weights{ones, false});

    const Planes shape{static_cast<std::int64_t>(filled.size()), box.lat.size(), box.lon.size()};
    if (!step_halo_) {  // every rank alike: the channels to fill are the same on every rank
        step_halo_.emplace(mesh, grid.decomposition(),
                           PaddedHaloSpec{.width = 1, .periodic_lon = true, .pole = PoleRule::zero});
        blur_halo_.emplace(
            mesh, grid.decomposition(),
            PaddedHaloSpec{.width = options.blur_kernel_size / 2, .periodic_lon = true, .pole = PoleRule::replicate});
    }
    const PaddedHaloExchange& step_halo = *step_halo_;
    const std::int64_t step_cols = step_halo.padded_cols();
    const auto step_plane = static_cast<std::size_t>(step_halo.padded_rows() * step_cols);
    std::vector<double> valid0(shape.size());  // 1 where not NaN, else 0
    for (std::size_t p = 0; p < filled.size(); ++p) {
        const double* x = out.data() + filled[p] * area;
        for (std::int64_t n = 0; n < area; ++n) {
            valid0[p * static_cast<std::size_t>(area) + static_cast<std::size_t>(n)] = std::isnan(x[n]) ? 0.0 : 1.0;
        }
    }
    std::vector<double> padded;

    // 1. The interior: NaN points that num_steps dilations of the valid points leave unreached.
    std::vector<double> reached = valid0;
    for (int step = 0; step < options.num_steps; ++step) {
        each_invalid_point(step_halo, shape, reached, 1, padded, reached,
                           [&](std::int64_t p, std::int64_t i, std::int64_t j) {
                               const double* plane = padded.data() + static_cast<std::size_t>(p) * step_plane;
                               if (box_sum(plane, step_cols, i, j) > 0.0) {
                                   reached[static_cast<std::size_t>(p * shape.area() + i * shape.cols + j)] = 1.0;
                               }
                           });
    }

    // 2. Interior points to the mean, the others grown in from their valid neighbours. `state` stacks the values and
    // the validity, so one exchange a step carries both.
    std::vector<double> state(2 * shape.size());
    const double largest = std::numeric_limits<T>::max();
    for (std::size_t p = 0; p < filled.size(); ++p) {
        const double* x = out.data() + filled[p] * area;
        for (std::int64_t n = 0; n < area; ++n) {
            const std::size_t at = p * static_cast<std::size_t>(area) + static_cast<std::size_t>(n);
            double value = std::isnan(x[n]) ? 0.0 : std::isinf(x[n]) ? std::copysign(largest, x[n]) : x[n];
            double valid = valid0[at];
            if (valid == 0.0 && reached[at] == 0.0) {  // interior
                value = mean[static_cast<std::size_t>(filled[p])];
                valid = 1.0;
            }
            state[at] = value;
            state[shape.size() + at] = valid;
        }
    }
    std::vector<double> valid(state.begin() + static_cast<std::ptrdiff_t>(shape.size()), state.end());
    for (int step = 0; step < options.num_steps; ++step) {
        each_invalid_point(step_halo, shape, state, 2, padded, valid,
                           [&](std::int64_t p, std::int64_t i, std::int64_t j) {
                               const double* values = padded.data() + static_cast<std::size_t>(p) * step_plane;
                               const double* validity = values + static_cast<std::size_t>(shape.planes) * step_plane;
                               const double count = box_sum(validity, step_cols, i, j);
                               if (count > 0.0) {
                                   const auto at = static_cast<std::size_t>(p * shape.area() + i * shape.cols + j);
                                   state[at] = box_sum(values, step_cols, i, j) / count;
                                   state[shape.size() + at] = 1.0;
                               }
                           });
        std::copy(state.begin() + static_cast<std::ptrdiff_t>(shape.size()), state.end(), valid.begin());
    }

    // 3. Blend with the Gaussian blur across the original boundary: x b + blur(x) (1 - b), b = blur(valid0).
    const std::vector<double>& taps = taps_;
    const PaddedHaloExchange& blur_halo = *blur_halo_;
    std::copy(valid0.begin(), valid0.end(), state.begin() + static_cast<std::ptrdiff_t>(shape.size()));
    const std::int64_t blur_rows = blur_halo.padded_rows();
    const std::int64_t blur_cols = blur_halo.padded_cols();
    padded.resize(static_cast<std::size_t>(2 * shape.planes * blur_rows * blur_cols));
    blur_halo.exchange_agreed<double>(state, 2 * shape.planes, padded);
    const auto taps_count = static_cast<std::int64_t>(taps.size());
    const int threads = detail::threads_for(shape.planes * shape.rows, shape.cols * 4 * taps_count);
    GRIDSHARD_PRAGMA(omp parallel for num_threads(threads) schedule(static))
    for (std::int64_t pi = 0; pi < shape.planes * shape.rows; ++pi) {
        const std::int64_t p = pi / shape.rows;
        const std::int64_t i = pi % shape.rows;
        std::vector<double> along_lat(static_cast<std::size_t>(2 * blur_cols));  // values, then validity
        for (std::int64_t field_index = 0; field_index < 2; ++field_index) {
            const double* plane =
                padded.data() + static_cast<std::size_t>((field_index * shape.planes + p) * blur_rows * blur_cols);
            for (std::int64_t pc = 0; pc < blur_cols; ++pc) {
                double sum = 0.0;
                for (std::int64_t d = 0; d < taps_count; ++d) {
                    sum += taps[static_cast<std::size_t>(d)] * plane[(i + d) * blur_cols + pc];
                }
                along_lat[static_cast<std::size_t>(field_index * blur_cols + pc)] = sum;
            }
        }
        double* result = out.data() + filled[static_cast<std::size_t>(p)] * area + i * shape.cols;
        for (std::int64_t j = 0; j < shape.cols; ++j) {
            double blurred = 0.0;
            double weight = 0.0;
            for (std::int64_t d = 0; d < taps_count; ++d) {
                blurred += taps[static_cast<std::size_t>(d)] * along_lat[static_cast<std::size_t>(j + d)];
                weight += taps[static_cast<std::size_t>(d)] * along_lat[static_cast<std::size_t>(blur_cols + j + d)];
            }
            const double x = state[static_cast<std::size_t>(p * shape.area() + i * shape.cols + j)];
            result[j] = x * weight + blurred * (1.0 - weight);
        }
    }
    return out;
}

template <class T>
std::vector<double> smooth_flood_fill(const ShardedGrid& grid, FieldShard<T> field, const FloodFillOptions& options) {
    FloodFillPlan plan(grid, options);
    return plan(field);
}

template std::vector<double> FloodFillPlan::operator()<float>(FieldShard<float>);
template std::vector<double> FloodFillPlan::operator()<double>(FieldShard<double>);
template std::vector<double> smooth_flood_fill<float>(const ShardedGrid&, FieldShard<float>, const FloodFillOptions&);
template std::vector<double> smooth_flood_fill<double>(const ShardedGrid&, FieldShard<double>, const FloodFillOptions&);

}  // namespace gridshard
