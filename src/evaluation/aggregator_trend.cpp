// ACE's trend metric (AggregatorOptions::trend): per cell the exact sums of the counted values and of time x value,
// and at finish the least-squares slopes from them, each numerator and denominator rounded once.

#include <cmath>
#include <limits>
#include <string>

#include "gridshard/comm/exact_allreduce.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {
namespace {

/// ACE's year (fme's trend.py: a Julian year whatever the calendar), in seconds: the slopes are per this year.
constexpr double seconds_per_year = 365.25 * 24 * 60 * 60;

/// Per point of `sums` (over the data group, merged) the slope per year of its values against their times:
/// (n Sty - St Sy) / (n Stt - St^2), the numerator and the denominator exact and each rounded once. NaN where a value
/// was not finite, and everywhere with fewer than two distinct times (ACE's 0 / 0). No MPI calls.
std::vector<double> slopes(const TimeMeanAccumulator& values, const TimeMeanAccumulator& products,
                           const TimeMeanAccumulator& remainders, const ExactSum& times, const ExactSum& squares) {
    const auto n = static_cast<double>(values.steps());
    const std::vector<double> time_parts = times.expansion();  // St as doubles whose exact sum it is
    ExactSum denominator;
    denominator.add_scaled(squares, n);
    for (const double part : time_parts) {
        denominator.add_scaled(times, -part);
    }
    const double d = denominator.to_double();
    const std::size_t points = values.points();
    std::vector<double> out(points, std::numeric_limits<double>::quiet_NaN());
    if (!(d > 0.0)) {
        return out;
    }
    ExactSum sum_of_values, sum_of_products, numerator;
    for (std::size_t k = 0; k < points; ++k) {
        const TimeMeanAccumulator::PointSum y = values.point_sum(k);
        const TimeMeanAccumulator::PointSum p = products.point_sum(k);
        const TimeMeanAccumulator::PointSum r = remainders.point_sum(k);
        if (y.special != 0.0 || p.special != 0.0 || r.special != 0.0) {
            continue;  // a value that was not finite: NaN, as ACE's sums give
        }
        sum_of_values.clear();
        sum_of_values.add(y.hi);
        sum_of_values.add(y.lo);
        sum_of_products.clear();
        for (const double part : {p.hi, p.lo, r.hi, r.lo}) {
            sum_of_products.add(part);
        }
        numerator.clear();
        numerator.add_scaled(sum_of_products, n);
        for (const double part : time_parts) {
            numerator.add_scaled(sum_of_values, -part);
        }
        out[k] = numerator.to_double() / d * seconds_per_year;
    }
    return out;
}

}  // namespace

void Aggregator::record_time(std::int64_t initial_condition, std::int64_t lead, double seconds) {
    const ForecastExtent& e = shape_.extent;
    if (!options_.trend) {
        throw ArgumentError("record_time: the aggregator forms no trend (" + setting_name("trend") + ")");
    }
    if (initial_condition < 0 || initial_condition >= e.initial_conditions || lead < 0 || lead >= e.lead_times) {
        throw ArgumentError("record_time: (initial condition " + std::to_string(initial_condition) + ", lead " +
                            std::to_string(lead) + ") is outside " + std::to_string(e.initial_conditions) + " x " +
                            std::to_string(e.lead_times));
    }
    if (!std::isfinite(seconds)) {
        throw ArgumentError(setting_name("trend") + ": the time of initial condition " +
                            std::to_string(initial_condition) + ", lead " + std::to_string(lead) +
                            " is not finite: " + std::to_string(seconds));
    }
    pair_times_[static_cast<std::size_t>(initial_condition * e.lead_times + lead)] = seconds;
}

