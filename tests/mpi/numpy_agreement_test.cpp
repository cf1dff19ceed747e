// The 1-rank metrics against numpy (float64) on a fixture that tests/numpy/make_fixture.py writes:
// agreement to 1e-12 relative. Run at several rank counts, the distributed results must agree too
// (they are bit-identical to the 1-rank ones, which metrics_test checks). Quantiles are numpy's bits.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/quantile.hpp"
#include "mpi_test_support.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gridshard {
namespace {

using mpitest::shard_of;

struct Fixture {
    std::int64_t channels = 0;
    GridShape grid;
    std::vector<float> truth;
    std::vector<float> prediction;
    std::vector<double> lat_deg;
    nlohmann::json expected;
};

Fixture load() {
    const char* dir = std::getenv("GRIDSHARD_NUMPY_FIXTURE");
    if (dir == nullptr) {
        throw std::runtime_error("GRIDSHARD_NUMPY_FIXTURE must name the folder make_fixture.py wrote");
    }
    Fixture f;
    std::ifstream json_file(std::string(dir) + "/expected.json");
    f.expected = nlohmann::json::parse(json_file);
    f.channels = f.expected["shape"][0].get<std::int64_t>();
    f.grid = {f.expected["shape"][1].get<std::int64_t>(), f.expected["shape"][2].get<std::int64_t>()};
    const auto n = static_cast<std::size_t>(f.channels * f.grid.nlat * f.grid.nlon);
    f.truth.resize(n);
    f.prediction.resize(n);
    f.lat_deg.resize(static_cast<std::size_t>(f.grid.nlat));
    std::ifstream bin(std::string(dir) + "/fields.bin", std::ios::binary);
    bin.read(reinterpret_cast<char*>(f.truth.data()), static_cast<std::streamsize>(n * sizeof(float)));
    bin.read(reinterpret_cast<char*>(f.prediction.data()), static_cast<std::streamsize>(n * sizeof(float)));
    bin.read(reinterpret_cast<char*>(f.lat_deg.data()),
             static_cast<std::streamsize>(f.lat_deg.size() * sizeof(double)));
    if (!bin) {
        throw std::runtime_error("fields.bin is shorter than the shape in expected.json");
    }
    return f;
}

void expect_numpy(const std::vector<double>& got, const nlohmann::json& expected, const std::string& name) {
    ASSERT_EQ(got.size(), expected.size()) << name;
    for (std::size_t k = 0; k < got.size(); ++k) {
        if (expected[k].is_null()) {
            EXPECT_TRUE(std::isnan(got[k])) << name << "[" << k << "] = " << got[k] << ", numpy NaN";
            continue;
        }
        const double want = expected[k].get<double>();
        EXPECT_NEAR(got[k], want, 1e-12 * std::max(1.0, std::abs(want))) << name << "[" << k << "]";
    }
}

TEST(NumpyAgreement, EveryMetricAgreesWithNumpy) {
    const Fixture f = load();
    const ProcessMesh mesh = mpitest::make_mesh();
    if (f.grid.nlat < mesh.shape().lat || f.grid.nlon < mesh.shape().lon) {
        GTEST_SKIP() << "mesh finer than the fixture";
    }
    const ShardedGrid grid(mesh, f.grid);
    const Box& box = grid.box();
    const AreaWeights weights = cos_lat_weights(f.lat_deg, f.grid.nlon, box.lat);
    const auto t = shard_of(f.truth, f.grid, box, f.channels);
    const auto p = shard_of(f.prediction, f.grid, box, f.channels);
    const FieldShard<float> truth{t, f.channels};
    const FieldShard<float> prediction{p, f.channels};
    expect_numpy(weighted_mean<float>(grid, truth, weights.view()), f.expected["weighted_mean"], "weighted_mean");
    expect_numpy(weighted_nanmean<float>(grid, truth, weights.view()), f.expected["weighted_nanmean"],
                 "weighted_nanmean");
    expect_numpy(weighted_std<float>(grid, truth, weights.view()), f.expected["weighted_std"], "weighted_std");
    expect_numpy(bias<float>(grid, truth, prediction, weights.view()), f.expected["bias"], "bias");
    expect_numpy(rmse<float>(grid, truth, prediction, weights.view()), f.expected["rmse"], "rmse");
    expect_numpy(gradient_magnitude_percent_diff<float>(grid, truth, prediction, weights.view()),
                 f.expected["grad_mag_percent_diff"], "grad_mag_percent_diff");
    // Zonal means: this rank's rows of numpy's (channels, nlat).
    nlohmann::json zonal = nlohmann::json::array();
    for (std::int64_t c = 0; c < f.channels; ++c) {
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            zonal.push_back(f.expected["zonal_mean"][static_cast<std::size_t>(c * f.grid.nlat + i)]);
        }
    }
    expect_numpy(zonal_mean<float>(grid, truth), zonal, "zonal_mean");
}

