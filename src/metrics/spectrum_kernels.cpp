#include "spectrum_kernels.hpp"

#include <array>
#include <cstring>

#include "../core/kernel_dispatch.hpp"

namespace gridshard::detail {
namespace {

// Four doubles: the eight lanes of a sum are two of them, lanes 0-3 and lanes 4-7. GCC's vector extension:
// every operation is the IEEE one of each element (no contraction: -ffp-contract=off), carried out in one AVX2
// register or two SSE2 ones, whichever the caller's version has. (Eight-double vectors would fill one AVX-512
// register, but GCC spills them in the AVX2 version, and they measured hardly faster with AVX-512.)
using Quad = double __attribute__((vector_size(32)));

// The eight lanes of one sum, lanes 0-3 in `low` and 4-7 in `high`.
struct Lanes {
    Quad low{};
    Quad high{};
};

// Loads go through memcpy: any alignment (a function returning a Quad would change the ABI).
[[gnu::always_inline]] inline void load(Quad& to, const double* from) noexcept {
    std::memcpy(&to, from, sizeof(Quad));
}

[[gnu::always_inline]] inline double tree(const Lanes& lanes) noexcept {
    const Quad& a = lanes.low;
    const Quad& b = lanes.high;
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((b[0] + b[1]) + (b[2] + b[3]));
}

// The fixed-order sums of `group` columns against `functions` (1 or 2) Legendre functions at once. Inlined
// into each instruction-set version of its caller.
template <std::size_t functions, std::size_t group>
[[gnu::always_inline]] inline void sums_of_group(const std::array<const double*, functions>& p,
                                                 const double* const* columns, std::size_t n,
                                                 const std::array<double*, functions>& out) noexcept {
    std::array<std::array<Lanes, group>, functions> acc{};
    std::array<const double*, group> column{};
    for (std::size_t j = 0; j < group; ++j) {
        column[j] = columns[j];
    }
    for (std::size_t k = 0; k < n; k += 8) {
        std::array<Lanes, functions> pk;
        for (std::size_t f = 0; f < functions; ++f) {
            load(pk[f].low, p[f] + k);
            load(pk[f].high, p[f] + k + 4);
        }
        for (std::size_t j = 0; j < group; ++j) {
            Lanes c;
            load(c.low, column[j] + k);
            load(c.high, column[j] + k + 4);
            for (std::size_t f = 0; f < functions; ++f) {
                acc[f][j].low += pk[f].low * c.low;
                acc[f][j].high += pk[f].high * c.high;
            }
        }
    }
    for (std::size_t f = 0; f < functions; ++f) {
        for (std::size_t j = 0; j < group; ++j) {
            out[f][j] = tree(acc[f][j]);
        }
    }
}

template <std::size_t functions>
[[gnu::always_inline]] inline void sums(const std::array<const double*, functions>& p, const double* const* columns,
                                        std::size_t count, std::size_t n, std::array<double*, functions> out) noexcept {
    const auto advance = [&out](std::size_t by) {
        for (double*& o : out) {
            o += by;
        }
    };
    std::size_t j = 0;
    for (; j + 4 <= count; j += 4) {
        sums_of_group<functions, 4>(p, columns + j, n, out);
        advance(4);
    }
    if (j + 2 <= count) {
        sums_of_group<functions, 2>(p, columns + j, n, out);
        advance(2);
        j += 2;
    }
    if (j < count) {
        sums_of_group<functions, 1>(p, columns + j, n, out);
    }
}

}  // namespace

GRIDSHARD_KERNEL void legendre_step(const double* x, double a, double b, const double* p, const double* previous,
                                    double* out, std::size_t n) noexcept {
    for (std::size_t k = 0; k < n; ++k) {
        out[k] = x[k] * a * p[k] - b * previous[k];
    }
}

GRIDSHARD_KERNEL void fixed_order_dots(const double* p, const double* const* columns, std::size_t count, std::size_t n,
                                       double* out) noexcept {
    sums<1>({p}, columns, count, n, {out});
}

GRIDSHARD_KERNEL void fixed_order_dot_pairs(const double* p, const double* q, const double* const* columns,
                                            std::size_t count, std::size_t n, double* out_p, double* out_q) noexcept {
    sums<2>({p, q}, columns, count, n, {out_p, out_q});
}

}  // namespace gridshard::detail
