#pragma once
/// @file
/// Power spectra of sharded fields (docs/spectrum.md): the spherical-harmonic power per degree l, as ACE and
/// Makani compute it with torch-harmonics' RealSHT, and the zonal (per latitude row) power per wavenumber m.
///
/// Exact under any decomposition by moving data, never partial spectral sums: every complete sum (the FFT
/// of a whole row, the Legendre sum over all rows of one (channel, m)) runs on one rank in a fixed order,
/// and the only sum across ranks, over m, is an exact sum (numerics/exact_sum.hpp). So the spectrum is the
/// serial one bit for bit on every mesh, split rule, thread count and instruction set.
///
/// @code
///   #include "gridshard/metrics/spectrum.hpp"
///   std::vector<double> spectrum(const gridshard::ShardedGrid& grid, const std::vector<float>& shard,
///                                std::int64_t channels) {
///       gridshard::SpectrumSpec spec;  // ACE's: legendre-gauss, torch-harmonics 0.8.0's truncation
///       // shard: (channels, box rows, box cols); the result: (channels, L) on every spatial rank
///       return gridshard::spherical_power_spectrum(grid, gridshard::FieldShard<float>{shard, channels}, spec);
///   }
/// @endcode

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <memory>

#include "gridshard/geometry/sphere_quadrature.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard {

/// How the degrees' power sums over orders m.
enum class SpectrumConvention {
    /// `P_l = sum_m |c_lm|^2`, m >= 0 once each (ACE's `spherical_power_spectrum`).
    ace,
    /// m > 0 doubled, for the negative orders (Makani's, and Parseval's: `sum_l P_l = int f^2`).
    full,
};

/// Where the transform's work happens (the result is the same bits in both).
enum class SpectrumMode {
    /// Field owners when there are at least as many channels as spatial ranks, transposes otherwise.
    automatic,
    /// Each whole field to one owner (one all-to-all of the input's own precision).
    field_owners,
    /// Rows over the lon group, FFT, then (channel, m) pairs over the spatial group.
    transposes,
};

/// The truncation rule for the default `lmax` and `mmax`.
enum class SpectrumTruncation {
    /// torch-harmonics 0.8.0 (ACE's pin): L = nlat (nlat - 1 for lobatto), M = nlon / 2 + 1.
    torch_harmonics_0_8,
    /// Triangular: L = M = min(L of 0.8.0, nlon / 2 + 1), and for the equiangular grid L = M = (nlat + 1) / 2,
    /// the rule Makani's equiangular models use (not yet compared with torch-harmonics 0.9's own code).
    triangular,
};

/// What `spherical_power_spectrum` computes.
struct SpectrumSpec {
    SphereGrid grid = SphereGrid::legendre_gauss;
    SpectrumTruncation truncation = SpectrumTruncation::torch_harmonics_0_8;
    /// Degrees 0..lmax-1 and orders 0..mmax-1; 0 takes the truncation's value.
    std::int64_t lmax = 0;
    std::int64_t mmax = 0;
    SpectrumConvention convention = SpectrumConvention::ace;
    SpectrumMode mode = SpectrumMode::automatic;
};

/// Per-row weighting of the zonal spectrum.
enum class ZonalWeighting {
    none,           ///< 1
    cos_lat,        ///< cos(lat) (Makani)
    circumference,  ///< 2 pi R cos(lat), R = 6,367,500 m (WeatherBench 2's zonal energy spectrum)
};

/// Parsers and names: "ace", "full"; "automatic", "field-owners", "transposes"; "torch-harmonics-0.8",
/// "triangular"; "none", "cos-lat", "circumference" (the grids': geometry/sphere_quadrature.hpp). The parsers throw
/// ArgumentError naming the value.
[[nodiscard]] SpectrumConvention parse_spectrum_convention(std::string_view text);
[[nodiscard]] std::string_view to_string(SpectrumConvention convention) noexcept;
[[nodiscard]] SpectrumMode parse_spectrum_mode(std::string_view text);
[[nodiscard]] SpectrumTruncation parse_spectrum_truncation(std::string_view text);
[[nodiscard]] std::string_view to_string(SpectrumTruncation truncation) noexcept;
[[nodiscard]] ZonalWeighting parse_zonal_weighting(std::string_view text);

/// The degrees L and orders M the spec gives for `grid`; throws ArgumentError naming lmax or mmax when
/// they exceed what the grid resolves (mmax > nlon / 2 + 1, lmax > nlat). No MPI calls.
struct SpectrumSize {
    std::int64_t lmax = 0;
    std::int64_t mmax = 0;
};
[[nodiscard]] SpectrumSize spectrum_size(const SpectrumSpec& spec, GridShape grid);