// numpy's own quantiles, both methods, in memory and streamed; then the weighted "inverted_cdf" against
// make_fixture.py's exact reference.
TEST(NumpyAgreement, QuantilesAreNumpysBits) {
    const Fixture f = load();
    const ProcessMesh mesh = mpitest::make_mesh();
    if (f.grid.nlat < mesh.shape().lat || f.grid.nlon < mesh.shape().lon) {
        GTEST_SKIP() << "mesh finer than the fixture";
    }
    const ShardedGrid grid(mesh, f.grid);
    const auto t = shard_of(f.truth, f.grid, grid.box(), f.channels);
    const auto q = f.expected["quantiles"].get<std::vector<double>>();
    // The streamed selection's pieces, in any order: each channel's even rows one by one, backwards, and its odd rows
    // through a list of cells.
    const Box& box = grid.box();
    const auto plane = static_cast<std::size_t>(box.area());
    const auto width = static_cast<std::size_t>(box.lon.size());
    std::vector<std::int64_t> odd_rows;
    for (std::size_t i = 1; i < static_cast<std::size_t>(box.lat.size()); i += 2) {
        for (std::size_t j = 0; j < width; ++j) {
            odd_rows.push_back(static_cast<std::int64_t>(i * width + j));
        }
    }
    for (const char* method : {"linear", "inverted_cdf"}) {
        const SampleQuantiles in_memory = sample_quantiles(mesh.spatial(), std::span<const float>(t), f.channels,
                                                           std::span<const double>(q), parse_quantile_method(method));
        QuantileStream<float> stream(f.channels, q, parse_quantile_method(method));
        do {
            for (std::int64_t c = f.channels - 1; c >= 0; --c) {
                const auto field = std::span<const float>(t).subspan(static_cast<std::size_t>(c) * plane, plane);
                for (std::size_t i = 0; i < static_cast<std::size_t>(box.lat.size()); i += 2) {
                    stream.add(c, field.subspan(i * width, width));
                }
                stream.add(c, field, std::span<const std::int64_t>(odd_rows));
            }
        } while (stream.end_pass(mesh.spatial()));
        EXPECT_EQ(stream.passes(), 2) << method << ": float32 of few samples";
        const SampleQuantiles streamed = stream.result();
        EXPECT_THROW(stream.add(0, std::span<const float>(t)), ArgumentError) << "an add after the last pass";
        const nlohmann::json& want = f.expected[std::string("quantile_") + method];
        for (const SampleQuantiles* got : {&in_memory, &streamed}) {
            const char* how = got == &in_memory ? "in memory" : "streamed";
            ASSERT_EQ(got->values.size(), want.size()) << method << " " << how;
            for (std::size_t k = 0; k < want.size(); ++k) {
                EXPECT_EQ(std::bit_cast<std::uint64_t>(got->values[k]),
                          std::bit_cast<std::uint64_t>(want[k].get<double>()))
                    << method << " " << how << " [" << k << "]: " << got->values[k] << ", numpy "
                    << want[k].get<double>();
            }
        }
    }
    std::vector<double> weights;  // cell (i, j) weighs (i + 2 j) % 4, as make_fixture.py's reference
    for (std::int64_t c = 0; c < f.channels; ++c) {
        for (std::int64_t i = grid.box().lat.begin; i < grid.box().lat.end; ++i) {
            for (std::int64_t j = grid.box().lon.begin; j < grid.box().lon.end; ++j) {
                weights.push_back(static_cast<double>((i + 2 * j) % 4));
            }
        }
    }
    const SampleQuantiles got =
        sample_weighted_quantiles(mesh.spatial(), std::span<const float>(t), std::span<const double>(weights),
                                  f.channels, std::span<const double>(q));
    const nlohmann::json& want = f.expected["quantile_weighted_inverted_cdf"];
    ASSERT_EQ(got.values.size(), want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
        const double expected = want[k].is_null() ? std::nan("") : want[k].get<double>();
        EXPECT_EQ(std::bit_cast<std::uint64_t>(got.values[k]), std::bit_cast<std::uint64_t>(expected))
            << "[" << k << "]: " << got.values[k] << ", exact " << expected;
    }
    EXPECT_EQ(quantile_weights_problem(std::span<const double>(weights)), "");
    weights.back() = -1.0;
    EXPECT_NE(quantile_weights_problem(std::span<const double>(weights)).find("finite and >= 0, got -1"),
              std::string::npos);
}

