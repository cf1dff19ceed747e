// The per-row path of the term engine's weighted terms (exact_products.hpp).

#include "exact_products.hpp"

#include <cmath>
#include <limits>

#include "../core/kernel_dispatch.hpp"

namespace gridshard::detail {
namespace {

// The rounding error of the product `a * b`, rounded to `product`: exact (std::fma is correctly rounded on
// every CPU, so the same bits with or without an FMA unit), and 0 where the product is not finite, so that an
// infinity stays an infinity instead of meeting its own -inf.
inline double product_error(double a, double b, double product) noexcept {
    const double error = std::fma(a, b, -product);
    return product - product == 0.0 ? error : 0.0;
}

// `a_j x_j` of one row into `work`; with `exact`, its rounding error `fma(a_j, x_j, -work_j)` into
// `work + n`, so the two rows sum exactly to the products.
template <class V>
GRIDSHARD_KERNEL void weight_row(const double* weight, const V* x, std::int64_t n, double* __restrict work,
                                 bool exact) {
    double* __restrict error = work + n;
    for (std::int64_t j = 0; j < n; ++j) {
        work[j] = weight[j] * static_cast<double>(x[j]);
    }
    if (exact) {
        for (std::int64_t j = 0; j < n; ++j) {
            error[j] = product_error(weight[j], static_cast<double>(x[j]), work[j]);
        }
    }
}

// The per-point product `f(x_j, y_j)` (in double) of two rows, times the point weights when there are some.
template <class V, class F>
GRIDSHARD_KERNEL void product_row(const V* x, const V* y, const double* weight, std::int64_t n, double* __restrict work,
                                  F f) {
    if (weight != nullptr) {
        for (std::int64_t j = 0; j < n; ++j) {
            work[j] = weight[j] * f(static_cast<double>(x[j]), static_cast<double>(y[j]));
        }
    } else {
        for (std::int64_t j = 0; j < n; ++j) {
            work[j] = f(static_cast<double>(x[j]), static_cast<double>(y[j]));
        }
    }
}

// The exact parts of the per-point square `a_j x_j^2` (with per-point weights `weight`, else `x_j^2`) of a
// masked row, as rows of `n` doubles in `parts` whose exact sum is the exact term; returns how many. A
// float's square is exact in double; a double's is split as hi + lo (product_error), and a weight times
// each part once more.
template <class V>
GRIDSHARD_KERNEL int exact_square_row(const V* x, const double* weight, std::int64_t n, double* __restrict parts) {
    constexpr bool square_exact = std::numeric_limits<V>::digits * 2 <= std::numeric_limits<double>::digits;
    double* __restrict p0 = parts;
    double* __restrict p1 = parts + n;
    double* __restrict p2 = parts + 2 * n;
    double* __restrict p3 = parts + 3 * n;
    if (weight == nullptr) {
        for (std::int64_t j = 0; j < n; ++j) {
            const auto v = static_cast<double>(x[j]);
            p0[j] = v * v;
            if constexpr (!square_exact) {
                p1[j] = product_error(v, v, p0[j]);
            }
        }
        return square_exact ? 1 : 2;
    }
    for (std::int64_t j = 0; j < n; ++j) {
        const auto v = static_cast<double>(x[j]);
        const double square = v * v;
        p0[j] = weight[j] * square;
        p1[j] = product_error(weight[j], square, p0[j]);
        if constexpr (!square_exact) {
            const double square_low = product_error(v, v, square);
            p2[j] = weight[j] * square_low;
            p3[j] = product_error(weight[j], square_low, p2[j]);
        }
    }
    return square_exact ? 2 : 4;
}

}  // namespace

template <class V>
void add_weighted_square(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                         double* __restrict work) {
    const bool per_point = row.point_weights != nullptr;
    if (!sums.exact_mode()) {
        product_row(x, x, per_point ? weight : nullptr, row.cols, work, [](double v, double) { return v * v; });
        sums.add_row(slot, work, row.cols, per_point ? 1.0 : row.factor);
        return;
    }
    const int parts = exact_square_row(x, per_point ? weight : nullptr, row.cols, work);
    for (int k = 0; k < parts; ++k) {
        sums.add_row(slot, work + k * row.cols, row.cols, per_point ? 1.0 : row.factor);
    }
}

template <class V>
void add_weighted(PartialSums& sums, std::int64_t slot, const V* x, const Row<V>& row, const double* weight,
                  double* __restrict work) {
    if (row.point_weights == nullptr) {
        sums.add_row(slot, x, row.cols, row.factor);
        return;
    }
    const bool exact = sums.exact_mode();
    weight_row(weight, x, row.cols, work, exact);
    sums.add_row(slot, work, row.cols, 1.0);
    if (exact) {
        sums.add_row(slot, work + row.cols, row.cols, 1.0);
    }
}

template <class V>
void add_weighted_product(PartialSums& sums, std::int64_t slot, const V* x, const V* y, const Row<V>& row,
                          const double* weight, double* __restrict work, PointProduct product) {
    const bool per_point = row.point_weights != nullptr;
    const double* point_weights = per_point ? weight : nullptr;
    if (product == PointProduct::difference_square) {
        product_row(x, y, point_weights, row.cols, work, [](double a, double b) { return (b - a) * (b - a); });
    } else {
        product_row(x, y, point_weights, row.cols, work, [](double a, double b) { return a * b; });
    }
    sums.add_row(slot, work, row.cols, per_point ? 1.0 : row.factor);
}

template <class V>
void add_valid_weight(PartialSums& sums, std::int64_t slot, const Row<V>& row, const double* weight,
                      std::int64_t valid) {
    if (row.point_weights != nullptr) {
        sums.add_row(slot, weight, row.cols, 1.0);
    } else {
        sums.add_count(slot, row.factor, valid);
    }
}

template void add_weighted_square<float>(PartialSums&, std::int64_t, const float*, const Row<float>&, const double*,
                                         double* __restrict);
template void add_weighted_square<double>(PartialSums&, std::int64_t, const double*, const Row<double>&, const double*,
                                          double* __restrict);
template void add_weighted<float>(PartialSums&, std::int64_t, const float*, const Row<float>&, const double*,
                                  double* __restrict);
template void add_weighted<double>(PartialSums&, std::int64_t, const double*, const Row<double>&, const double*,
                                   double* __restrict);
template void add_weighted_product<float>(PartialSums&, std::int64_t, const float*, const float*, const Row<float>&,
                                          const double*, double* __restrict, PointProduct);
template void add_weighted_product<double>(PartialSums&, std::int64_t, const double*, const double*, const Row<double>&,
                                           const double*, double* __restrict, PointProduct);
template void add_valid_weight<float>(PartialSums&, std::int64_t, const Row<float>&, const double*, std::int64_t);
template void add_valid_weight<double>(PartialSums&, std::int64_t, const Row<double>&, const double*, std::int64_t);

}  // namespace gridshard::detail