/// ACE's summaries of a mean predicted spectrum against the mean target one (fme's power spectrum aggregator,
/// `_get_spectrum_metrics`): with r_l = prediction_l / target_l - 1 over the L degrees, the smallest scale's r_{L-1},
/// the sum of the positive r_l over L, the sum of the negative ones over L, and |positive| + |negative|. A NaN r_l of
/// finite spectra (both powers zero at degree l) counts in neither sum, as in ACE; where either spectrum is not finite
/// at some degree (values that were not finite, not filled), every summary is NaN, where ACE's sums give 0 for three
/// of them. No MPI calls.
struct SpectrumBiases {
    double smallest_scale = 0.0;
    double positive = 0.0;
    double negative = 0.0;
    double mean_abs = 0.0;
};
[[nodiscard]] SpectrumBiases spectrum_norm_biases(std::span<const double> prediction, std::span<const double> target);

/// The spherical-harmonic power spectrum of every channel: `(channels, L)` in double, the same on every
/// rank of the spatial group. `c_lm = sum_k q_k Pbar_lm(x_k) X_m(theta_k)`, `X_m = (2 pi / nlon) rfft`,
/// orthonormal Pbar, row 0 at x = 1 (torch-harmonics' RealSHT); `P_l = sum_{m < min(l + 1, M)} f_m |c_lm|^2`
/// with f_m = 1 (ace) or 2 for m > 0 (full). Values that are not finite propagate into their channel's
/// spectrum (fill them first). Collective over `spatial`: an agreement on the arguments, then two all-to-alls (of
/// whole rows in the input's own type, then of complex orders; in field-owner mode the second moves nothing between
/// ranks), a small all-reduce of the terms' exponent range and an all-reduce of the exact sums over m in the window
/// it gives (comm/exact_allreduce.hpp). Plans its transform for this call alone (SpectrumPlan below keeps the plan
/// for the next).
template <class T>
[[nodiscard]] std::vector<double> spherical_power_spectrum(const ShardedGrid& grid, FieldShard<T> field,
                                                           const SpectrumSpec& spec = {});

/// spherical_power_spectrum planned once for fields of `channels` channels on `grid` and reused: who owns which rows
/// and (channel, m) columns, the quadrature, the Legendre recurrence's diagonals and the row transforms are made by
/// the constructor, not by each call (a spec the grid cannot take is kept and raised, on every rank alike, by each
/// call). Keeps a copy of the grid's mesh (sharing its communicators), so it may outlive the grid; movable, not
/// copyable, and one call at a time: the calls share its row transforms and its working memory, which the first call
/// makes and the plan keeps until it goes (the Fourier columns of the orders this rank owns, 32 bytes per
/// hemisphere row of each, and each thread's exact sums), so that no later call takes fresh pages.
///
/// @code
///   #include "gridshard/metrics/spectrum.hpp"
///   // The spectra of many steps of the same fields: planned once.
///   void spectra(const gridshard::ShardedGrid& grid, const std::vector<std::vector<float>>& steps,
///                std::int64_t channels, std::vector<std::vector<double>>& out) {
///       gridshard::SpectrumPlan plan(grid, channels);  // no MPI calls
///       for (const std::vector<float>& shard : steps) {
///           out.push_back(plan(gridshard::FieldShard<float>{shard, channels}));  // collective over `spatial`
///       }
///   }
/// @endcode
class SpectrumPlan {
  public:
    /// No MPI calls.
    SpectrumPlan(const ShardedGrid& grid, std::int64_t channels, const SpectrumSpec& spec = {});
    SpectrumPlan(SpectrumPlan&&) noexcept;
    SpectrumPlan& operator=(SpectrumPlan&&) noexcept;
    SpectrumPlan(const SpectrumPlan&) = delete;
    SpectrumPlan& operator=(const SpectrumPlan&) = delete;
    ~SpectrumPlan();

    /// The channels of the fields it takes, and L, the degrees of each channel's spectrum (0 when the spec does not
    /// apply to the grid).
    [[nodiscard]] std::int64_t channels() const noexcept;
    [[nodiscard]] std::int64_t degrees() const noexcept;

    /// spherical_power_spectrum(grid, field, spec): the same bits, the same messages. Collective over `spatial`: an
    /// agreement on the arguments (the field's channels, which must be the plan's, and element size, and the spec),
    /// then the all-to-alls and the all-reduce of the exact sums.
    template <class T>
    [[nodiscard]] std::vector<double> operator()(FieldShard<T> field);

  private:
    struct State;
    std::unique_ptr<State> state_;
};

/// The zonal power spectrum of each row of this rank's box: `(channels, box rows, nlon / 2 + 1)` in double,
/// `w_k f_m |rfft(x)_m / nlon|^2` with f_m = 1 at m = 0 and 2 elsewhere (the Nyquist bin included, as
/// Makani and WeatherBench 2 do). `lat_deg` holds the latitudes of this rank's rows (needed unless the
/// weighting is none). Every rank of a lon group gets its rows' spectra. Collective over `lon`: an
/// agreement on the arguments, one all-to-all of whole rows, one all-gather of the row spectra.
template <class T>
[[nodiscard]] std::vector<double> zonal_power_spectrum(const ShardedGrid& grid, FieldShard<T> field,
                                                       ZonalWeighting weighting = ZonalWeighting::none,
                                                       std::span<const double> lat_deg = {});

}  // namespace gridshard
