// The spherical power spectrum at every mesh shape against an independent C reference: libsharp 1.0 (Debian's
// libsharp-dev), whose map2alm on its own Gauss-Legendre and Clenshaw-Curtis geometries gives torch-harmonics'
// c_lm. libsharp's helpers put ring k (k = 0 at the north pole, the file's row k) at colatitude theta_k with
// the ring weight q_k * 2 pi / nlon (q_k the latitude quadrature weight, summing to 2), and map2alm forms
// a_lm = sum_k w_k sum_j f_kj conj(Y_lm(theta_k, 2 pi j / nlon)) with orthonormal Y_lm, which is
// sum_k q_k Pbar_lm(cos theta_k) (2 pi / nlon) rfft(f_k)_m = c_lm up to the sign convention of the order,
// which |a_lm| does not see. Lobatto has no libsharp geometry; the analytic tests and the torch-harmonics
// comparison cover it.

#include <gtest/gtest.h>
#include <libsharp/sharp.h>
#include <libsharp/sharp_almhelpers.h>
#include <libsharp/sharp_geomhelpers.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <map>
#include <memory>
#include <numbers>
#include <random>
#include <string>

#include "gridshard/metrics/spectrum.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

constexpr double pi = std::numbers::pi;

// libsharp's geometry of `sphere` for a (nlat, nlon) field stored row by row: ring k at offset k * nlon,
// pixel stride 1, first pixel at phi = 0.
class LibsharpGeometry {
  public:
    LibsharpGeometry(SphereGrid sphere, GridShape grid) {
        const int nlat = static_cast<int>(grid.nlat);
        const int nlon = static_cast<int>(grid.nlon);
        if (sphere == SphereGrid::legendre_gauss) {
            sharp_make_gauss_geom_info(nlat, nlon, 0.0, 1, nlon, &info_);
        } else if (sphere == SphereGrid::equiangular) {
            sharp_make_cc_geom_info(nlat, nlon, 0.0, 1, nlon, &info_);
        }
    }
    ~LibsharpGeometry() {
        if (info_ != nullptr) {
            sharp_destroy_geom_info(info_);
        }
    }
    LibsharpGeometry(const LibsharpGeometry&) = delete;
    LibsharpGeometry& operator=(const LibsharpGeometry&) = delete;
    [[nodiscard]] const sharp_geom_info* get() const { return info_; }

  private:
    sharp_geom_info* info_ = nullptr;
};

// libsharp's a_lm of one field, l < lmax and m < min(mmax, lmax) (libsharp needs m <= l_max; higher orders
// have no degree of the spectrum).
class LibsharpCoefficients {
  public:
    LibsharpCoefficients(SphereGrid sphere, GridShape grid, std::vector<double> field, std::int64_t lmax,
                         std::int64_t mmax)
        : geometry_(sphere, grid) {
        sharp_make_triangular_alm_info(static_cast<int>(lmax - 1), static_cast<int>(std::min(mmax, lmax) - 1), 1,
                                       &alm_info_);
        alm_.resize(static_cast<std::size_t>(sharp_alm_count(alm_info_)));
        void* alm_pointers[1] = {alm_.data()};
        void* map_pointers[1] = {field.data()};
        sharp_execute(SHARP_MAP2ALM, 0, alm_pointers, map_pointers, geometry_.get(), alm_info_, SHARP_DP, nullptr,
                      nullptr);
    }
    ~LibsharpCoefficients() { sharp_destroy_alm_info(alm_info_); }
    LibsharpCoefficients(const LibsharpCoefficients&) = delete;
    LibsharpCoefficients& operator=(const LibsharpCoefficients&) = delete;

    // P_l = sum_{m <= l, m < mmax} f_m |a_lm|^2.
    [[nodiscard]] std::vector<double> power(std::int64_t lmax, std::int64_t mmax, SpectrumConvention convention) const {
        std::vector<double> p(static_cast<std::size_t>(lmax), 0.0);
        for (int l = 0; l < lmax; ++l) {
            for (int m = 0; m <= l && m < mmax; ++m) {
                const double f = convention == SpectrumConvention::full && m > 0 ? 2.0 : 1.0;
                p[static_cast<std::size_t>(l)] +=
                    f * std::norm(alm_[static_cast<std::size_t>(sharp_alm_index(alm_info_, l, m))]);
            }
        }
        return p;
    }

  private:
    LibsharpGeometry geometry_;
    sharp_alm_info* alm_info_ = nullptr;
    std::vector<std::complex<double>> alm_;
};

const std::vector<GridShape>& reference_grids() {
    static const std::vector<GridShape> grids{{32, 64}, {33, 64}, {180, 360}, {181, 360}};
    return grids;
}

// The torch-harmonics 0.8.0 truncation, stated here rather than taken from the library: L = nlat,
// M = nlon / 2 + 1.
std::int64_t degrees(GridShape grid) {
    return grid.nlat;
}
std::int64_t orders(GridShape grid) {
    return grid.nlon / 2 + 1;
}

