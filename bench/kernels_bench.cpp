// Google Benchmark timings of the hot kernels on one rank, for profiling and regressions: the read
// bandwidth floor, the exact-sum block path against a plain double sum, the fused Evaluator, and the
// single metrics. Throughput counters (bytes or points per second) make sizes comparable.
//
// The metrics are MPI code even on one rank (a 1x1x1 mesh over MPI_COMM_SELF), so this has its own
// main that initialises MPI before Google Benchmark runs.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "bench_support.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "gridshard/numerics/fixed_point.hpp"

namespace gridshard::bench {
namespace {

constexpr std::int64_t suite_channels = 8;  // the one-rank suite figure's shape (make bench)

// The inputs, built once on first use and shared by every benchmark (they take a second to generate).
struct Inputs {
    ProcessMesh alone{Communicator::borrow(MPI_COMM_SELF), {1, 1, 1}};
    ShardedGrid grid{alone, quarter_degree};
    FieldPair fields = make_fields(quarter_degree, grid.box(), suite_channels);
    AreaWeights weights = cos_lat_weights(latitudes_deg(quarter_degree), quarter_degree.nlon, grid.box().lat);

    [[nodiscard]] std::int64_t plane() const { return quarter_degree.nlat * quarter_degree.nlon; }
    // The leading `channels` planes of truth or prediction.
    [[nodiscard]] FieldShard<float> truth(std::int64_t channels) const {
        return {std::span<const float>(fields.truth).first(static_cast<std::size_t>(channels * plane())), channels};
    }
    [[nodiscard]] FieldShard<float> prediction(std::int64_t channels) const {
        return {std::span<const float>(fields.prediction).first(static_cast<std::size_t>(channels * plane())),
                channels};
    }
};

// Owned here rather than a function-local static so that main can free the communicators before
// MPI_Finalize (a static would be destroyed after it).
std::unique_ptr<Inputs> g_inputs;

Inputs& inputs() {
    if (!g_inputs) {
        g_inputs = std::make_unique<Inputs>();
    }
    return *g_inputs;
}

void set_points(benchmark::State& state, std::int64_t points) {
    state.SetItemsProcessed(state.iterations() * points);
    // Seconds per point, shown with an SI prefix (2.5n is 2.5 ns per point).
    state.counters["time_per_point"] =
        benchmark::Counter(static_cast<double>(state.iterations() * points),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

// The memory-bound floor: one pass over truth and prediction, (8, 721, 1440) float32 each.
void read_bandwidth(benchmark::State& state) {
    const Inputs& in = inputs();
    const auto n = static_cast<std::int64_t>(in.fields.truth.size());
    for (auto _ : state) {
        benchmark::DoNotOptimize(read_both(in.fields.truth.data(), in.fields.prediction.data(), n));
    }
    state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<std::int64_t>(sizeof(float)));
}
BENCHMARK(read_bandwidth)->Unit(benchmark::kMillisecond);

// Row inputs of the sum kernels, one 721 x 1440 plane (4 MB as float, 8 MB as double: L3-resident on
// most machines, so these measure the arithmetic rather than memory). Float rows are what the metrics
// sum from the input directly (one integer digit per value); double rows, here the squares of the values,
// are what the Evaluator sums from its scratch rows (two digits per value).
template <class T>
const T* sum_rows();
template <>
const float* sum_rows<float>() {
    return inputs().fields.truth.data();
}
template <>
const double* sum_rows<double>() {
    static const std::vector<double> squares = [] {
        const Inputs& in = inputs();
        std::vector<double> out(static_cast<std::size_t>(in.plane()));
        for (std::size_t k = 0; k < out.size(); ++k) {
            const auto v = static_cast<double>(in.fields.truth[k]);
            out[k] = v * v;
        }
        return out;
    }();
    return squares.data();
}

// The exact-sum block path (add_exact_sum) over the rows of one plane.
template <class T>
void exact_sum_rows(benchmark::State& state) {
    const T* plane = sum_rows<T>();
    const std::int64_t cols = quarter_degree.nlon;
    for (auto _ : state) {
        ExactSum sum;
        for (std::int64_t i = 0; i < quarter_degree.nlat; ++i) {
            add_exact_sum(plane + i * cols, cols, 1.0, sum);
        }
        benchmark::DoNotOptimize(sum.to_double());
    }
    set_points(state, inputs().plane());
}
BENCHMARK_TEMPLATE(exact_sum_rows, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(exact_sum_rows, double)->Unit(benchmark::kMicrosecond);

// The squares' rows (the double rows above) through the fixed-point digits (numerics/fixed_point.hpp) on one
// grid that the plane's range proves: what the engine's fused pass spends per square and product term, without
// the sweep of exact_sum_rows. `two_digits` forces the two-digit form (rows of a wide range) where one would do.
void fixed_point_sum_rows(benchmark::State& state, bool two_digits) {
    const double* plane = sum_rows<double>();
    const std::int64_t cols = quarter_degree.nlon;
    float smallest = std::numeric_limits<float>::max();
    float largest = 0.0F;
    for (float v : inputs().fields.truth) {
        smallest = v != 0.0F ? std::min(smallest, std::abs(v)) : smallest;
        largest = std::max(largest, std::abs(v));
    }
    const int lowest_bit = 2 * (std::ilogb(smallest) - 23);
    FixedPointGrid grid = FixedPointGrid::for_range(lowest_bit, 2 * (std::ilogb(largest) + 1));
    grid.one_digit = grid.one_digit && !two_digits;
    const double anchor = grid.anchor();
    for (auto _ : state) {
        ExactSum sum;
        for (std::int64_t i = 0; i < quarter_degree.nlat; ++i) {
            const double* row = plane + i * cols;
            std::uint64_t high = 0;
            std::uint64_t low = 0;
            if (grid.one_digit) {
                for (std::int64_t j = 0; j < cols; ++j) {
                    fixed_point_add_whole(row[j], anchor, high);
                }
            } else {
                for (std::int64_t j = 0; j < cols; ++j) {
                    fixed_point_add(row[j], anchor, high, low);
                }
            }
            grid.deposit(sum, 1.0, high, low, cols);
        }
        benchmark::DoNotOptimize(sum.to_double());
    }
    set_points(state, inputs().plane());
}
BENCHMARK_CAPTURE(fixed_point_sum_rows, one_digit, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(fixed_point_sum_rows, two_digits, true)->Unit(benchmark::kMicrosecond);

// The same rows summed in double with eight independent lanes, as the fast mode sums a row.
template <class T>
void plain_double_sum_rows(benchmark::State& state) {
    const T* plane = sum_rows<T>();
    const std::int64_t cols = quarter_degree.nlon;
    for (auto _ : state) {
        double total = 0.0;
        for (std::int64_t i = 0; i < quarter_degree.nlat; ++i) {
            std::array<double, 8> lanes{};
            const T* row = plane + i * cols;
            std::int64_t j = 0;
            for (; j + 8 <= cols; j += 8) {
                for (std::size_t k = 0; k < 8; ++k) {
                    lanes[k] += static_cast<double>(row[j + static_cast<std::int64_t>(k)]);
                }
            }
            for (; j < cols; ++j) {
                total += static_cast<double>(row[j]);
            }
            for (double lane : lanes) {
                total += lane;
            }
        }
        benchmark::DoNotOptimize(total);
    }
    set_points(state, inputs().plane());
}
BENCHMARK_TEMPLATE(plain_double_sum_rows, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(plain_double_sum_rows, double)->Unit(benchmark::kMicrosecond);

// The fused suite on the shape of the make-bench figure: every score, gradient included.
void evaluator(benchmark::State& state, Summation summation) {
    const Inputs& in = inputs();
    EvaluationOptions options;
    options.summation = summation;
    Evaluator e(in.grid, suite_channels, in.weights.view(), options);
    for (auto _ : state) {
        benchmark::DoNotOptimize(e.evaluate(in.truth(suite_channels), in.prediction(suite_channels)));
    }
    set_points(state, suite_channels * in.plane());
    state.SetBytesProcessed(state.iterations() * 2 * suite_channels * in.plane() *
                            static_cast<std::int64_t>(sizeof(float)));
}
BENCHMARK_CAPTURE(evaluator, reproducible, Summation::reproducible)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(evaluator, fast, Summation::fast)->Unit(benchmark::kMillisecond);

void weighted_mean_metric(benchmark::State& state, Summation summation) {
    const Inputs& in = inputs();
    const std::int64_t channels = 3;
    for (auto _ : state) {
        benchmark::DoNotOptimize(weighted_mean<float>(in.grid, in.truth(channels), in.weights.view(), summation));
    }
    set_points(state, channels * in.plane());
}
BENCHMARK_CAPTURE(weighted_mean_metric, reproducible, Summation::reproducible)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(weighted_mean_metric, fast, Summation::fast)->Unit(benchmark::kMillisecond);

void zonal_mean_metric(benchmark::State& state, Summation summation) {
    const Inputs& in = inputs();
    const std::int64_t channels = 3;
    for (auto _ : state) {
        benchmark::DoNotOptimize(zonal_mean<float>(in.grid, in.truth(channels), summation));
    }
    set_points(state, channels * in.plane());
}
BENCHMARK_CAPTURE(zonal_mean_metric, reproducible, Summation::reproducible)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(zonal_mean_metric, fast, Summation::fast)->Unit(benchmark::kMillisecond);

// weighted_std on (3, 721, 1440): the exact squares cost nothing for float fields with per-row weights, one
// more exact row sum of the squares for doubles, and one to three more (and one for the weighted values)
// with per-point weights (docs/design.md §5).
void weighted_std_metric(benchmark::State& state, bool as_double, bool per_point) {
    const Inputs& in = inputs();
    const std::int64_t channels = 3;
    const FieldShard<float> x = in.truth(channels);
    const std::vector<double> wide(x.values.begin(), x.values.end());
    std::vector<double> point_weights;
    for (std::int64_t i = 0; i < quarter_degree.nlat; ++i) {
        point_weights.insert(point_weights.end(), static_cast<std::size_t>(quarter_degree.nlon),
                             in.weights.values[static_cast<std::size_t>(i)]);
    }
    const Weights weights = per_point ? Weights{point_weights, true} : in.weights.view();
    for (auto _ : state) {
        if (as_double) {
            benchmark::DoNotOptimize(weighted_std<double>(in.grid, {wide, channels}, weights));
        } else {
            benchmark::DoNotOptimize(weighted_std<float>(in.grid, x, weights));
        }
    }
    set_points(state, channels * in.plane());
}
BENCHMARK_CAPTURE(weighted_std_metric, float_per_row, false, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(weighted_std_metric, double_per_row, true, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(weighted_std_metric, float_per_point, false, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(weighted_std_metric, double_per_point, true, true)->Unit(benchmark::kMillisecond);

// The numpy comparison's shape: (3, 721, 1440), truth and prediction.
void gradient_magnitude_percent_diff_metric(benchmark::State& state, Summation summation) {
    const Inputs& in = inputs();
    const std::int64_t channels = 3;
    for (auto _ : state) {
        benchmark::DoNotOptimize(gradient_magnitude_percent_diff<float>(
            in.grid, in.truth(channels), in.prediction(channels), in.weights.view(), {}, summation));
    }
    set_points(state, channels * in.plane());
}
BENCHMARK_CAPTURE(gradient_magnitude_percent_diff_metric, reproducible, Summation::reproducible)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(gradient_magnitude_percent_diff_metric, fast, Summation::fast)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    gridshard::MpiEnvironment mpi(&argc, &argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    gridshard::bench::g_inputs.reset();  // before MPI_Finalize
    return 0;
}
