#pragma once
// Per-channel partial sums of a metric ("terms"), accumulated row by row and merged over a group in one
// allreduce. Internal to the metrics layer.

#include <cstdint>
#include <string>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "gridshard/numerics/fixed_point.hpp"

namespace gridshard::detail {

class PartialSums {
  public:
    /// `slots` sums (for example channels x terms), formed by `summation`. With a window, the exact sums
    /// travel in the compact form (see ExactSum::pack_window) and must be unweighted sums of one type.
    PartialSums(std::int64_t slots, Summation summation, LimbWindow window = {});

    /// Adds `factor * sum(values[0..n))` to slot `slot`. A zero factor adds nothing (NaN included).
    template <class V>
    void add_row(std::int64_t slot, const V* values, std::int64_t n, double factor) {
        if (exact_mode()) {
            add_exact_sum(values, n, factor, exact_[static_cast<std::size_t>(slot)]);
        } else if (factor != 0.0) {
            plain_[static_cast<std::size_t>(slot)] += factor * plain_row_sum(values, n);
        }
    }
    /// Adds `factor` times the exact sum of `terms` values held as fixed-point digit sums on `grid`
    /// (numerics/fixed_point.hpp) to slot `slot`. Reproducible mode only.
    void add_fixed_point(std::int64_t slot, double factor, const FixedPointGrid& grid, std::uint64_t high,
                         std::uint64_t low, std::int64_t terms) {
        grid.deposit(exact_[static_cast<std::size_t>(slot)], factor, high, low, terms);
    }
    /// Adds `factor * count` to slot `slot`, exactly in reproducible mode.
    void add_count(std::int64_t slot, double factor, std::int64_t count);

    /// Adds every slot of `other` (as many slots, the same summation) to this one: exactly in reproducible
    /// mode, so the result does not depend on how the terms were shared between threads. No MPI calls.
    void merge(const PartialSums& other);

    /// Collective over `comm`: one allreduce of every slot (allreduce_exact's, comm/exact_allreduce.hpp, in
    /// reproducible mode); every rank of `comm` must hold as many slots
    /// (agree on the arguments first). Afterwards every rank of `comm` holds the merged sums.
    void allreduce(const Communicator& comm);

    /// The merged sum of `slot`, rounded once (reproducible) or as summed (fast).
    [[nodiscard]] double value(std::int64_t slot) const;
    /// The merged sum of `slot` to about 106 bits (exact mode) or as a double (fast).
    [[nodiscard]] DoubleDouble value_dd(std::int64_t slot) const;
    /// The exact sum of `slot` (reproducible mode), or null (fast mode).
    [[nodiscard]] const ExactSum* exact(std::int64_t slot) const noexcept {
        return exact_mode() ? &exact_[static_cast<std::size_t>(slot)] : nullptr;
    }
    /// Whether the sums are exact (Summation::reproducible).
    [[nodiscard]] bool exact_mode() const noexcept { return summation_ == Summation::reproducible; }

  private:
    static double plain_row_sum(const float* values, std::int64_t n) noexcept;
    static double plain_row_sum(const double* values, std::int64_t n) noexcept;

    Summation summation_;
    LimbWindow window_;
    std::vector<ExactSum> exact_;
    std::vector<double> plain_;
};

}  // namespace gridshard::detail
