// The power spectra at every mesh shape: bit-identical to one rank's answer for both split rules, both modes
// (field owners, transposes), float and double, fewer and more channels than ranks; analytic spectra in
// float64 (a constant, one harmonic, Parseval, a roll and a flip); the quadratures against closed forms; the
// zonal spectrum against a direct DFT; bad arguments raise on every rank.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <numbers>
#include <random>

#include "gridshard/core/error.hpp"
#include "gridshard/metrics/spectrum.hpp"
#include "mpi_test_support.hpp"

namespace gridshard {
namespace {

constexpr double pi = std::numbers::pi;

template <class T>
std::vector<T> random_field(std::int64_t channels, GridShape grid, unsigned seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<T> values(static_cast<std::size_t>(channels * grid.nlat * grid.nlon));
    for (T& v : values) {
        v = static_cast<T>(280.0 + 10.0 * normal(generator));
    }
    return values;
}

template <class T>
void expect_same_as_serial(const ProcessMesh& mesh) {
    int compared = 0;
    for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
        for (const GridShape& grid : mpitest::test_grids(mesh.shape(), rule)) {
            const ShardedGrid sharded(mesh, grid, rule);
            const ShardedGrid serial(mpitest::serial_mesh(), grid);
            for (std::int64_t channels : {1, 3, 9}) {
                const auto global = random_field<T>(channels, grid, 17U + static_cast<unsigned>(channels));
                const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
                for (SphereGrid sphere : {SphereGrid::legendre_gauss, SphereGrid::equiangular, SphereGrid::lobatto}) {
                    if (sphere != SphereGrid::legendre_gauss && grid.nlat < 2) {
                        continue;
                    }
                    SpectrumSpec spec;
                    spec.grid = sphere;
                    spec.convention = channels == 3 ? SpectrumConvention::full : SpectrumConvention::ace;
                    const auto expected = spherical_power_spectrum(serial, FieldShard<T>{global, channels}, spec);
                    for (SpectrumMode mode : {SpectrumMode::field_owners, SpectrumMode::transposes}) {
                        spec.mode = mode;
                        const auto got = spherical_power_spectrum(sharded, FieldShard<T>{shard, channels}, spec);
                        ASSERT_EQ(got.size(), expected.size());
                        for (std::size_t i = 0; i < got.size(); ++i) {
                            ASSERT_EQ(std::bit_cast<std::uint64_t>(got[i]), std::bit_cast<std::uint64_t>(expected[i]))
                                << "grid " << grid.nlat << "x" << grid.nlon << " channels " << channels << " value "
                                << i << ": " << got[i] << " vs " << expected[i];
                        }
                        ++compared;
                    }
                }
                const auto zonal_expected = zonal_power_spectrum(serial, FieldShard<T>{global, channels});
                const auto zonal = zonal_power_spectrum(sharded, FieldShard<T>{shard, channels});
                const std::int64_t bins = grid.nlon / 2 + 1;
                const Box& box = sharded.box();
                ASSERT_EQ(static_cast<std::int64_t>(zonal.size()), channels * box.lat.size() * bins);
                for (std::int64_t c = 0; c < channels; ++c) {
                    for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
                        for (std::int64_t m = 0; m < bins; ++m) {
                            const double a =
                                zonal[static_cast<std::size_t>((c * box.lat.size() + k - box.lat.begin) * bins + m)];
                            const double b = zonal_expected[static_cast<std::size_t>((c * grid.nlat + k) * bins + m)];
                            ASSERT_EQ(std::bit_cast<std::uint64_t>(a), std::bit_cast<std::uint64_t>(b));
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(compared, 0);
}

TEST(Spectrum, BitIdenticalToSerialFloat) {
    expect_same_as_serial<float>(mpitest::make_mesh());
}
TEST(Spectrum, BitIdenticalToSerialDouble) {
    expect_same_as_serial<double>(mpitest::make_mesh());
}

// A channel's spectrum is the same bits whatever other channels are computed with it: every Legendre sum has
// one summation order, however many columns are summed together (spectrum_kernels.hpp).
TEST(Spectrum, ChannelBitsDoNotDependOnTheBatch) {
    const ProcessMesh mesh = mpitest::make_mesh();
    int compared = 0;
    for (const GridShape& grid : mpitest::test_grids(mesh.shape(), SplitRule::div_up)) {
        const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
        const std::int64_t channels = 6;
        const auto global = random_field<float>(channels, grid, 29U);
        const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
        const auto plane = static_cast<std::size_t>(sharded.box().area());
        for (SpectrumMode mode : {SpectrumMode::field_owners, SpectrumMode::transposes}) {
            SpectrumSpec spec;
            spec.mode = mode;
            const auto batch = spherical_power_spectrum(sharded, FieldShard<float>{shard, channels}, spec);
            const std::size_t lmax = batch.size() / static_cast<std::size_t>(channels);
            for (std::size_t c = 0; c < static_cast<std::size_t>(channels); ++c) {
                const std::vector<float> one(shard.begin() + static_cast<std::ptrdiff_t>(c * plane),
                                             shard.begin() + static_cast<std::ptrdiff_t>((c + 1) * plane));
                const auto alone = spherical_power_spectrum(sharded, FieldShard<float>{one, 1}, spec);
                ASSERT_EQ(alone.size(), lmax);
                for (std::size_t l = 0; l < lmax; ++l) {
                    ASSERT_EQ(std::bit_cast<std::uint64_t>(alone[l]), std::bit_cast<std::uint64_t>(batch[c * lmax + l]))
                        << "grid " << grid.nlat << "x" << grid.nlon << " channel " << c << " l " << l;
                }
                ++compared;
            }
        }
    }
    EXPECT_GT(compared, 0);
}

// A plan kept and called again gives the bits of the free function at every call, of either element type, and its
// working memory carries nothing from one call to the next; a field of other channels raises on every rank.
TEST(Spectrum, AKeptPlanGivesTheSameBitsEveryCall) {
    const ProcessMesh mesh = mpitest::make_mesh();
    int compared = 0;
    for (const GridShape& grid : mpitest::test_grids(mesh.shape(), SplitRule::balanced)) {
        const ShardedGrid sharded(mesh, grid, SplitRule::balanced);
        const std::int64_t channels = 3;
        for (SpectrumMode mode : {SpectrumMode::field_owners, SpectrumMode::transposes}) {
            SpectrumSpec spec;
            spec.mode = mode;
            SpectrumPlan plan(sharded, channels, spec);
            EXPECT_EQ(plan.channels(), channels);
            for (unsigned seed : {3U, 4U, 3U}) {
                const auto global = random_field<double>(channels, grid, seed);
                const auto shard = mpitest::shard_of(global, grid, sharded.box(), channels);
                const std::vector<float> narrow(shard.begin(), shard.end());
                const auto expected = spherical_power_spectrum(sharded, FieldShard<double>{shard, channels}, spec);
                const auto expected_float =
                    spherical_power_spectrum(sharded, FieldShard<float>{narrow, channels}, spec);
                const auto got = plan(FieldShard<double>{shard, channels});
                const auto got_float = plan(FieldShard<float>{narrow, channels});
                ASSERT_EQ(static_cast<std::int64_t>(got.size()), channels * plan.degrees());
                for (std::size_t i = 0; i < got.size(); ++i) {
                    ASSERT_EQ(std::bit_cast<std::uint64_t>(got[i]), std::bit_cast<std::uint64_t>(expected[i]));
                    ASSERT_EQ(std::bit_cast<std::uint64_t>(got_float[i]),
                              std::bit_cast<std::uint64_t>(expected_float[i]));
                }
                ++compared;
            }
            const std::vector<double> one(static_cast<std::size_t>(sharded.box().area()), 1.0);
            EXPECT_THROW((void)plan(FieldShard<double>{one, 1}), ArgumentError);
        }
    }
    EXPECT_GT(compared, 0);
}

// Pbar_lm(x), orthonormal on the sphere, from std::assoc_legendre (no Condon-Shortley phase: the power does
// not see the sign).
double orthonormal_legendre(unsigned l, unsigned m, double x) {
    const double ratio = std::exp(std::lgamma(l - m + 1.0) - std::lgamma(l + m + 1.0));
    return std::sqrt((2.0 * l + 1.0) / (4.0 * pi) * ratio) * std::assoc_legendre(l, m, x);
}

// Rows at the grid's nodes, north first, as the transform takes them.
std::vector<double> row_nodes(SphereGrid sphere, std::int64_t nlat) {
    const SphereQuadrature q = sphere_quadrature(sphere, nlat);
    return {q.nodes.rbegin(), q.nodes.rend()};
}

std::vector<double> spectrum_of(const ProcessMesh& mesh, const std::vector<double>& global, GridShape grid,
                                const SpectrumSpec& spec) {
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const auto shard = mpitest::shard_of(global, grid, sharded.box(), 1);
    return spherical_power_spectrum(sharded, FieldShard<double>{shard, 1}, spec);
}

TEST(Spectrum, AnalyticFieldsInDouble) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{24, 48};
    for (SphereGrid sphere : {SphereGrid::legendre_gauss, SphereGrid::equiangular, SphereGrid::lobatto}) {
        const auto x = row_nodes(sphere, grid.nlat);
        SpectrumSpec spec;
        spec.grid = sphere;
        // A constant: only P_0 = 4 pi c^2.
        {
            const std::vector<double> constant(static_cast<std::size_t>(grid.nlat * grid.nlon), 3.0);
            const auto p = spectrum_of(mesh, constant, grid, spec);
            EXPECT_NEAR(p[0], 4.0 * pi * 9.0, 1e-11 * 4.0 * pi * 9.0) << to_string(sphere);
            for (std::size_t l = 1; l < p.size(); ++l) {
                EXPECT_LT(std::abs(p[l]), 1e-20) << to_string(sphere) << " l=" << l;
            }
        }
        // a Pbar_lm cos(m phi): a^2 / 4 (ace) and a^2 / 2 (full) at l, nothing elsewhere.
        const unsigned l0 = 7;
        const unsigned m0 = 3;
        const double a = 2.5;
        std::vector<double> harmonic;
        for (std::int64_t k = 0; k < grid.nlat; ++k) {
            for (std::int64_t j = 0; j < grid.nlon; ++j) {
                const double phi = 2.0 * pi * static_cast<double>(j) / static_cast<double>(grid.nlon);
                harmonic.push_back(a * orthonormal_legendre(l0, m0, x[static_cast<std::size_t>(k)]) *
                                   std::cos(m0 * phi));
            }
        }
        for (SpectrumConvention convention : {SpectrumConvention::ace, SpectrumConvention::full}) {
            spec.convention = convention;
            const auto p = spectrum_of(mesh, harmonic, grid, spec);
            const double expected = a * a / (convention == SpectrumConvention::ace ? 4.0 : 2.0);
            // Clenshaw-Curtis is not exact for every product of degree 2 l0; 1e-6 covers its error at 24 rows.
            const double tolerance = sphere == SphereGrid::legendre_gauss ? 1e-12 : 1e-6;
            EXPECT_NEAR(p[l0], expected, tolerance * expected) << to_string(sphere);
            for (std::size_t l = 0; l < p.size(); ++l) {
                if (l != l0 && sphere == SphereGrid::legendre_gauss) {
                    EXPECT_LT(std::abs(p[l]), 1e-20) << "l=" << l;
                }
            }
        }
    }
}

TEST(Spectrum, ParsevalRollAndFlip) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{19, 40};
    const auto x = row_nodes(SphereGrid::legendre_gauss, grid.nlat);
    const SphereQuadrature q = sphere_quadrature(SphereGrid::legendre_gauss, grid.nlat);
    // A band-limited field: random coefficients for l < 9.
    std::mt19937_64 generator(5);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> field(static_cast<std::size_t>(grid.nlat * grid.nlon), 0.0);
    for (unsigned l = 0; l < 9; ++l) {
        for (unsigned m = 0; m <= l; ++m) {
            const double re = normal(generator);
            const double im = m == 0 ? 0.0 : normal(generator);
            for (std::int64_t k = 0; k < grid.nlat; ++k) {
                const double p = orthonormal_legendre(l, m, x[static_cast<std::size_t>(k)]);
                for (std::int64_t j = 0; j < grid.nlon; ++j) {
                    const double phi = 2.0 * pi * static_cast<double>(j) / static_cast<double>(grid.nlon);
                    field[static_cast<std::size_t>(k * grid.nlon + j)] +=
                        p * (re * std::cos(m * phi) - im * std::sin(m * phi));
                }
            }
        }
    }
    SpectrumSpec spec;
    spec.convention = SpectrumConvention::full;
    const auto p = spectrum_of(mesh, field, grid, spec);
    double power = 0.0;
    for (double v : p) {
        power += v;
    }
    double integral = 0.0;  // int f^2 dOmega by the same quadrature
    for (std::int64_t k = 0; k < grid.nlat; ++k) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            const double f = field[static_cast<std::size_t>(k * grid.nlon + j)];
            integral += q.weights[static_cast<std::size_t>(grid.nlat - 1 - k)] * 2.0 * pi /
                        static_cast<double>(grid.nlon) * f * f;
        }
    }
    EXPECT_NEAR(power, integral, 1e-12 * integral);
    // A roll by 7 columns and a north-south flip leave the spectrum as it was.
    std::vector<double> rolled(field.size());
    std::vector<double> flipped(field.size());
    for (std::int64_t k = 0; k < grid.nlat; ++k) {
        for (std::int64_t j = 0; j < grid.nlon; ++j) {
            const double f = field[static_cast<std::size_t>(k * grid.nlon + j)];
            rolled[static_cast<std::size_t>(k * grid.nlon + (j + 7) % grid.nlon)] = f;
            flipped[static_cast<std::size_t>((grid.nlat - 1 - k) * grid.nlon + j)] = f;
        }
    }
    for (const auto* variant : {&rolled, &flipped}) {
        const auto pv = spectrum_of(mesh, *variant, grid, spec);
        for (std::size_t l = 0; l < p.size(); ++l) {
            EXPECT_NEAR(pv[l], p[l], 1e-12 * power) << "l=" << l;
        }
    }
}

TEST(Spectrum, QuadraturesAgainstClosedForms) {
    const SphereQuadrature gauss = sphere_quadrature(SphereGrid::legendre_gauss, 3);
    EXPECT_NEAR(gauss.nodes[0], -std::sqrt(0.6), 1e-15);
    EXPECT_NEAR(gauss.nodes[1], 0.0, 1e-15);
    EXPECT_NEAR(gauss.weights[0], 5.0 / 9.0, 1e-15);
    EXPECT_NEAR(gauss.weights[1], 8.0 / 9.0, 1e-15);
    const SphereQuadrature lobatto = sphere_quadrature(SphereGrid::lobatto, 4);
    EXPECT_DOUBLE_EQ(lobatto.nodes[0], -1.0);
    EXPECT_NEAR(lobatto.nodes[1], -std::sqrt(0.2), 1e-15);
    EXPECT_NEAR(lobatto.weights[0], 1.0 / 6.0, 1e-15);
    EXPECT_NEAR(lobatto.weights[1], 5.0 / 6.0, 1e-15);
    const SphereQuadrature cc = sphere_quadrature(SphereGrid::equiangular, 3);
    EXPECT_NEAR(cc.nodes[1], 0.0, 1e-15);
    EXPECT_NEAR(cc.weights[0], 1.0 / 3.0, 1e-15);
    EXPECT_NEAR(cc.weights[1], 4.0 / 3.0, 1e-15);
    for (SphereGrid sphere : {SphereGrid::legendre_gauss, SphereGrid::equiangular, SphereGrid::lobatto}) {
        for (std::int64_t n : {2, 5, 64, 181, 721}) {
            const SphereQuadrature q = sphere_quadrature(sphere, n);
            double total = 0.0;
            double x2 = 0.0;
            for (std::size_t k = 0; k < q.nodes.size(); ++k) {
                total += q.weights[k];
                x2 += q.weights[k] * q.nodes[k] * q.nodes[k];
                if (k > 0) {
                    ASSERT_LT(q.nodes[k - 1], q.nodes[k]) << to_string(sphere) << " n=" << n;
                }
            }
            EXPECT_NEAR(total, 2.0, 1e-13) << to_string(sphere) << " n=" << n;
            if (n > 2) {
                EXPECT_NEAR(x2, 2.0 / 3.0, 1e-13) << to_string(sphere) << " n=" << n;
            }
        }
    }
}

TEST(Spectrum, ZonalAgainstDirectDft) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{7, 12};
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const auto global = random_field<double>(2, grid, 9);
    const auto shard = mpitest::shard_of(global, grid, sharded.box(), 2);
    const Box& box = sharded.box();
    std::vector<double> lat;
    for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
        lat.push_back(80.0 - 25.0 * static_cast<double>(k));
    }
    const auto got = zonal_power_spectrum(sharded, FieldShard<double>{shard, 2}, ZonalWeighting::circumference, lat);
    const std::int64_t bins = grid.nlon / 2 + 1;
    for (std::int64_t c = 0; c < 2; ++c) {
        for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
            const double w =
                2.0 * pi * 6367500.0 * std::cos(lat[static_cast<std::size_t>(k - box.lat.begin)] * pi / 180.0);
            for (std::int64_t m = 0; m < bins; ++m) {
                double re = 0.0;
                double im = 0.0;
                for (std::int64_t j = 0; j < grid.nlon; ++j) {
                    const double v = global[static_cast<std::size_t>((c * grid.nlat + k) * grid.nlon + j)];
                    const double angle = -2.0 * pi * static_cast<double>(m * j) / static_cast<double>(grid.nlon);
                    re += v * std::cos(angle);
                    im += v * std::sin(angle);
                }
                const double n = static_cast<double>(grid.nlon);
                const double expected = w * (m == 0 ? 1.0 : 2.0) * (re * re + im * im) / (n * n);
                const double value = got[static_cast<std::size_t>((c * box.lat.size() + k - box.lat.begin) * bins + m)];
                EXPECT_NEAR(value, expected, 1e-11 * std::abs(expected) + 1e-6)
                    << "c=" << c << " k=" << k << " m=" << m;
            }
        }
    }
}

