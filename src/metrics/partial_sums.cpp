#include "partial_sums.hpp"

#include <array>
#include <span>

#include "../core/kernel_dispatch.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/exact_allreduce.hpp"

namespace gridshard::detail {
namespace {

// Eight independent lanes so the compiler can vectorise without reassociating one chain.
template <class V>
GRIDSHARD_KERNEL double lane_sum(const V* values, std::int64_t n) noexcept {
    std::array<double, 8> lanes{};
    std::int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        for (std::size_t k = 0; k < 8; ++k) {
            lanes[k] += static_cast<double>(values[j + static_cast<std::int64_t>(k)]);
        }
    }
    double total = 0.0;
    for (; j < n; ++j) {
        total += static_cast<double>(values[j]);
    }
    for (double lane : lanes) {
        total += lane;
    }
    return total;
}

}  // namespace

PartialSums::PartialSums(std::int64_t slots, Summation summation, LimbWindow window)
    : summation_(summation), window_(window) {
    if (exact_mode()) {
        exact_.resize(static_cast<std::size_t>(slots));
    } else {
        plain_.assign(static_cast<std::size_t>(slots), 0.0);
    }
}

double PartialSums::plain_row_sum(const float* values, std::int64_t n) noexcept {
    return lane_sum(values, n);
}
double PartialSums::plain_row_sum(const double* values, std::int64_t n) noexcept {
    return lane_sum(values, n);
}

void PartialSums::add_count(std::int64_t slot, double factor, std::int64_t count) {
    if (exact_mode()) {
        exact_[static_cast<std::size_t>(slot)].add_product(factor, count, 0);
    } else {
        plain_[static_cast<std::size_t>(slot)] += factor * static_cast<double>(count);
    }
}

void PartialSums::merge(const PartialSums& other) {
    if (exact_mode()) {
        for (std::size_t s = 0; s < exact_.size(); ++s) {
            exact_[s].add(other.exact_[s]);
        }
    } else {
        for (std::size_t s = 0; s < plain_.size(); ++s) {
            plain_[s] += other.plain_[s];
        }
    }
}

void PartialSums::allreduce(const Communicator& comm) {
    if (!exact_mode()) {
        allreduce_sum_in_place(comm, std::span<double>(plain_));
        return;
    }
    allreduce_exact(comm, exact_, window_);
}

double PartialSums::value(std::int64_t slot) const {
    return exact_mode() ? exact_[static_cast<std::size_t>(slot)].to_double() : plain_[static_cast<std::size_t>(slot)];
}

DoubleDouble PartialSums::value_dd(std::int64_t slot) const {
    return exact_mode() ? exact_[static_cast<std::size_t>(slot)].to_double_double()
                        : DoubleDouble{plain_[static_cast<std::size_t>(slot)], 0.0};
}

}  // namespace gridshard::detail