// libsharp's rings against the library's quadrature: cos(theta_k) = x_{nlat-1-k} (the library's nodes ascend
// from -1) and w_k = q_{nlat-1-k} * 2 pi / nlon.
TEST(SpectrumLibsharp, GeometryIsTheLibrarysQuadrature) {
    for (SphereGrid sphere : {SphereGrid::legendre_gauss, SphereGrid::equiangular}) {
        for (const GridShape& grid : reference_grids()) {
            const LibsharpGeometry geometry(sphere, grid);
            const SphereQuadrature q = sphere_quadrature(sphere, grid.nlat);
            const double scale = 2.0 * pi / static_cast<double>(grid.nlon);
            int rings = 0;
            for (int i = 0; i < geometry.get()->npairs; ++i) {
                const sharp_ringpair& pair = geometry.get()->pair[i];
                for (const sharp_ringinfo* ring : {&pair.r1, &pair.r2}) {
                    if (ring->nph < 0) {
                        continue;  // the equator of an odd grid: one ring
                    }
                    ASSERT_EQ(ring->nph, grid.nlon);
                    ASSERT_EQ(ring->stride, 1);
                    ASSERT_EQ(ring->phi0, 0.0);
                    ASSERT_EQ(ring->ofs % grid.nlon, 0);
                    const auto k = static_cast<std::size_t>(ring->ofs / grid.nlon);
                    const std::size_t node = static_cast<std::size_t>(grid.nlat) - 1 - k;
                    EXPECT_NEAR(std::cos(ring->theta), q.nodes[node], 1e-14)
                        << to_string(sphere) << " " << grid.nlat << " ring " << k;
                    EXPECT_NEAR(ring->weight, q.weights[node] * scale, 1e-15 * scale)
                        << to_string(sphere) << " " << grid.nlat << " ring " << k;
                    ++rings;
                }
            }
            EXPECT_EQ(rings, grid.nlat);
        }
    }
}

template <class T>
std::vector<T> random_field(std::int64_t channels, GridShape grid, unsigned seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<T> values(static_cast<std::size_t>(channels * grid.nlat * grid.nlon));
    for (T& v : values) {
        v = static_cast<T>(normal(generator));
    }
    return values;
}

// Into `largest`: the largest |P_l - P_l(libsharp)| / max_l P_l(libsharp) per case, over channels, conventions
// and modes.
template <class T>
void compare_with_libsharp(const ProcessMesh& mesh, std::map<std::string, double>& largest) {
    constexpr double tolerance = 1e-10;
    constexpr std::int64_t channels = 2;
    for (SphereGrid sphere : {SphereGrid::legendre_gauss, SphereGrid::equiangular}) {
        for (const GridShape& grid : reference_grids()) {
            const std::int64_t lmax = degrees(grid);
            const std::int64_t mmax = orders(grid);
            const auto global = random_field<T>(channels, grid, 29U + static_cast<unsigned>(grid.nlat));
            // libsharp in double on the input's values (the library, too, transforms in double).
            std::vector<std::unique_ptr<LibsharpCoefficients>> reference;
            for (std::int64_t c = 0; c < channels; ++c) {
                const auto first = global.begin() + c * grid.nlat * grid.nlon;
                reference.push_back(std::make_unique<LibsharpCoefficients>(
                    sphere, grid, std::vector<double>(first, first + grid.nlat * grid.nlon), lmax, mmax));
            }
            const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
            const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
            const std::string name =
                std::string(to_string(sphere)) + " " + std::to_string(grid.nlat) + "x" + std::to_string(grid.nlon);
            double& worst = largest[name];
            for (SpectrumConvention convention : {SpectrumConvention::ace, SpectrumConvention::full}) {
                for (SpectrumMode mode : {SpectrumMode::field_owners, SpectrumMode::transposes}) {
                    SpectrumSpec spec;
                    spec.grid = sphere;
                    spec.convention = convention;
                    spec.mode = mode;
                    const auto got = spherical_power_spectrum(sharded, FieldShard<T>{shard, channels}, spec);
                    ASSERT_EQ(static_cast<std::int64_t>(got.size()), channels * lmax) << name;
                    for (std::int64_t c = 0; c < channels; ++c) {
                        const auto expected = reference[static_cast<std::size_t>(c)]->power(lmax, mmax, convention);
                        const double scale = *std::max_element(expected.begin(), expected.end());
                        ASSERT_GT(scale, 0.0) << name;
                        for (std::int64_t l = 0; l < lmax; ++l) {
                            const double value = got[static_cast<std::size_t>(c * lmax + l)];
                            const double difference = std::abs(value - expected[static_cast<std::size_t>(l)]) / scale;
                            worst = std::max(worst, difference);
                            ASSERT_LE(difference, tolerance)
                                << name << " " << to_string(convention) << " channel " << c << " l=" << l << ": "
                                << value << " vs libsharp " << expected[static_cast<std::size_t>(l)];
                        }
                    }
                }
            }
        }
    }
}

template <class T>
void expect_libsharp_spectra(const char* type) {
    const ProcessMesh mesh = mpitest::make_mesh();
    std::map<std::string, double> largest;
    compare_with_libsharp<T>(mesh, largest);
    if (Communicator::world().rank() == 0) {
        for (const auto& [name, difference] : largest) {
            std::printf("[ libsharp ] %s %s: largest difference / max P_l %.2g\n", type, name.c_str(), difference);
        }
    }
}

TEST(SpectrumLibsharp, RandomFieldsDouble) {
    expect_libsharp_spectra<double>("double");
}
TEST(SpectrumLibsharp, RandomFieldsFloat) {
    expect_libsharp_spectra<float>("float");
}

}  // namespace
}  // namespace gridshard
