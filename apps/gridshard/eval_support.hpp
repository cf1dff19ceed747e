#pragma once
// The options of `gridshard eval` as CLI11 fills them (parsed once into the library's enums and values), and the
// progress line. eval_command.cpp turns them into an EvaluationPlan.

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gridshard/evaluation/evaluate.hpp"

namespace gridshard::cli {

struct EvalOptions {
    std::string truth;
    std::string prediction;
    std::string vars;
    std::optional<MeshShape> mesh;
    SplitRule split = SplitRule::balanced;
    AreaWeighting weights = AreaWeighting::cos_lat;
    Summation summation = Summation::reproducible;
    ValidityPolicy policy = ValidityPolicy::skip_invalid_pairs;
    std::string json;
    std::string zonal;
    bool quiet = false;
    bool timings = false;
    bool allow_time_mismatch = false;
    std::string io = "auto";  // --io, parsed where this build's modes are known (docs/io.md: why auto)
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
    std::optional<DataSplit> data_split;  // none: auto
    std::vector<std::string> normalize;   // ACE's means and stds files, or none
    // The power spectra (--spectrum and its options).
    bool spectrum = false;
    PowerSpectrumOptions spectrum_options;
    bool spectrum_fill = true;  // --spectrum-fill smooth (ACE's) or none
    std::int64_t spectrum_fill_steps = 4;
    // ACE's near-zero fractions (--near-zero-fraction and its options, named after ACE's config fields).
    bool near_zero_fraction = false;
    NearZeroFractionConfig near_zero_config;
    std::string near_zero_variables;  // comma-separated, parsed with --vars' rule; empty: every variable
    // ACE's trend (--trend, --trend-variables).
    bool trend = false;
    std::string trend_variables;
    // ACE's video (--video, --video-variables, --enable-extended-videos).
    bool video = false, extended_videos = false;
    std::string video_variables;
    // ACE's annual and seasonal means (--annual, --annual-variables, --seasonal, --seasonal-variables).
    bool annual = false, seasonal = false;
    // ACE's monthly reference data of the annual means (--annual-reference-data).
    std::string annual_reference_data;
    // ACE's ENSO index (--enso-index) and IPO index (--ipo-index).
    bool enso_index = false, ipo_index = false;
    // ACE's ENSO coefficient against the reference index in this file (--enso-coefficient-index).
    std::string enso_coefficient_index;
    // ACE's histograms (--histogram, --histogram-variables) over windows of --forward-steps-in-memory (0: one).
    bool histogram = false;
    std::string histogram_variables;
    std::int64_t forward_steps_in_memory = 0;
    std::string annual_variables, seasonal_variables;
    // The run's exact quantiles (--quantiles, comma-separated probabilities; --quantile-method).
    std::string quantiles;
    QuantileMethod quantile_method = QuantileMethod::linear;
};

/// The largest --nlat, --nlon and --ntime of the built-in case (a 3 km global grid is 6000 x 12000); the
/// memory check refuses what a machine cannot hold long before this.
inline constexpr std::int64_t max_builtin_extent = 10'000'000;

/// Shows pairs done, total and rate on rank 0's stderr when it is a terminal.
class Progress {
  public:
    explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) != 0) {}
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    void step(const std::string& variable, std::int64_t done, std::int64_t total) {
        if (!enabled_) {
            return;
        }
        shown_ = true;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        std::fprintf(stderr, "\rgridshard eval: %lld/%lld steps (%s), %.2f steps/s   ", static_cast<long long>(done),
                     static_cast<long long>(total), variable.c_str(), static_cast<double>(done) / seconds);
    }
    ~Progress() {
        if (shown_) {
            std::fprintf(stderr, "\n");
        }
    }

  private:
    bool enabled_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace gridshard::cli
