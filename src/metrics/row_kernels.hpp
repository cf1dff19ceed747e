#pragma once
// Row-by-row building blocks of the metrics: argument checks, weight access, weighted and NaN-aware
// row contributions to PartialSums, and the gradient magnitude of one row. Internal; no MPI calls.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/metrics/field.hpp"
#include "partial_sums.hpp"

namespace gridshard::detail {

/// The weights of a rank's box, row by row, and what is wrong with them (empty when nothing).
class RowWeights {
  public:
    RowWeights(Weights weights, const Box& box);
    [[nodiscard]] const std::string& error() const noexcept { return error_; }
    [[nodiscard]] bool per_point() const noexcept { return weights_.per_point; }
    /// Row i's weight (per-row weights).
    [[nodiscard]] double row(std::int64_t i) const noexcept { return weights_.values[static_cast<std::size_t>(i)]; }
    /// Row i's point weights (per-point weights).
    [[nodiscard]] const double* points(std::int64_t i) const noexcept { return weights_.values.data() + i * cols_; }
    /// Adds this rank's total weight to `slot`.
    void add_total(PartialSums& sums, std::int64_t slot) const;

  private:
    Weights weights_;
    std::int64_t rows_;
    std::int64_t cols_;
    std::string error_;
};

/// What is wrong with a shard of `channels` x box (empty when nothing); `name` names the argument.
template <class T>
std::string shard_error(const FieldShard<T>& x, const Box& box, const char* name) {
    if (x.channels < 1) {
        return std::string(name) + ": channels must be >= 1, got " + std::to_string(x.channels);
    }
    if (static_cast<std::int64_t>(x.values.size()) != x.channels * box.area()) {
        return std::string(name) + " has " + std::to_string(x.values.size()) +
               " values but (channels=" + std::to_string(x.channels) + ", lat=" + std::to_string(box.lat.size()) +
               ", lon=" + std::to_string(box.lon.size()) + ") needs " + std::to_string(x.channels * box.area());
    }
    return {};
}

/// Gradient magnitudes of one field, row by row, with torch.gradient semantics at the global edges
/// and halo values at shard edges. `field` is this rank's shard; its halos are field `field_index`
/// of `halo` (see HaloExchange::execute for several fields).
///
/// Magnitudes are computed in the field's own type: a float field's in float arithmetic (differences of
/// neighbours, the scaling, the squares and a float square root; relative error below 2^-22, float's own
/// accuracy, with no overflow or underflow of the squares: large and tiny differences are scaled by a
/// power of two first), a double field's in double. Every point, at a shard edge or inside, goes through
/// the one `magnitude` below, so its bits do not depend on where the shard edges fall.
template <class T>
class GradientRows {
  public:
    GradientRows(const GridShape& grid, const Box& box, const GradientOptions& options, std::span<const T> field,
                 std::int64_t channels, const HaloBuffers<T>& halo, std::int64_t field_index);
    /// Writes the magnitudes of row `i` (local index) of channel `c` to `out` (cols values).
    void row(std::int64_t c, std::int64_t i, T* out) const;

    enum class RowCase { first, interior, last };  // the global row's place: one-sided or central
    /// One row's stencil, for a caller that forms the interior magnitudes itself (the term engine's fused pass):
    /// the neighbour rows, the interior columns' factors, and the magnitudes of the first and last column (which
    /// read halo cells). `row` is this and interior_magnitude over columns 1 .. cols - 2.
    struct Stencil {
        const T* above = nullptr;
        const T* here = nullptr;
        const T* below = nullptr;
        const T* ahead = nullptr;  // the shard's row after `below`, to prefetch; null past the shard's end
        T lat_factor = 0;
        T lon_factor = 0;
        RowCase row_case = RowCase::interior;
        T first = 0;
        T last = 0;
    };
    [[nodiscard]] Stencil stencil(std::int64_t c, std::int64_t i) const;

    /// The latitude difference of column j of a stencil whose row is `row_case` (torch.gradient's: one-sided on
    /// the first and last global row, central inside); a constant, so that the loops calling this vectorise.
    template <RowCase row_case>
    [[nodiscard]] static T lat_difference(const Stencil& s, std::int64_t j) noexcept {
        if constexpr (row_case == RowCase::first) {
            return s.below[j] - s.here[j];
        } else if constexpr (row_case == RowCase::last) {
            return s.here[j] - s.above[j];
        } else {
            return s.below[j] - s.above[j];
        }
    }

    /// Asks for the part of the stencil's row `ahead` under columns [start, start + count) (a hint; changes no
    /// value), so that its first touch overlaps this row's arithmetic.
    static void prefetch_ahead(const Stencil& s, std::int64_t start, std::int64_t count, std::int64_t cols) noexcept {
        if (s.ahead == nullptr) {
            return;
        }
        for (std::int64_t line = 0; line < count; line += 64 / static_cast<std::int64_t>(sizeof(T))) {
            __builtin_prefetch(s.ahead + std::min(start + line, cols - 1), 0, 3);
        }
    }

    /// The magnitude of interior column j (1 <= j <= cols - 2) of a stencil by the unscaled formula, and whether
    /// it needed scaling (then `row`'s value is the scaled formula's, not this one).
    template <RowCase row_case>
    [[gnu::always_inline]] static T interior_magnitude(const Stencil& s, std::int64_t j, bool& needs_scaling) noexcept {
        const T lat_difference = GradientRows::lat_difference<row_case>(s, j);
        const T lon_difference = s.here[j + 1] - s.here[j - 1];
        constexpr int range = std::numeric_limits<T>::max_exponent / 2 - 2;  // as `magnitude`'s
        const T big = std::ldexp(T{1}, range);
        const T small = std::ldexp(T{1}, -range);
        const T lat_term = lat_difference * s.lat_factor;
        const T lon_term = lon_difference * s.lon_factor;
        const T largest = std::max(std::abs(lat_term), std::abs(lon_term));
        needs_scaling = (largest > big) | ((largest < small) & (largest != T{0}));
        return std::sqrt(lat_term * lat_term + lon_term * lon_term);
    }

  private:
    template <RowCase row_case>
    void stencil_row(const Stencil& s, std::int64_t cols, T* __restrict out) const;

    GridShape grid_;
    Box box_;
    GradientOptions options_;
    std::span<const T> field_;
    std::int64_t channels_;
    const HaloBuffers<T>* halo_;
    std::int64_t halo_channel0_;
    T lat_scale_ = 1;  // 1 / (R dlat) in metres mode
};

/// What is wrong with gradient options for a box of `rows` rows (empty when nothing): in metres, the
/// spacings and radius must be positive and finite and every row needs a latitude in [-90, 90].
[[nodiscard]] std::string gradient_options_error(const GradientOptions& options, std::int64_t rows);

/// Throws ArgumentError unless a one-cell-halo gradient can be formed on `grid`.
void check_gradient_grid(const GridShape& grid);

}  // namespace gridshard::detail
