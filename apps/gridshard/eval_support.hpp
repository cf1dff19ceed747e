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

/// How the evaluations open their netCDF inputs: --io, collectively over `world` when it says so. Throws
/// ArgumentError for a mode this build does not have.
[[nodiscard]] InputAccess input_access(const EvalOptions& options, const Communicator& world);

/// The forecast evaluation (forecast_eval.cpp): collective over `world`; throws as run_eval's body does.
void run_forecast_eval(const EvalOptions& options, const Communicator& world);

}  // namespace gridshard::cli
