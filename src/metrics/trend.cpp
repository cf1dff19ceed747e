#include "gridshard/metrics/trend.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"
#include "field_sums.hpp"
#include "gridshard/comm/exact_allreduce.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/numerics/double_double.hpp"

namespace gridshard {
namespace {

/// `size` values `y` at time t into the running sums of the products' rounded parts (t y), of their remainders (fma)
/// and, `WithValues`, of the values. Every array its own (restrict) and no branch, so the loop vectorises over the
/// points (a kernel of its own: inlined into the caller's lambda it lost the restrict and did not); each point's
/// arithmetic is the same whatever the vector width.
template <bool WithValues>
GRIDSHARD_KERNEL void add_products(const double* __restrict y, std::int64_t size, double t,
                                   double* __restrict value_sum, double* __restrict value_error,
                                   double* __restrict value_special, double* __restrict product_sum,
                                   double* __restrict product_error, double* __restrict product_special,
                                   double* __restrict remainder_sum, double* __restrict remainder_error,
                                   double* __restrict remainder_special) noexcept {
    using detail::accumulate;
    for (std::int64_t k = 0; k < size; ++k) {
        const double product = t * y[k];
        if constexpr (WithValues) {
            accumulate(y[k], value_sum[k], value_error[k], value_special[k]);
        }
        accumulate(product, product_sum[k], product_error[k], product_special[k]);
        accumulate(std::fma(t, y[k], -product), remainder_sum[k], remainder_error[k], remainder_special[k]);
    }
}

/// Points [0, n) of `fields` (`count` fields, `stride` apart) at time t, in one pass: their exact sum s + e (TwoSum,
/// field by field), and t s and t e each as a rounded part and its remainder (fma), into the running sums of the
/// products' rounded parts (t s, t e), of their remainders and, `WithValues`, of the values (s, e).
template <class T, bool WithValues>
GRIDSHARD_KERNEL void add_fields(const T* __restrict fields, std::int64_t count, std::int64_t stride, std::int64_t n,
                                 double t, TimeMeanAccumulator::RunningSums values,
                                 TimeMeanAccumulator::RunningSums products,
                                 TimeMeanAccumulator::RunningSums remainders) noexcept {
    detail::for_each_field_sum(
        fields, count, stride, n, [&](std::int64_t first, std::int64_t size, const double* s, const double* e) {
            const auto at = [first](double* sums) { return sums == nullptr ? nullptr : sums + first; };
            const auto add = [&](const double* y) {
                add_products<WithValues>(y, size, t, at(values.sum), at(values.error), at(values.special),
                                         at(products.sum), at(products.error), at(products.special), at(remainders.sum),
                                         at(remainders.error), at(remainders.special));
            };
            add(s);
            if (count > 1) {  // one field's e is 0, and so are its products
                add(e);
            }
        });
}

}  // namespace

TrendAccumulator::TrendAccumulator(const ShardedGrid& grid, std::int64_t channels, TrendSums sums)
    : products_(grid, channels), remainders_(grid, channels) {
    if (sums == TrendSums::slopes) {
        values_.emplace(grid, channels);
    }
}

template <class T>
void TrendAccumulator::add(double t, std::span<const T> fields) {
    const std::size_t points = products_.points();
    if (points == 0 ? !fields.empty() : fields.size() % points != 0) {
        throw ArgumentError("TrendAccumulator::add: " + std::to_string(fields.size()) +
                            " values are not whole fields of " + std::to_string(points) + " points");
    }
    if (!std::isfinite(t)) {
        throw ArgumentError("TrendAccumulator::add: the time " + std::to_string(t) + " is not finite");
    }
    const auto count = static_cast<std::int64_t>(points == 0 ? 0 : fields.size() / points);
    if (count == 0) {
        return;
    }
    const auto n = static_cast<std::int64_t>(points);
    const TimeMeanAccumulator::RunningSums values =
        values_ ? values_->running_sums() : TimeMeanAccumulator::RunningSums{nullptr, nullptr, nullptr};
    const TimeMeanAccumulator::RunningSums products = products_.running_sums();
    const TimeMeanAccumulator::RunningSums remainders = remainders_.running_sums();
    const auto at = [](TimeMeanAccumulator::RunningSums r, std::int64_t begin) {
        return TimeMeanAccumulator::RunningSums{r.sum + begin, r.error + begin, r.special + begin};
    };
    detail::for_each_block(n, count, [&](std::int64_t begin, std::int64_t size) {
        if (values_) {
            add_fields<T, true>(fields.data() + begin, count, n, size, t, at(values, begin), at(products, begin),
                                at(remainders, begin));
        } else {
            add_fields<T, false>(fields.data() + begin, count, n, size, t, values, at(products, begin),
                                 at(remainders, begin));
        }
    });
    if (values_) {
        values_->count_steps(count);
    }
    products_.count_steps(count);
    remainders_.count_steps(count);
    for (std::int64_t m = 0; m < count; ++m) {
        times_.add(t);
        squares_.add_product(t, t);
    }
}

void TrendAccumulator::merge_over_data() {
    if (values_) {
        values_->merge_over_data();
    }
    products_.merge_over_data();
    remainders_.merge_over_data();
    ExactSum times[] = {times_, squares_};
    allreduce_exact(products_.grid().mesh().data(), times);
    times_ = times[0];
    squares_ = times[1];
}

std::optional<TrendAccumulator::PointSums> TrendAccumulator::point_sums(std::size_t k) const {
    // Without the values' sums a value that was not finite still shows in its product (t is finite: t y is not).
    const TimeMeanAccumulator::PointSum y =
        values_ ? values_->point_sum(k) : TimeMeanAccumulator::PointSum{0.0, 0.0, 0.0};
    const TimeMeanAccumulator::PointSum p = products_.point_sum(k);
    const TimeMeanAccumulator::PointSum r = remainders_.point_sum(k);
    if (y.special != 0.0 || p.special != 0.0 || r.special != 0.0) {
        return std::nullopt;
    }
    return PointSums{dd::two_sum(y.hi, y.lo), dd::add(dd::two_sum(p.hi, p.lo), dd::two_sum(r.hi, r.lo))};
}

std::vector<double> TrendAccumulator::slopes(double time_unit) const {
    if (!values_) {
        throw std::logic_error("TrendAccumulator::slopes: this accumulator keeps the weighted sums only");
    }
    const auto n = static_cast<double>(products_.steps());
    ExactSum denominator;
    denominator.add_scaled(squares_, n);
    for (const double part : times_.expansion()) {
        denominator.add_scaled(times_, -part);
    }
    const double d = denominator.to_double();
    const std::size_t points = products_.points();
    std::vector<double> out(points, std::numeric_limits<double>::quiet_NaN());
    if (!(d > 0.0)) {
        return out;
    }
    const DoubleDouble sum_of_times = times_.to_double_double();
    const auto n_points = static_cast<std::int64_t>(points);
    GRIDSHARD_PRAGMA(omp parallel for schedule(static) num_threads(detail::threads_for(n_points, 1)))
    for (std::int64_t point = 0; point < n_points; ++point) {  // each point on its own: any thread count, same bits
        const auto k = static_cast<std::size_t>(point);
        const std::optional<PointSums> sums = point_sums(k);
        if (!sums) {
            continue;  // a value that was not finite: NaN, as plain sums give
        }
        const DoubleDouble numerator =
            dd::add(dd::multiply({n, 0.0}, sums->products), dd::negate(dd::multiply(sum_of_times, sums->values)));
        out[k] = (numerator.hi + numerator.lo) / d * time_unit;
    }
    return out;
}

std::vector<double> TrendAccumulator::weighted_sums() const {
    const std::size_t points = products_.points();
    std::vector<double> out(points, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < points; ++k) {
        if (const std::optional<PointSums> sums = point_sums(k)) {  // else a value that was not finite: NaN
            out[k] = sums->products.hi + sums->products.lo;
        }
    }
    return out;
}

template void TrendAccumulator::add<float>(double, std::span<const float>);
template void TrendAccumulator::add<double>(double, std::span<const double>);

}  // namespace gridshard