// float64 samples of every kind of value (ties, NaN, infinities, signed zeros, subnormals; one sample all NaN, one
// empty on most ranks), many of them, so the digits narrow and the passes grow: the streamed quantiles are
// sample_quantiles', bit for bit, and bad calls are refused.
TEST(NumpyAgreement, StreamedQuantilesAreTheInMemoryOnes) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& group = mesh.world();
    constexpr std::int64_t samples = 300;
    constexpr std::size_t length = 97;
    std::mt19937_64 random(static_cast<std::uint64_t>(1000 + group.rank()));
    const double specials[] = {0.0,
                               -0.0,
                               std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               std::nan(""),
                               4.9e-324,
                               -2.5e-310,
                               1.5,
                               1.5};
    std::vector<double> values(static_cast<std::size_t>(samples) * length);
    for (std::size_t k = 0; k < values.size(); ++k) {
        const std::size_t s = k / length;
        values[k] = random() % 5 == 0 ? specials[random() % std::size(specials)]
                    : s % 3 == 0      ? static_cast<double>(random() % 7)
                                      : std::ldexp(static_cast<double>(random() % 100000) - 50000.0,
                                                   static_cast<int>(random() % 40) - 20);
        if (s == 1 || (s == 2 && group.rank() != 0)) {
            values[k] = std::nan("");
        }
    }
    const std::vector<double> q = {0.0, 1e-6, 0.25, 0.5, 0.99, 0.9999, 1.0};
    for (const QuantileMethod method : {QuantileMethod::linear, QuantileMethod::inverted_cdf}) {
        const SampleQuantiles want =
            sample_quantiles(group, std::span<const double>(values), samples, std::span<const double>(q), method);
        QuantileStream<double> stream(samples, q, method);
        do {
            for (std::int64_t s = 0; s < samples; ++s) {
                const auto run = std::span<const double>(values).subspan(static_cast<std::size_t>(s) * length, length);
                stream.add(s, run.subspan(0, 40));
                stream.add(s, run.subspan(40));
            }
        } while (stream.end_pass(group));
        EXPECT_GT(stream.passes(), 4);
        const SampleQuantiles got = stream.result();
        EXPECT_EQ(got.counts, want.counts);
        EXPECT_EQ(got.counts[1], 0);
        ASSERT_EQ(got.values.size(), want.values.size());
        for (std::size_t k = 0; k < want.values.size(); ++k) {
            EXPECT_EQ(std::bit_cast<std::uint64_t>(got.values[k]), std::bit_cast<std::uint64_t>(want.values[k]))
                << "[" << k << "]: " << got.values[k] << ", in memory " << want.values[k];
        }
    }
    QuantileStream<double> stream(2, q, QuantileMethod::linear);
    const std::vector<std::int64_t> outside = {0, 97};
    EXPECT_THROW(stream.add(2, std::span<const double>(values).subspan(0, length)), ArgumentError);
    EXPECT_THROW(stream.add(0, std::span<const double>(values).subspan(0, length), outside), ArgumentError);
    EXPECT_THROW((void)stream.result(), ArgumentError);
    EXPECT_THROW(QuantileStream<double>(1, {0.5, 1.5}, QuantileMethod::linear), ArgumentError);
    // A pass given other values than the last (an input rewritten while it was read) is refused, not answered.
    QuantileStream<double> changed(1, q, QuantileMethod::linear);
    changed.add(0, std::span<const double>(values).subspan(0, length));
    ASSERT_TRUE(changed.end_pass(group));
    EXPECT_THROW((void)changed.end_pass(group), SystemError);
}

