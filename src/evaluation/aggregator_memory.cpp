// The Aggregator's memory estimate (Aggregator::bytes): what it and the run's buffers allocate on a rank, by family.

#include <algorithm>

#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard {

std::uint64_t Aggregator::bytes(const Box& box, GridShape grid, const AggregatorShape& shape, std::size_t regions,
                                std::size_t value_bytes, int data_ranks, int spatial_ranks,
                                const AggregatorOptions& options) {
    const auto area = static_cast<std::uint64_t>(box.area());
    const auto c = static_cast<std::uint64_t>(shape.channels);
    const auto m = static_cast<std::uint64_t>(shape.work.members.size());
    const auto nlat = static_cast<std::uint64_t>(grid.nlat);
    const std::uint64_t samples =
        static_cast<std::uint64_t>(shape.extent.initial_conditions) * static_cast<std::uint64_t>(shape.extent.members);
    const auto leads = static_cast<std::uint64_t>(shape.extent.lead_times);
    // Fields: the caller's truth, members and climatology twice (the pair being scored and the next one, read
    // meanwhile), the repeated truth and climatology; the time sums (2 x 24 bytes) and their gather over the data
    // group; the per-sample slots and the zonal means.
    const std::uint64_t fields =
        c * area * (value_bytes * (4 + 4 * m) + 48 + 48 * static_cast<std::uint64_t>(data_ranks));
    const std::uint64_t slots =
        samples * leads * regions * 12 * c * 8 + 2 * samples * leads * c * 8 * static_cast<std::uint64_t>(nlat);
    std::uint64_t spectra = 0;
    if (options.spectrum) {
        // The sums per degree; the stacked and filled fields and the fill's work (about 8 planes of doubles); the
        // transform's rows, orders and columns of the whole fields an owner holds, in doubles.
        const std::uint64_t transformed = (1 + m) * c;
        const std::uint64_t per_owner = transformed / static_cast<std::uint64_t>(std::max(spatial_ranks, 1)) + 1;
        spectra = 2 * c * nlat * sizeof(ExactSum) + transformed * area * (value_bytes + 8 * 8) +
                  3 * 8 * per_owner * nlat * static_cast<std::uint64_t>(grid.nlon);
    }
    // The near-zero counts of the prediction and the truth (24 bytes per point each, and their gather), the indicator.
    const std::uint64_t near_zero_counts =
        options.near_zero_fraction ? c * area * (2 * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) + 8) : 0;
    // The trend's three sums of each field (24 bytes per point each, and their gather), the pairs' times.
    const std::uint64_t trend_sums =
        options.trend ? c * area * 6 * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) : 0;
    // The video's sums of each field per lead time (24 bytes per point, and their gather).
    const std::uint64_t video_sums =
        options.video ? 2 * leads * c * area * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) : 0;
    // The extended video's three sums (as the video's), its least and greatest errors and their flags, the terms.
    const std::uint64_t extended_video =
        options.extended_video ? 3 * leads * c * area * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) +
                                     leads * c * area * 20 + 4 * 8 * c * area
                               : 0;
    // The seasonal sums of each field per season (24 bytes per point, and their gather); the pairs' times.
    const std::uint64_t seasonal_sums =
        options.seasonal ? 8 * c * area * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) : 0;
    const std::uint64_t times =
        options.trend || options.annual || options.seasonal || options.regional_index || options.tripole_index
            ? 24 * samples * leads
            : 0;
    // The regional index's means of the prediction and of the truth per (sample, lead), the stacked fields.
    const std::uint64_t index = options.regional_index ? 16 * samples * leads * c + 8 * (1 + m) * c * area : 0;
    // The histograms' mask (a byte per point, and its 4-byte copy at the first window) and per histogram its counts.
    const std::uint64_t histograms =
        options.histogram ? c * area * 5 + 2 * c * 24 * static_cast<std::uint64_t>(options.histogram->bins + 1) : 0;
    // The index regression's sums of each field, as the trend's but for the values' (TrendSums::weighted_sums).
    const std::uint64_t regression_sums =
        options.index_regression ? c * area * 4 * (24 + 24 * static_cast<std::uint64_t>(data_ranks)) : 0;
    // The tripole index's means per box, as the regional index's.
    const std::uint64_t tripole = options.tripole_index ? 48 * samples * leads * c + 8 * (1 + m) * c * area : 0;
    // The quantiles' histograms of a pass (at most 2^20 int64) and each thread's share of a field's, and the regions'
    // lists of points (8 bytes a point at most, each region).
    const std::uint64_t quantiles =
        options.quantiles ? (std::uint64_t{16} << 20) + 8 * area * static_cast<std::uint64_t>(regions) : 0;
    return fields + slots + spectra + near_zero_counts + trend_sums + video_sums + extended_video + seasonal_sums +
           times + index + histograms + regression_sums + tripole + quantiles;
}

}  // namespace gridshard
