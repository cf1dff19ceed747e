// ACE's dynamic histogram and its percentile (metrics/histogram.hpp).

#include "gridshard/metrics/histogram.hpp"

#include <algorithm>
#include <limits>

#include "gridshard/core/error.hpp"

namespace gridshard {

std::vector<double> numpy_linspace(double start, double stop, std::int64_t num) {
    std::vector<double> y(static_cast<std::size_t>(num));
    const std::int64_t div = num - 1;
    const double delta = stop - start;
    const double step = delta / static_cast<double>(div);
    for (std::int64_t i = 0; i < num; ++i) {
        // numpy scales arange by the step (or, for a zero step, divides then scales by delta), then adds the start
        const double scaled =
            step == 0.0 ? static_cast<double>(i) / static_cast<double>(div) * delta : static_cast<double>(i) * step;
        y[static_cast<std::size_t>(i)] = scaled + start;
    }
    if (num > 1) {
        y.back() = stop;
    }
    return y;
}

DynamicHistogram::DynamicHistogram(std::int64_t bins) : bins_(bins) {
    if (bins < 2 || bins % 2 != 0) {
        throw ArgumentError("histogram: bins=" + std::to_string(bins) + " must be even and at least 2");
    }
}

bool DynamicHistogram::take_range(double lower, double upper) {
    if (edges_.empty()) {
        edges_ = numpy_linspace(lower, upper, bins_ + 1);
        counts_.assign(static_cast<std::size_t>(bins_), 0);
        return true;
    }
    bool changed = false;
    while (lower < edges_.front()) {
        double_bins(true);
        changed = true;
    }
    while (upper > edges_.back()) {
        double_bins(false);
        changed = true;
    }
    return changed;
}

void DynamicHistogram::double_bins(bool to_the_left) {
    const double range = edges_.back() - edges_.front();
    const double wider = 2 * range;
    edges_ = to_the_left ? numpy_linspace(edges_.back() - wider, edges_.back(), bins_ + 1)
                         : numpy_linspace(edges_.front(), edges_.front() + wider, bins_ + 1);
    std::vector<std::int64_t> merged(static_cast<std::size_t>(bins_), 0);
    const std::size_t half = static_cast<std::size_t>(bins_ / 2);
    const std::size_t offset = to_the_left ? half : 0;
    for (std::size_t k = 0; k < half; ++k) {
        merged[offset + k] = counts_[2 * k] + counts_[2 * k + 1];
    }
    counts_ = std::move(merged);
}

void DynamicHistogram::add_counts(std::span<const std::int64_t> counts) {
    for (std::size_t k = 0; k < counts_.size() && k < counts.size(); ++k) {
        counts_[k] += counts[k];
    }
}

void DynamicHistogram::scale_counts(std::int64_t factor) {
    for (std::int64_t& c : counts_) {
        c *= factor;
    }
}

double histogram_quantile(std::span<const double> edges, std::span<const std::int64_t> counts, double probability) {
    std::int64_t total = 0;
    for (const std::int64_t c : counts) {
        total += c;
    }
    if (total == 0 || edges.size() != counts.size() + 1) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    // ACE's cdf: the cumulative counts over the total, a 0 before the first bin; the first bin whose cdf passes
    // `probability`, interpolated linearly. ACE trims the empty bins at both ends first, which moves no cdf value.
    std::int64_t running = 0;
    double previous = 0.0;
    for (std::size_t k = 0; k < counts.size(); ++k) {
        running += counts[k];
        const double cdf = static_cast<double>(running) / static_cast<double>(total);
        if (cdf > probability) {
            return edges[k] + (edges[k + 1] - edges[k]) * (probability - previous) / (cdf - previous);
        }
        previous = cdf;
    }
    // No bin passes (a probability of 1): ACE's argmax finds none and takes bin -1 of its trimmed histogram, from
    // the upper edge of the last bin with counts towards the lower edge of the first.
    std::size_t first = 0, last = counts.size() - 1;
    while (counts[first] == 0) {
        ++first;
    }
    while (counts[last] == 0) {
        --last;
    }
    const double c0 = edges[last + 1], c1 = edges[first];
    return c0 + (c1 - c0) * (probability - previous) / (0.0 - previous);
}

}  // namespace gridshard