template <class T>
void Aggregator::record_trend(std::int64_t initial_condition, std::int64_t lead, FieldShard<T> truth,
                              std::span<const T> members, bool with_truth) {
    const double t = pair_times_[static_cast<std::size_t>(initial_condition * shape_.extent.lead_times + lead)];
    if (std::isnan(t)) {
        throw ArgumentError(setting_name("trend") + ": no time was given for initial condition " +
                            std::to_string(initial_condition) + ", lead " + std::to_string(lead) +
                            " (record_time, before the pair)");
    }
    const std::size_t plane = truth.values.size();
    trend_products_.resize(plane);
    trend_remainders_.resize(plane);
    const auto add = [&](std::span<const T> field, TrendSums& sums) {
        for (std::size_t k = 0; k < plane; ++k) {
            const double y = static_cast<double>(field[k]);
            const double product = t * y;
            trend_products_[k] = product;
            trend_remainders_[k] = std::fma(t, y, -product);  // t y exactly: product + remainder
        }
        sums.values->add(FieldShard<T>{field, truth.channels});
        sums.products->add(FieldShard<double>{trend_products_, truth.channels});
        sums.remainders->add(FieldShard<double>{trend_remainders_, truth.channels});
        sums.times.add(t);
        sums.squares.add_product(t, t);
    };
    if (with_truth) {
        add(truth.values, *trend_truth_);
    }
    for (std::size_t m = 0; m < members.size() / (plane == 0 ? 1 : plane); ++m) {
        add(members.subspan(m * plane, plane), *trend_prediction_);
    }
}

void Aggregator::finish_trend(VariableScores& out) {
    const std::int64_t channels = shape_.channels;
    for (TrendSums* sums : {&*trend_prediction_, &*trend_truth_}) {
        sums->values->merge_over_data();  // collective over data: every counted pair added once
        sums->products->merge_over_data();
        sums->remainders->merge_over_data();
    }
    ExactSum scalars[] = {trend_prediction_->times, trend_prediction_->squares, trend_truth_->times,
                          trend_truth_->squares};
    allreduce_exact(grid_.mesh().data(), scalars);  // collective over data
    const std::vector<double> gen = slopes(*trend_prediction_->values, *trend_prediction_->products,
                                           *trend_prediction_->remainders, scalars[0], scalars[1]);
    const std::vector<double> target =
        slopes(*trend_truth_->values, *trend_truth_->products, *trend_truth_->remainders, scalars[2], scalars[3]);
    // The area-weighted RMSE of the slopes' difference (collective over spatial), as the time-mean RMSE weighs.
    std::vector<double> squares(gen.size());
    for (std::size_t k = 0; k < squares.size(); ++k) {
        squares[k] = (gen[k] - target[k]) * (gen[k] - target[k]);
    }
    const Weights w = regions_.front().weights.view();
    const FieldShard<double> field{squares, channels};
    std::vector<double> rmse = options_.policy == ValidityPolicy::propagate
                                   ? weighted_mean<double>(grid_, field, w, options_.summation)
                                   : weighted_nanmean<double>(grid_, field, w, options_.summation);
    for (std::int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<std::size_t>(c);
        for (const RegisteredScore* s : scores_) {
            if (std::holds_alternative<TrendValue>(s->source)) {
                out[k].regions.front().time_means.push_back({s, std::sqrt(rmse[k])});
            }
        }
    }
    std::vector<std::vector<double>> gen_maps = held_maps(gen);  // collective over the world
    std::vector<std::vector<double>> target_maps = held_maps(target);
    for (std::int64_t c = 0; c < channels; ++c) {
        out[static_cast<std::size_t>(c)].trend_prediction_map = std::move(gen_maps[static_cast<std::size_t>(c)]);
        out[static_cast<std::size_t>(c)].trend_truth_map = std::move(target_maps[static_cast<std::size_t>(c)]);
    }
}

template void Aggregator::record_trend<float>(std::int64_t, std::int64_t, FieldShard<float>, std::span<const float>,
                                              bool);
template void Aggregator::record_trend<double>(std::int64_t, std::int64_t, FieldShard<double>, std::span<const double>,
                                               bool);

}  // namespace gridshard