TEST(Spectrum, BadArgumentsRaiseOnEveryRank) {
    const ProcessMesh mesh = mpitest::make_mesh();
    const GridShape grid{8, 16};
    const ShardedGrid sharded(mesh, grid, SplitRule::div_up);
    const std::vector<double> shard(static_cast<std::size_t>(sharded.box().area()), 1.0);
    SpectrumSpec spec;
    spec.lmax = 9;
    try {
        (void)spherical_power_spectrum(sharded, FieldShard<double>{shard, 1}, spec);
        FAIL() << "lmax=9 on 8 rows was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("lmax=9"), std::string::npos) << e.what();
    }
    spec = {};
    spec.mmax = 10;
    EXPECT_THROW((void)spherical_power_spectrum(sharded, FieldShard<double>{shard, 1}, spec), ArgumentError);
    // One rank's shard of the wrong size: every rank raises.
    std::vector<double> bad = shard;
    if (mesh.spatial().rank() == 0) {
        bad.push_back(0.0);
    }
    EXPECT_THROW((void)spherical_power_spectrum(sharded, FieldShard<double>{bad, 1}), ArgumentError);
    EXPECT_THROW((void)parse_sphere_grid("gaussian"), ArgumentError);
    // A plan keeps a spec the grid cannot take and raises it, on every rank, at each call.
    spec = {};
    spec.lmax = 9;
    SpectrumPlan plan(sharded, 1, spec);
    EXPECT_EQ(plan.degrees(), 0);
    for (int call = 0; call < 2; ++call) {
        EXPECT_THROW((void)plan(FieldShard<double>{shard, 1}), ArgumentError);
    }
}

}  // namespace
}  // namespace gridshard
