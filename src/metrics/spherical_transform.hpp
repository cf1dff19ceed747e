#pragma once
// The spherical transform of the power spectrum (spectrum.cpp, docs/spectrum.md), the part of it that runs on one
// rank: the FFT of whole rows, and the Legendre sums of (channel, m) columns of Fourier coefficients folded about
// the equator, in fixed orders (spectrum_kernels.hpp), each term f_m |c_lm|^2 added to an exact sum. Internal to
// the metrics layer; no MPI calls.

#include <fftw3.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gridshard/comm/redistribution.hpp"
#include "gridshard/geometry/sphere_quadrature.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard::detail {

// One deterministic real-to-complex plan for one row length: FFTW_ESTIMATE (no timing) and FFTW_NO_SIMD (the
// same codelets, so the same bits, on every CPU), on buffers of its own. FFTW's planner is not thread-safe;
// plans are made and destroyed under one lock, and executed on their own buffers only.
class RowFft {
  public:
    explicit RowFft(std::int64_t n);
    RowFft(const RowFft&) = delete;
    RowFft& operator=(const RowFft&) = delete;
    ~RowFft();
    [[nodiscard]] std::int64_t size() const noexcept { return n_; }
    /// The transform of `row` (n values, converted exactly to double): bins 0..n/2, unnormalised.
    template <class V>
    std::span<const std::complex<double>> operator()(const V* row) {
        for (std::int64_t j = 0; j < n_; ++j) {
            in_[j] = static_cast<double>(row[j]);
        }
        fftw_execute(plan_);
        return {reinterpret_cast<const std::complex<double>*>(out_), static_cast<std::size_t>(n_ / 2 + 1)};
    }

  private:
    void release() noexcept;
    std::int64_t n_;
    double* in_ = nullptr;
    fftw_complex* out_ = nullptr;
    fftw_plan plan_ = nullptr;
};

// The transform of owned row `s`.
template <class T>
std::span<const std::complex<double>> transform(RowFft& fft, const OwnedRows<T>& rows, std::size_t s) {
    if (rows.in_shard[s] != nullptr) {
        return fft(rows.in_shard[s]);
    }
    return fft(rows.values.data() + rows.assembled[s] * static_cast<std::size_t>(fft.size()));
}

// The rows of one hemisphere. Legendre-Gauss nodes are antisymmetric about the equator (x_{n-1-k} = -x_k,
// exactly: gauss_legendre sets both from one root), and Pbar_lm(-x) = (-1)^(l+m) Pbar_lm(x), so
// `c_lm = sum_{k < half} Pbar_lm(x_k) (l + m even ? E_k : O_k)` with `E_k = Y_k + Y_{n-1-k}`,
// `O_k = Y_k - Y_{n-1-k}` (Y = q X) for the northern rows k < n / 2 and `E = O = Y` at the equator row of an
// odd n: half the rows, and one recurrence on them. The southern rows are thereby taken at exactly -x of their
// mirror, where torch-harmonics evaluates cos(arccos(node)), which may differ from it by an ulp (and, for the
// equiangular and lobatto grids, whose nodes are each rounded on their own, by an ulp or so of the node).
struct Hemisphere {
    std::size_t nlat = 0;
    std::size_t half = 0;    // rows k < half: the northern ones and the equator row of an odd nlat
    std::size_t padded = 0;  // half rounded up to a multiple of 8, the rows beyond `half` zero
    explicit Hemisphere(std::int64_t rows)
        : nlat(static_cast<std::size_t>(rows)), half((nlat + 1) / 2), padded((half + 7) / 8 * 8) {}
};

// One (channel, m) column of weighted Fourier coefficients Y_k = q_k X_m(theta_k), folded:
// `values` holds E re, E im, O re, O im, `padded` values each.
struct Column {
    std::int64_t channel = 0;
    std::int64_t m = 0;
    double* values = nullptr;  // 4 x padded, in a buffer of all the columns

