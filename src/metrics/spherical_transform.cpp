// The spherical transform of the power spectrum on one rank (spherical_transform.hpp).

#include "spherical_transform.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <string>

#include "spectrum_kernels.hpp"

namespace gridshard::detail {
namespace {

std::mutex& planner_mutex() {
    static std::mutex mutex;
    return mutex;
}

}  // namespace

RowFft::RowFft(std::int64_t n) : n_(n) {
    const std::lock_guard lock(planner_mutex());
    in_ = fftw_alloc_real(static_cast<std::size_t>(n));
    out_ = fftw_alloc_complex(static_cast<std::size_t>(n / 2 + 1));
    plan_ = fftw_plan_dft_r2c_1d(static_cast<int>(n), in_, out_, FFTW_ESTIMATE | FFTW_NO_SIMD | FFTW_DESTROY_INPUT);
    if (plan_ == nullptr || in_ == nullptr || out_ == nullptr) {
        release();
        throw std::runtime_error("power spectrum: FFTW could not plan a transform of length " + std::to_string(n));
    }
}

RowFft::~RowFft() {
    const std::lock_guard lock(planner_mutex());
    release();
}

void RowFft::release() noexcept {
    if (plan_ != nullptr) {
        fftw_destroy_plan(plan_);
    }
    fftw_free(in_);
    fftw_free(out_);
}

std::vector<double> hemisphere_nodes(const SphereQuadrature& quadrature, const Hemisphere& rows) {
    std::vector<double> x(rows.padded, 0.0);
    for (std::size_t k = 0; k < rows.half; ++k) {
        x[k] = std::cos(std::acos(quadrature.nodes[rows.nlat - 1 - k]));
    }
    return x;
}

std::vector<std::vector<double>> legendre_diagonals(const std::vector<double>& x, const Hemisphere& rows,
                                                    const std::vector<std::int64_t>& orders) {
    std::vector<std::vector<double>> diagonals(orders.size());
    std::vector<double> diagonal(rows.padded, 0.0);
    std::fill_n(diagonal.begin(), rows.half, 1.0 / std::sqrt(4.0 * std::numbers::pi));
    std::int64_t at_m = 0;
    for (std::size_t i = 0; i < orders.size(); ++i) {
        for (; at_m < orders[i]; ++at_m) {
            const auto l = static_cast<double>(at_m + 1);
            for (std::size_t k = 0; k < rows.half; ++k) {
                diagonal[k] = std::sqrt((2.0 * l + 1.0) * (1.0 + x[k]) * (1.0 - x[k]) / 2.0 / l) * diagonal[k];
            }
        }
        diagonals[i] = diagonal;
    }
    return diagonals;
}

void legendre_sums(std::int64_t m, std::int64_t lmax, const Hemisphere& rows, const std::vector<double>& x,
                   const std::vector<double>& diagonal, std::span<const Column* const> columns,
                   std::span<const std::int64_t> slots, double factor, PendingTerms& terms) {
    const std::size_t n = rows.padded;
    // Pbar_lm for four degrees in turn, in the vector of (l - m) mod 4; zero for l = m - 1.
    std::array<std::vector<double>, 4> p;
    for (std::vector<double>& values : p) {
        values.assign(n, 0.0);
    }
    // The real and imaginary parts of every column, E (l + m even) and O (l + m odd).
    std::array<std::vector<const double*>, 2> parts;
    for (const Column* column : columns) {
        for (std::size_t part = 0; part < 2; ++part) {
            parts[0].push_back(column->even(part, rows));
            parts[1].push_back(column->odd(part, rows));
        }
    }
    const auto p_of = [&p, m](std::int64_t l) -> std::vector<double>& {
        return p[static_cast<std::size_t>((l - m + 4) % 4)];
    };
    const auto add_terms = [&](std::int64_t l, const std::vector<double>& sums) {
        for (std::size_t c = 0; c < columns.size(); ++c) {
            const double re = sums[2 * c];
            const double im = sums[2 * c + 1];
            terms.add(static_cast<std::size_t>(slots[c] * lmax + l), factor * (re * re + im * im));
        }
    };
    std::vector<double> sums(2 * columns.size());
    std::vector<double> sums_2(2 * columns.size());
    const auto md = static_cast<double>(m);
    // Degrees four at a time: l and l + 2 share a parity, so their sums share one pass over the columns.
    for (std::int64_t first = m; first < lmax; first += 4) {
        const std::int64_t last = std::min(first + 4, lmax);
        for (std::int64_t l = first; l < last; ++l) {
            const auto ld = static_cast<double>(l);
            if (l == m) {
                std::copy(diagonal.begin(), diagonal.end(), p_of(l).begin());
            } else if (l == m + 1) {
                // a x p - 0 p_previous: the value of torch-harmonics' a * x * p.
                detail::legendre_step(x.data(), std::sqrt(2.0 * ld + 1.0), 0.0, p_of(l - 1).data(), p_of(l - 2).data(),
                                      p_of(l).data(), n);
            } else {
                const double a = std::sqrt((2.0 * ld - 1.0) / (ld - md) * (2.0 * ld + 1.0) / (ld + md));
                const double b = std::sqrt((ld + md - 1.0) / (ld - md) * (2.0 * ld + 1.0) / (2.0 * ld - 3.0) *
                                           (ld - md - 1.0) / (ld + md));
                detail::legendre_step(x.data(), a, b, p_of(l - 1).data(), p_of(l - 2).data(), p_of(l).data(), n);
            }
        }
        for (std::int64_t l = first; l < std::min(first + 2, last); ++l) {
            const std::vector<const double*>& of_parity = parts[static_cast<std::size_t>((l + m) % 2)];
            if (l + 2 < last) {
                detail::fixed_order_dot_pairs(p_of(l).data(), p_of(l + 2).data(), of_parity.data(), of_parity.size(), n,
                                              sums.data(), sums_2.data());
                add_terms(l, sums);
                add_terms(l + 2, sums_2);
            } else {
                detail::fixed_order_dots(p_of(l).data(), of_parity.data(), of_parity.size(), n, sums.data());
                add_terms(l, sums);
            }
        }
    }
}

}  // namespace gridshard::detail
