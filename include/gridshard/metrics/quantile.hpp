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
#include <memory>
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
/// numpy's name of `method`.
[[nodiscard]] std::string_view to_string(QuantileMethod method) noexcept;

/// "" when every one of `probabilities` lies in [0, 1], else the problem naming the first that does not (NaN too): the
/// rule of every quantile here, for callers that agree it over their ranks first.
[[nodiscard]] std::string quantile_probabilities_problem(std::span<const double> probabilities);

/// ArgumentError with quantile_probabilities_problem's problem, if there is one.
void check_quantile_probabilities(std::span<const double> probabilities);

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
/// ranks of the order statistics numpy reads, found digit by digit. A first read finds each sample's range of keys,
/// agreed over `group` (one MIN allreduce), so the bits every key shares are known; a second counts every sample's
/// keys in a histogram of the next digit (up to 12 bits), summed over `group` (the samples' counts come with it); a
/// third read keeps the keys whose digit a wanted statistic has. Where those are at most 1 MiB over every rank (the
/// summed histogram says), every rank gathers them and reads each statistic off them; otherwise the other digits
/// come from passes over the kept keys, each a histogram per prefix still wanted, summed over `group`. Collective over
/// `group`: the range's allreduce (2 int64 per sample, and one more), one allreduce of the first histograms (2^12
/// bins per sample, int32 where the values are fewer than 2^31), then two allgathers (each rank's kept count per
/// sample, the kept keys) or one allreduce per later pass (512 KiB at most); every rank must pass the same
/// `samples`, `probabilities` and method (the caller agrees them first).
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

/// The quantiles of sample_quantiles (the same bits) of samples whose values come in pieces, pass after pass, and are
/// never held: a run scored from files, each step read again for each pass. A pass is every piece of every sample
/// given to add(), in any order; end_pass() merges the pass over the ranks and says whether another pass, of the same
/// pieces, is needed. The selection is sample_quantiles' with a histogram per digit and prefix still wanted in every
/// pass (no keys kept): a first digit of up to 16 bits per sample, then digits as wide as 2^20 bins in all allow, so
/// float32 takes 2 passes where the samples and statistics are few (about 3 for a hundred samples) and float64 4 to 6.
///
///   QuantileStream<float> stream(samples, probabilities, QuantileMethod::linear);
///   do {
///       for (each piece of sample s) stream.add(s, piece);
///   } while (stream.end_pass(group));
///   const SampleQuantiles q = stream.result();
template <class T>
class QuantileStream {
  public:
    /// Allocates the first pass's histograms (`samples` x up to 2^16 int64). ArgumentError naming a probability
    /// outside [0, 1] or a negative `samples`. No MPI calls.
    QuantileStream(std::int64_t samples, std::vector<double> probabilities, QuantileMethod method);
    QuantileStream(QuantileStream&&) noexcept;
    QuantileStream& operator=(QuantileStream&&) noexcept;
    ~QuantileStream();

    /// Adds `values` (NaN skipped) to sample `sample` in this pass; with `cells`, only the values at those indices.
    /// ArgumentError for a sample out of range, a cell outside `values` or a call after the last pass. No MPI calls.
    void add(std::int64_t sample, std::span<const T> values);
    void add(std::int64_t sample, std::span<const T> values, std::span<const std::int64_t> cells);
    /// Ends a pass: its histograms summed over `group` (one allreduce of int64, 2^20 bins at most), each statistic's
    /// next digit found. Returns whether another pass is needed; every rank of `group` gets the same answer, and every
    /// rank must have given the same samples, probabilities and method. SystemError on every rank when a pass held
    /// another number of values under a prefix than the pass before (the values changed between passes: the answer
    /// would be wrong). Collective over `group`.
    [[nodiscard]] bool end_pass(const Communicator& group);
    /// The passes ended so far.
    [[nodiscard]] int passes() const noexcept;
    /// After the last pass (end_pass returned false): the quantiles and counts, as sample_quantiles gives them.
    /// ArgumentError before. No MPI calls.
    [[nodiscard]] SampleQuantiles result() const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace gridshard