    // Row k's value, before the fold: northern rows (and the equator) in the E parts, southern ones at their
    // mirror's index in the O parts.
    void place(const Hemisphere& rows, std::size_t k, std::complex<double> y) noexcept {
        const bool south = k >= rows.half;
        const std::size_t at = (south ? 2 * rows.padded : 0) + (south ? rows.nlat - 1 - k : k);
        values[at] = y.real();
        values[at + rows.padded] = y.imag();
    }
    // Zeros the rows beyond `half` of each part (the columns' buffer is not initialised).
    void zero_padding(const Hemisphere& rows) noexcept {
        for (std::size_t part = 0; part < 4; ++part) {
            std::fill(values + part * rows.padded + rows.half, values + (part + 1) * rows.padded, 0.0);
        }
    }
    // Once every row is placed: E = north + south, O = north - south (the equator row: E = O = its value).
    void fold(const Hemisphere& rows) noexcept {
        for (std::size_t part = 0; part < 2; ++part) {
            double* even = values + part * rows.padded;
            double* odd = values + (2 + part) * rows.padded;
            for (std::size_t k = 0; k < rows.nlat / 2; ++k) {
                const double north = even[k];
                const double south = odd[k];
                even[k] = north + south;
                odd[k] = north - south;
            }
            if (rows.nlat % 2 == 1) {
                odd[rows.half - 1] = even[rows.half - 1];
            }
        }
    }
    [[nodiscard]] const double* even(std::size_t part, const Hemisphere& rows) const noexcept {
        return values + part * rows.padded;
    }
    [[nodiscard]] const double* odd(std::size_t part, const Hemisphere& rows) const noexcept {
        return values + (2 + part) * rows.padded;
    }
};

// The terms f_m |c_lm|^2 of one thread, per (channel slot, l): held until `batch` of one sum are there, then
// added to its exact sum as one block (add_exact_sum), the same exact sum as adding them one by one (exact
// sums do not depend on grouping or order) for a fraction of the cost. `range` takes their exponents.
class PendingTerms {
  public:
    static constexpr std::size_t batch = 64;
    explicit PendingTerms(std::size_t sums)
        : values_(new double[sums * batch]), counts_(sums, 0), power_(sums) {}  // values_ written before read
    /// No terms, zero sums and no range again, for the next spectrum.
    void clear() noexcept {
        std::fill(counts_.begin(), counts_.end(), 0);
        for (ExactSum& sum : power_) {
            sum.clear();
        }
        range_ = {};
    }
    void add(std::size_t sum, double term) noexcept {
        values_[sum * batch + counts_[sum]] = term;
        if (++counts_[sum] == batch) {
            flush(sum);
        }
    }
    /// Adds every held term; then `power()` holds this thread's exact sums.
    void flush_all() noexcept {
        for (std::size_t sum = 0; sum < counts_.size(); ++sum) {
            flush(sum);
        }
    }
    [[nodiscard]] const std::vector<ExactSum>& power() const noexcept { return power_; }
    [[nodiscard]] const ExponentRange& range() const noexcept { return range_; }

  private:
    void flush(std::size_t sum) noexcept {
        const double* terms = values_.get() + sum * batch;
        for (std::size_t i = 0; i < counts_[sum]; ++i) {
            range_.add(terms[i]);
        }
        add_exact_sum(terms, static_cast<std::int64_t>(counts_[sum]), 1.0, power_[sum]);
        counts_[sum] = 0;
    }
    std::unique_ptr<double[]> values_;  // (sums, batch)
    std::vector<std::size_t> counts_;
    std::vector<ExactSum> power_;
    ExponentRange range_;
};

// x_k = cos(flip(arccos(nodes)))_k, as torch-harmonics forms it (row 0 at the north pole), for the northern rows and
// the equator row of `rows`; zero in the padding.
[[nodiscard]] std::vector<double> hemisphere_nodes(const SphereQuadrature& quadrature, const Hemisphere& rows);

// Pbar_mm(x_k) for each of `orders` (ascending), advancing the diagonal through every m below (zero in the padding).
[[nodiscard]] std::vector<std::vector<double>> legendre_diagonals(const std::vector<double>& x, const Hemisphere& rows,
                                                                  const std::vector<std::int64_t>& orders);

// The Legendre sums of the columns of one m (all channels at once, one recurrence on the northern rows), into
// `terms` at (channel slot) * lmax + l. `diagonal` holds Pbar_mm(x_k) and `x` the nodes x_k for k < rows.padded
// (zero beyond rows.half); torch-harmonics' recurrence (sht.py, _precompute_legpoly), in fp64. Each c_lm's sums
// over k, of its real and its imaginary part, are fixed_order_dots' (spectrum_kernels.hpp), so a channel's bits
// depend neither on the other channels summed with it nor on the instruction set.
void legendre_sums(std::int64_t m, std::int64_t lmax, const Hemisphere& rows, const std::vector<double>& x,
                   const std::vector<double>& diagonal, std::span<const Column* const> columns,
                   std::span<const std::int64_t> slots, double factor, PendingTerms& terms);

}  // namespace gridshard::detail
