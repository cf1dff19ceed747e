#pragma once
/// @file
/// Exact quantiles of samples spread over ranks: numpy's `nanquantile` of the gathered values, bit for bit, from
/// count histograms merged across the ranks (the values never move).
///
/// @code
///   #include "gridshard/comm/process_mesh.hpp"
///
///   // The median and the 99.9th percentile of each channel over the whole grid, from this rank's shard
///   // (channels, rows, cols); result.values[k * channels + c] is quantile k of channel c on every spatial rank.
///   gridshard::SampleQuantiles tails(const gridshard::ProcessMesh& mesh, std::span<const float> shard,
///                                    std::int64_t channels) {
///       const std::vector<double> q = {0.5, 0.999};
///       return gridshard::sample_quantiles(mesh.spatial(), shard, channels, std::span<const double>(q),
///                                          gridshard::QuantileMethod::linear);
///   }
/// @endcode

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gridshard/comm/communicator.hpp"

namespace gridshard {

/// numpy's methods of `quantile` gridshard computes (numpy's names; its default is `linear`).
enum class QuantileMethod {
    linear,        ///< Hyndman and Fan's 7: index `(n - 1) q`, numpy's interpolation between its neighbours
    inverted_cdf,  ///< Hyndman and Fan's 1: the value at index `ceil(n q) - 1`, no interpolation
};

/// The method named `name` ("linear" or "inverted_cdf"); ArgumentError naming the value otherwise.
[[nodiscard]] QuantileMethod parse_quantile_method(std::string_view name);

/// The quantiles of each sample (`probabilities.size() x samples`, row by row) and each sample's number of values
/// that are not NaN, the same on every rank of the group.
struct SampleQuantiles {
    std::vector<double> values;
    std::vector<std::int64_t> counts;
};

/// The quantiles `probabilities` (each in [0, 1]) of `samples` samples. Each rank holds `values` as `samples` equal
/// runs, one per sample (its length may differ between ranks); sample s is the values that are not NaN in run s of
/// every rank of `group`. Each result, on every rank of `group`, is what
/// numpy 1.24's `np.nanquantile(sample, q, method=...)` returns for that sample gathered in any order: NaN for a
/// sample with no value; `linear` interpolates as numpy does (the neighbours' difference in T, then float64), so
/// infinities give its infinities and NaN. Two values that compare equal but differ in bits (-0 and +0) are ordered
/// -0 first; numpy orders them as its partition leaves them.
///
/// How: each value's order-preserving integer key (its bits, the negative ones' order turned around); per sample the
/// ranks of the order statistics numpy reads, found digit by digit. A first pass counts every sample's keys in a
/// histogram of their first digit (up to 16 bits), summed over `group` (the samples' counts come with it); a second
/// read keeps the keys whose first digit a wanted statistic has; the other digits come from passes over those keys
/// only, each a histogram per prefix still wanted, summed over `group`. Collective over `group`: one allreduce of
/// int64 histograms per pass (2^16 bins per sample in the first; 2^16 in all in the others); every rank must pass the
/// same `samples`, `probabilities` and method (the caller agrees them first).
template <class T>
[[nodiscard]] SampleQuantiles sample_quantiles(const Communicator& group, std::span<const T> values,
                                               std::int64_t samples, std::span<const double> probabilities,
                                               QuantileMethod method);

/// The weighted quantiles `probabilities` (each in [0, 1]) of `samples` samples, laid out as in sample_quantiles,
/// with one weight per value (`weights`, as long as `values`; finite and >= 0): numpy 2's weighted "inverted_cdf"
/// (`np.nanquantile(sample, q, weights=w, method="inverted_cdf")`) in exact arithmetic. Of each sample's values
/// that are not NaN, with their weights, the result is the smallest value v whose cumulative weight (the weights of
/// the values <= v, -0 before +0) is >= q times the sample's weight and > 0; NaN for a sample without weight. numpy
/// forms the cumulative weights in float64 and divides by the last, so where q times the weight lies within its
/// rounding of a cumulative weight, numpy's choice can be the neighbouring value; gridshard compares exactly (every
/// sum and q times the weight in ExactSum), so its answer does not depend on the order of the values or the mesh.
///
/// How: the radix selection of sample_quantiles with exact sums of the weights for counts: each pass reads the
/// values and adds each weight to its bin (digits of up to 8 bits, at most 4096 bins in all): a 128-bit integer on
/// the grid of the weights' lowest bit where their agreed exponent range and count fit it, else an ExactSum. The
/// bins, as exact sums, are merged over `group` by allreduce_exact in the limbs the weights' range needs. Collective
/// over `group`: an allreduce of the counts and one of the weights' exponent range, then one allreduce of exact sums
/// per pass (4 for float, 8 for double where few statistics are wanted). Every rank must pass the same `samples` and
/// `probabilities`, and weights that quantile_weights_problem accepts (the caller agrees them first).
template <class T>
[[nodiscard]] SampleQuantiles sample_weighted_quantiles(const Communicator& group, std::span<const T> values,
                                                        std::span<const double> weights, std::int64_t samples,
                                                        std::span<const double> probabilities);

/// "" when every weight is finite and >= 0, else the problem, naming the first bad weight: the rule of
/// sample_weighted_quantiles' weights, for callers that agree it over their ranks first.
[[nodiscard]] std::string quantile_weights_problem(std::span<const double> weights);

}  // namespace gridshard