// float32 values crowded into one first digit (1 to 1 + 2^-8, 300000 on each rank, beside -1e30 and 1e30 and NaN on
// rank 0): more keys under the wanted digit than the gather of kept keys takes, so the later digits are found by
// histogram passes. The quantiles are the stream's, bit for bit, and the extremes and the inverted_cdf median are
// those of every rank's values sorted (each rank forms them all: the data is seeded by rank).
TEST(NumpyAgreement, CrowdedQuantilesTakeTheHistogramPasses) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& group = mesh.world();
    constexpr std::size_t length = 300000;
    const auto values_of = [](int rank) {
        std::mt19937 random(static_cast<std::uint32_t>(77 + rank));
        std::vector<float> values(length);
        for (float& v : values) {
            v = 1.0f + std::ldexp(static_cast<float>(random() % 65536), -24);
        }
        if (rank == 0) {
            values[10] = -1e30f;
            values[20] = 1e30f;
            values[30] = std::nanf("");
        }
        return values;
    };
    const std::vector<float> mine = values_of(group.rank());
    std::vector<float> every;
    for (int r = 0; r < group.size(); ++r) {
        const std::vector<float> theirs = values_of(r);
        std::copy_if(theirs.begin(), theirs.end(), std::back_inserter(every), [](float v) { return !std::isnan(v); });
    }
    std::sort(every.begin(), every.end());
    const std::vector<double> q = {0.0, 0.5, 0.9999, 1.0};
    for (const QuantileMethod method : {QuantileMethod::linear, QuantileMethod::inverted_cdf}) {
        const SampleQuantiles got =
            sample_quantiles(group, std::span<const float>(mine), 1, std::span<const double>(q), method);
        QuantileStream<float> stream(1, q, method);
        do {
            stream.add(0, std::span<const float>(mine));
        } while (stream.end_pass(group));
        const SampleQuantiles want = stream.result();
        EXPECT_EQ(got.counts, want.counts);
        EXPECT_EQ(got.counts[0], static_cast<std::int64_t>(every.size()));
        ASSERT_EQ(got.values.size(), want.values.size());
        for (std::size_t k = 0; k < want.values.size(); ++k) {
            EXPECT_EQ(std::bit_cast<std::uint64_t>(got.values[k]), std::bit_cast<std::uint64_t>(want.values[k]))
                << "q=" << q[k] << ": " << got.values[k] << ", streamed " << want.values[k];
        }
        EXPECT_EQ(got.values[0], static_cast<double>(every.front()));
        EXPECT_EQ(got.values[3], static_cast<double>(every.back()));
        if (method == QuantileMethod::inverted_cdf) {
            EXPECT_EQ(got.values[1], static_cast<double>(every[(every.size() + 1) / 2 - 1]));
        }
    }
}

// The selection's bits are the same at 1, 2 and 3 threads, and when called from inside a parallel region of the
// caller's (OpenMP's nesting off: a team of one thread where more were asked for).
TEST(NumpyAgreement, QuantilesAreTheSameForAnyThreads) {
#if defined(_OPENMP)
    const ProcessMesh mesh = mpitest::make_mesh();
    const Communicator& group = mesh.world();
    constexpr std::int64_t samples = 6;
    constexpr std::size_t length = 70000;  // two blocks of the threads' work per sample
    std::mt19937 random(static_cast<std::uint32_t>(5 + group.rank()));
    std::vector<float> values(static_cast<std::size_t>(samples) * length);
    for (float& v : values) {
        v = random() % 50 == 0 ? std::nanf("") : 250.0f + std::ldexp(static_cast<float>(random() % 1000000), -12);
    }
    const std::vector<double> q = {0.0, 0.5, 0.99, 1.0};
    const auto quantiles = [&] {
        return sample_quantiles(group, std::span<const float>(values), samples, std::span<const double>(q),
                                QuantileMethod::linear)
            .values;
    };
    const int before = omp_get_max_threads();
    const int levels_before = omp_get_max_active_levels();
    std::vector<std::vector<double>> results;
    for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        results.push_back(quantiles());
    }
    omp_set_max_active_levels(1);
    omp_set_num_threads(3);
    std::vector<double> nested;
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        nested = quantiles();  // MPI from the initial thread (MPI_THREAD_FUNNELED)
    }
    results.push_back(nested);
    omp_set_max_active_levels(levels_before);
    omp_set_num_threads(before);
    for (std::size_t k = 1; k < results.size(); ++k) {
        ASSERT_EQ(results[k].size(), results[0].size());
        for (std::size_t i = 0; i < results[0].size(); ++i) {
            EXPECT_EQ(std::bit_cast<std::uint64_t>(results[k][i]), std::bit_cast<std::uint64_t>(results[0][i]))
                << "run " << k << ", [" << i << "]";
        }
    }
#else
    GTEST_SKIP() << "built without OpenMP";
#endif
}

}  // namespace
}  // namespace gridshard
