#pragma once
/// @file
/// ACE's normalisation of the variables scored (fme.core.normalizer): `(x - mean) / std` per variable, the means
/// and stds read from its two stats files (`--normalize MEANS.nc STDS.nc`), as ACE reads them: raw values, one a
/// variable (or one per channel of a variable with levels). No MPI calls; every rank reads the two small files
/// itself and the run agrees on hash().
///
/// @code
///   // The first variable's fields (`points` values per channel) normalised as ACE normalises them.
///   std::vector<float> normalized(const std::vector<gridshard::io::SourceVariable>& variables,
///                                 const std::vector<float>& values, std::int64_t points) {
///       const gridshard::io::Normalization stats("centering.nc", "scaling.nc", variables);   // no MPI
///       std::vector<float> out(values.size());
///       gridshard::io::normalize<float>(values, out, points, stats.of(variables.front().name));
///       return out;
///   }
/// @endcode

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gridshard/io/forecast_source.hpp"

namespace gridshard::io {

/// One variable's means and stds, one per channel.
struct ChannelStats {
    std::vector<double> means;
    std::vector<double> stds;
};

class Normalization {
  public:
    /// Reads, for every variable of `variables`, the variable of the same name in `means_path` and in `stds_path`:
    /// one value (every channel's), or one per channel (a 1-D variable of `channels` values). Throws NetcdfError
    /// for a file that cannot be read, ArgumentError naming the file and the variable for one missing, of another
    /// shape, packed (scale_factor or add_offset: ACE reads the raw values), a mean that is not finite or a std that
    /// is not finite and positive.
    Normalization(std::string means_path, std::string stds_path, const std::vector<SourceVariable>& variables);

    /// The stats of `variable` (one of those given). Throws ArgumentError for another.
    [[nodiscard]] const ChannelStats& of(const std::string& variable) const;
    [[nodiscard]] const std::string& means_path() const noexcept { return means_path_; }
    [[nodiscard]] const std::string& stds_path() const noexcept { return stds_path_; }
    /// Every value read and the paths, as one number for the agreement over ranks.
    [[nodiscard]] std::int64_t hash() const;

  private:
    std::string means_path_, stds_path_;
    std::map<std::string, ChannelStats> stats_;
};

/// `out = (in - mean) / std` per channel, in T as ACE's float tensors do it (the stats rounded to T first): `in`
/// and `out` hold fields of `points` values each, channel `(k / points) % channels` (so a block of members
/// repeats the channels). No MPI calls.
template <class T>
void normalize(std::span<const T> in, std::span<T> out, std::int64_t points, const ChannelStats& stats);

}  // namespace gridshard::io
