#pragma once
// Shared by the benchmark programs: the deterministic test fields (so every program, every rank and the
// numpy comparison see the same numbers), the 0.25-degree grid's latitudes, a read-bandwidth probe, a
// timer and medians. No MPI calls here.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"

namespace gridshard::bench {

/// The 0.25-degree grid the benchmarks use: latitudes -90, -89.75, ..., 90 (exact in binary), 1440 longitudes.
inline constexpr GridShape quarter_degree{721, 1440};

/// Every latitude of the grid, degrees, pole to pole: the polar rows get weight 0, as in ERA5.
inline std::vector<double> latitudes_deg(const GridShape& grid) {
    std::vector<double> lat(static_cast<std::size_t>(grid.nlat));
    for (std::int64_t i = 0; i < grid.nlat; ++i) {
        lat[static_cast<std::size_t>(i)] = -90.0 + 180.0 * static_cast<double>(i) / static_cast<double>(grid.nlat - 1);
    }
    return lat;
}

/// A deterministic pseudo-random value in [0, 1) from integer coordinates (noise that depends only on the
/// global point, so a shard holds exactly the values of the whole field).
inline double hash01(std::int64_t a, std::int64_t b, std::int64_t c) {
    std::uint64_t h = static_cast<std::uint64_t>(a) * 0x9E3779B97F4A7C15ULL ^
                      static_cast<std::uint64_t>(b) * 0xC2B2AE3D27D4EB4FULL ^
                      static_cast<std::uint64_t>(c) * 0x165667B19E3779F9ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return static_cast<double>(h >> 11) * 0x1p-53;
}

/// Truth and prediction shards `(channels, box)`, float32, longitude fastest.
struct FieldPair {
    std::vector<float> truth;
    std::vector<float> prediction;
};

/// Temperature-like fields: a smooth large-scale pattern plus point noise, and a prediction that is the
/// truth plus a small error. Finite everywhere, so every point is valid and the exact sums take their
/// vectorised block path, as they do for real reanalysis fields.
inline FieldPair make_fields(const GridShape& grid, const Box& box, std::int64_t channels) {
    FieldPair f;
    const auto n = static_cast<std::size_t>(channels * box.area());
    f.truth.resize(n);
    f.prediction.resize(n);
    // Trigonometry per row and per column only; the per-point work is a few multiply-adds and two hashes.
    std::vector<double> lon_wave(static_cast<std::size_t>(box.lon.size()));
    std::size_t k = 0;
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
            const double lon = 2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(grid.nlon);
            lon_wave[static_cast<std::size_t>(j - box.lon.begin)] = std::sin(3.0 * lon + static_cast<double>(c));
        }
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            const double lat = std::numbers::pi * (static_cast<double>(i) / static_cast<double>(grid.nlat - 1) - 0.5);
            const double base = 250.0 + 40.0 * std::cos(lat) + static_cast<double>(c);
            const double amplitude = 10.0 * std::cos(2.0 * lat);
            for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                const double t =
                    base + amplitude * lon_wave[static_cast<std::size_t>(j - box.lon.begin)] + 2.0 * hash01(c, i, j);
                const double p = t + 1.5 * (hash01(c + 17, i, j) - 0.45);
                f.truth[k] = static_cast<float>(t);
                f.prediction[k] = static_cast<float>(p);
                ++k;
            }
        }
    }
    return f;
}

/// The plain read-bandwidth probe: sums both arrays with 32 independent float lanes each, so the loop is
/// limited by memory, not by the latency of one add chain. The sum is returned so the reads stay.
[[gnu::noinline]] inline float read_both(const float* a, const float* b, std::int64_t n) noexcept {
    constexpr std::int64_t lanes = 32;
    std::array<float, lanes> sum_a{};
    std::array<float, lanes> sum_b{};
    std::int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
        for (std::size_t k = 0; k < lanes; ++k) {
            sum_a[k] += a[j + static_cast<std::int64_t>(k)];
            sum_b[k] += b[j + static_cast<std::int64_t>(k)];
        }
    }
    float total = 0.0F;
    for (; j < n; ++j) {
        total += a[j] + b[j];
    }
    for (std::size_t k = 0; k < lanes; ++k) {
        total += sum_a[k] + sum_b[k];
    }
    return total;
}

/// Seconds since an arbitrary start, from a monotonic clock.
inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The median of `samples` (the mean of the middle two for an even count).
inline double median(std::vector<double> samples) {
    if (samples.empty()) {
        throw std::invalid_argument("median of no samples");
    }
    std::sort(samples.begin(), samples.end());
    const std::size_t mid = samples.size() / 2;
    return samples.size() % 2 == 1 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
}

/// Writes a C-ordered array as a NumPy .npy file (format 1.0), little-endian; `dtype` is e.g. "<f4".
template <class T>
void write_npy(const std::string& path, const std::vector<T>& values, const std::vector<std::int64_t>& shape,
               const std::string& dtype) {
    std::string dims;
    for (std::int64_t d : shape) {
        dims += std::to_string(d) + ",";
    }
    if (shape.size() > 1) {
        dims.pop_back();  // (3,721,1440); a 1-d shape keeps its comma: (721,)
    }
    std::string header = "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Magic (6) + version (2) + header length (2) + header + '\n' must be a multiple of 64 bytes.
    const std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', '\x01', '\x00'};
    out.write(magic, sizeof(magic));
    const auto length = static_cast<std::uint16_t>(header.size());
    const char length_bytes[] = {static_cast<char>(length & 0xFF), static_cast<char>(length >> 8)};
    out.write(length_bytes, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
    if (!out) {
        throw std::runtime_error("cannot write " + path);
    }
}

}  // namespace gridshard::bench
