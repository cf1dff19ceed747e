#pragma once
// What the two evaluations of `gridshard eval` share: the options, the default mesh, the area weights, the
// progress line. The plain evaluation (eval_command.cpp) scores two fields step by
// step; the forecast evaluation (forecast_eval.cpp) scores forecasts from several initial conditions and
// ensemble members over lead times.

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "field_source.hpp"
#include "gridshard/comm/communicator.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/metrics/field.hpp"

namespace gridshard::cli {

struct EvalOptions {
    std::string truth;
    std::string prediction;
    std::string vars;
    std::string mesh;
    SplitRule split = SplitRule::balanced;
    AreaWeighting weights = AreaWeighting::cos_lat;
    Summation summation = Summation::reproducible;
    ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    std::string json;
    std::string zonal;
    bool quiet = false;
    bool timings = false;
    bool allow_time_mismatch = false;
    std::string io = "auto";  // --io: docs/io.md says why this is the default
    std::int64_t nlat = 721;
    std::int64_t nlon = 1440;
    std::int64_t ntime = 4;
    // The forecast evaluation.
    std::string ensemble_dim;
    std::int64_t ensemble_size = 0;       // 0: not given
    std::int64_t initial_conditions = 0;  // built-in forecast; 0: not given
    std::string climatology;
    std::vector<std::string> regions;
    std::string diagnostics;
    bool include_initial_step = false;
    std::string data_split = "auto";
};

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// The largest --nlat, --nlon and --ntime of the built-in case (a 3 km global grid is 6000 x 12000); the
/// memory check refuses what a machine cannot hold long before this.
inline constexpr std::int64_t max_builtin_extent = 10'000'000;

/// 1 x H x W with H*W = ranks and H the largest divisor of ranks not above sqrt(ranks).
[[nodiscard]] MeshShape default_mesh(int ranks);

/// The area weights of `box` of kind `kind` on grid `g` (bounds from the file, or halfway between centres).
[[nodiscard]] AreaWeights make_weights(AreaWeighting kind, const SourceGrid& g, const Box& box);

/// Shows steps done, total and rate on rank 0's stderr when it is a terminal.
class Progress {
  public:
    Progress(bool enabled, std::int64_t total) : enabled_(enabled && isatty(STDERR_FILENO) != 0), total_(total) {}
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    void step(const std::string& variable) {
        ++done_;
        if (!enabled_) {
            return;
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        std::fprintf(stderr, "\rgridshard eval: %lld/%lld steps (%s), %.2f steps/s   ", static_cast<long long>(done_),
                     static_cast<long long>(total_), variable.c_str(), static_cast<double>(done_) / seconds);
    }
    ~Progress() {
        if (enabled_ && done_ > 0) {
            std::fprintf(stderr, "\n");
        }
    }

  private:
    bool enabled_;
    std::int64_t total_;
    std::int64_t done_ = 0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// What a rank read of its inputs, as one number every rank must agree on (with detail::agree_or_throw, beside
/// the sizes): a 63-bit FNV-1a hash of the coordinates, times, names, layouts and types it is given. Every rank
/// opens the files itself, so a file still being written, or a stale copy on one node, gives one rank other
/// values and so other collectives, or other numbers under the same sizes. Both evaluations agree on their
/// inputs through it. No MPI calls.
class InputHash {
  public:
    void add_bytes(const void* data, std::size_t bytes) noexcept {
        for (std::size_t k = 0; k < bytes; ++k) {
            hash_ = (hash_ ^ static_cast<const unsigned char*>(data)[k]) * 1099511628211ull;
        }
    }
    void add(std::span<const double> values) noexcept { add_bytes(values.data(), values.size_bytes()); }
    void add(const std::string& text) noexcept { add_bytes(text.c_str(), text.size() + 1); }
    void add(std::int64_t value) noexcept { add_bytes(&value, sizeof value); }
    /// A grid's coordinates and its time axis (values, units, calendar).
    void add(const SourceGrid& grid);
    /// A file's variable: its name, dims and their sizes, type and units.
    void add(const io::VariableShape& variable);
    /// A variable to score: its name, channels and type.
    void add(const SourceVariable& variable);
    [[nodiscard]] std::int64_t value() const noexcept { return static_cast<std::int64_t>(hash_ >> 1); }

  private:
    std::uint64_t hash_ = 14695981039346656037ull;
};

/// How the evaluations open their netCDF inputs: --io, collectively over `world` when it says so. Throws
/// ArgumentError for a mode this build does not have.
[[nodiscard]] InputAccess input_access(const EvalOptions& options, const Communicator& world);

/// The forecast evaluation (forecast_eval.cpp): collective over `world`; throws as run_eval's body does.
void run_forecast_eval(const EvalOptions& options, const Communicator& world);

}  // namespace gridshard::cli
