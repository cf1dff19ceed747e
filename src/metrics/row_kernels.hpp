#pragma once
// Row-by-row building blocks of the metrics: argument checks, weight access, weighted and NaN-aware
// row contributions to PartialSums, and the gradient magnitude of one row. Internal; no MPI calls.

#include <cmath>
#include <cstdint>
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

/// Scratch rows for one metric call.
struct Scratch {
    explicit Scratch(std::int64_t cols, int rows = 2)
        : buffers(static_cast<std::size_t>(rows), std::vector<double>(static_cast<std::size_t>(cols))) {}
    double* operator[](int k) noexcept { return buffers[static_cast<std::size_t>(k)].data(); }
    std::vector<std::vector<double>> buffers;
};

/// Adds `sum_j where(a_j != 0, v_j, 0) * a_j` of one row to `slot`; `work` holds n doubles.
template <class V>
void add_weighted_row(PartialSums& sums, std::int64_t slot, const V* values, std::int64_t n, const RowWeights& w,
                      std::int64_t row, double* work) {
    if (!w.per_point()) {
        sums.add_row(slot, values, n, w.row(row));
        return;
    }
    const double* a = w.points(row);
    for (std::int64_t j = 0; j < n; ++j) {
        work[j] = a[j] == 0.0 ? 0.0 : a[j] * static_cast<double>(values[j]);
    }
    sums.add_row(slot, work, n, 1.0);
}

/// Adds the weighted sum of the non-NaN values of one row to `value_slot` and their weight to
/// `weight_slot`; `work` and `work2` hold n doubles each.
template <class V>
void add_valid_row(PartialSums& sums, std::int64_t value_slot, std::int64_t weight_slot, const V* values,
                   std::int64_t n, const RowWeights& w, std::int64_t row, double* work, double* work2) {
    if (!w.per_point()) {
        std::int64_t valid = 0;
        for (std::int64_t j = 0; j < n; ++j) {
            const double v = static_cast<double>(values[j]);
            const bool ok = v == v;
            work[j] = ok ? v : 0.0;
            valid += ok ? 1 : 0;
        }
        sums.add_row(value_slot, work, n, w.row(row));
        sums.add_count(weight_slot, w.row(row), valid);
        return;
    }
    const double* a = w.points(row);
    for (std::int64_t j = 0; j < n; ++j) {
        const double v = static_cast<double>(values[j]);
        const bool ok = v == v && a[j] != 0.0;
        work[j] = ok ? a[j] * v : 0.0;
        work2[j] = ok ? a[j] : 0.0;
    }
    sums.add_row(value_slot, work, n, 1.0);
    sums.add_row(weight_slot, work2, n, 1.0);
}

/// Gradient magnitudes of one field, row by row, with torch.gradient semantics at the global edges
/// and halo values at shard edges. `field` is this rank's shard; its halos are field `field_index`
/// of `halo` (see HaloExchange::execute for several fields).
template <class T>
class GradientRows {
  public:
    GradientRows(const GridShape& grid, const Box& box, const GradientOptions& options, std::span<const T> field,
                 std::int64_t channels, const HaloBuffers<T>& halo, std::int64_t field_index);
    /// Writes the magnitudes of row `i` (local index) of channel `c` to `out` (cols values).
    void row(std::int64_t c, std::int64_t i, double* out);

  private:
    enum class RowCase { first, interior, last };  // the global row's place: one-sided or central
    template <RowCase row_case>
    void stencil_row(const T* above, const T* here, const T* below, std::int64_t cols, double lon_scale,
                     double* __restrict out) const;

    GridShape grid_;
    Box box_;
    GradientOptions options_;
    std::span<const T> field_;
    std::int64_t channels_;
    const HaloBuffers<T>* halo_;
    std::int64_t halo_channel0_;
    double lat_scale_ = 1.0;  // 1 / (R dlat) in metres mode
};

/// What is wrong with gradient options for a box of `rows` rows (empty when nothing): in metres, the
/// spacings and radius must be positive and finite and every row needs a latitude in [-90, 90].
[[nodiscard]] std::string gradient_options_error(const GradientOptions& options, std::int64_t rows);

/// Throws ArgumentError unless a one-cell-halo gradient can be formed on `grid`.
void check_gradient_grid(const GridShape& grid);

}  // namespace gridshard::detail
