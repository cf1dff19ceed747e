// The built-in analytic cases of `gridshard eval`: make_builtin_pair and make_builtin_forecast (forecast_source.hpp).

#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/io/forecast_source.hpp"

namespace gridshard::io {
namespace {

constexpr double pi = std::numbers::pi;
constexpr double degree = pi / 180.0;

// Rossby-Haurwitz wave of wavenumber 4 (Williamson et al. 1992, test case 6).
struct RossbyHaurwitz {
    static constexpr double omega = 7.848e-6;  // angular velocity of the wave, 1/s (also K)
    static constexpr double k = 7.848e-6;
    static constexpr double r = 4.0;
    static constexpr double h0 = 8000.0;         // m
    static constexpr double radius = 6.37122e6;  // m
    static constexpr double earth_omega = 7.292e-5;
    static constexpr double gravity = 9.80616;

    // Eastward phase speed of the pattern, radians per second.
    static constexpr double phase_speed = (r * (3.0 + r) * omega - 2.0 * earth_omega) / ((1.0 + r) * (2.0 + r));

    static double height(double lat, double lon, double seconds, double speed_factor) {
        const double c = std::cos(lat);
        const double c2 = c * c;
        const double c2r = std::pow(c, 2.0 * r);
        const double a =
            omega / 2.0 * (2.0 * earth_omega + omega) * c2 +
            0.25 * k * k *
                (c2r * ((r + 1.0) * c2 + (2.0 * r * r - r - 2.0)) - 2.0 * r * r * std::pow(c, 2.0 * r - 2.0));
        const double b = 2.0 * (earth_omega + omega) * k / ((r + 1.0) * (r + 2.0)) * std::pow(c, r) *
                         ((r * r + 2.0 * r + 2.0) - (r + 1.0) * (r + 1.0) * c2);
        const double cc = 0.25 * k * k * c2r * ((r + 1.0) * c2 - (r + 2.0));
        const double shifted = lon - phase_speed * speed_factor * seconds;
        return h0 + radius * radius / gravity * (a + b * std::cos(r * shifted) + cc * std::cos(2.0 * r * shifted));
    }
};

// A deterministic value in [-1, 1) from integer coordinates (the prediction's noise).
double noise(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    std::uint64_t h =
        static_cast<std::uint64_t>(a) * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(b) * 0xC2B2AE3D27D4EB4FULL ^
        static_cast<std::uint64_t>(c) * 0x165667B19E3779F9ULL ^ static_cast<std::uint64_t>(d) * 0x27D4EB2F165667C5ULL;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    return static_cast<double>(h >> 11) * 0x1p-52 - 1.0;
}

/// An ensemble member at a lead time (steps after its initial condition).
struct Member {
    std::int64_t index = 0;
    std::int64_t lead = 0;
};

bool land(double lat, double lon) {
    return std::sin(2.0 * lon) * std::cos(3.0 * lat) + 0.5 * std::sin(5.0 * lon + lat) > 0.45;
}

class BuiltinSource final : public ForecastSource {
  public:
    BuiltinSource(std::int64_t nlat, std::int64_t nlon, std::int64_t ntime) {
        if (nlat < 2 || nlon < 2 || ntime < 1) {
            throw ArgumentError("built-in case needs " + setting_name("nlat") + " >= 2, " + setting_name("nlon") +
                                " >= 2 and " + setting_name("ntime") + " >= 1, got " + std::to_string(nlat) + ", " +
                                std::to_string(nlon) + ", " + std::to_string(ntime));
        }
        grid_.lat_dim = "lat";
        grid_.lon_dim = "lon";
        grid_.ntime = ntime;
        for (std::int64_t i = 0; i < nlat; ++i) {
            grid_.lat_deg.push_back(-90.0 + 180.0 * static_cast<double>(i) / static_cast<double>(nlat - 1));
        }
        for (std::int64_t j = 0; j < nlon; ++j) {
            grid_.lon_deg.push_back(360.0 * static_cast<double>(j) / static_cast<double>(nlon));
        }
        grid_.time_dim = "time";
        grid_.time_units = "hours since 2000-01-01 00:00:00";
        grid_.time_calendar = "standard";
        for (std::int64_t s = 0; s < ntime; ++s) {
            grid_.time_values.push_back(6.0 * static_cast<double>(s));
        }
        layout_.lead_times = ntime;
    }

    [[nodiscard]] const SourceGrid& grid() const override { return grid_; }
    [[nodiscard]] const ForecastLayout& layout() const override { return layout_; }
    [[nodiscard]] const LeadTimes& lead_times() const override { return lead_times_; }

    [[nodiscard]] std::vector<SourceVariable> variables() const override { return {{"h"}, {"t850"}, {"sst"}}; }

    [[nodiscard]] std::unique_ptr<ForecastSteps> open(const SourceVariable& variable, const Box& box) const override;

    /// Truth and prediction of `kind` (0 h, 1 t850, 2 sst) at `step` over `box`; with a `member`, the
    /// prediction is that ensemble member `lead` steps after its initial condition (the truth at lead 0).
    template <class T>
    void generate(int kind, std::int64_t step, const Box& box, std::span<T> truth, std::span<T> prediction,
                  std::optional<Member> member = std::nullopt) const {
        if (truth.size() != static_cast<std::size_t>(box.area()) || prediction.size() != truth.size()) {
            throw ArgumentError("built-in case: buffers of " + std::to_string(truth.size()) + " and " +
                                std::to_string(prediction.size()) + " values for a box of " +
                                std::to_string(box.area()));
        }
        const double seconds = 6.0 * 3600.0 * static_cast<double>(step);
        std::size_t k = 0;
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            const double lat = grid_.lat_deg[static_cast<std::size_t>(i)] * degree;
            for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j, ++k) {
                const double lon = grid_.lon_deg[static_cast<std::size_t>(j)] * degree;
                const double wobble = noise(kind + (member ? 16 * (member->index + 1) : 0), step, i, j);
                double t = 0.0;
                double p = 0.0;
                if (kind == 0) {
                    t = RossbyHaurwitz::height(lat, lon, seconds, 1.0);
                    p = RossbyHaurwitz::height(lat, lon, seconds, 1.03) + 4.0 + 0.5 * wobble;
                } else {
                    const double base = kind == 1 ? 288.0 - 40.0 * std::sin(lat) * std::sin(lat)
                                                  : 301.0 - 30.0 * std::sin(lat) * std::sin(lat);
                    const double drift = 0.02 * static_cast<double>(step);
                    const double structure = 5.0 * std::sin(3.0 * lon + 2.0 * lat - drift) * std::cos(lat) +
                                             2.0 * std::cos(12.0 * lon) * std::cos(10.0 * lat);
                    t = base + structure;
                    p = base + 0.97 * structure + 0.3 + 0.02 * wobble;
                    if (kind == 2 && land(lat, lon)) {
                        t = std::nan("");
                        p = std::nan("");
                    }
                }
                if (member) {
                    // Each member's own error, smooth over 4 x 4 cells, growing with the square root of the lead.
                    const double scale = kind == 0 ? 30.0 : 1.5;
                    const double growth = std::sqrt(static_cast<double>(member->lead) / 4.0);
                    const std::int64_t start = step - member->lead;  // the member's own initial condition
                    p = member->lead == 0
                            ? t
                            : p + scale * growth * noise(kind + 64, member->index * 1'000'003 + start, i / 4, j / 4);
                }
                // Generated in float: the case is float32 data, whichever buffer it fills.
                truth[k] = static_cast<T>(static_cast<float>(t));
                prediction[k] = static_cast<T>(static_cast<float>(p));
            }
        }
    }

  private:
    SourceGrid grid_;
    ForecastLayout layout_;
    LeadTimes lead_times_;  // none: a pair has no initial time
};

// The step of the pair is its lead time; its one member, the prediction (none: only the truth is needed, and
// the prediction is generated into a scratch buffer).
class BuiltinSteps final : public ForecastSteps {
  public:
    BuiltinSteps(const BuiltinSource& source, int kind, const Box& box) : source_(source), kind_(kind), box_(box) {}
    void read(std::int64_t /*initial_condition*/, std::int64_t step, Range members, std::span<float> truth,
              std::span<float> prediction) override {
        generate(step, members, truth, prediction);
    }
    void read(std::int64_t /*initial_condition*/, std::int64_t step, Range members, std::span<double> truth,
              std::span<double> prediction) override {
        generate(step, members, truth, prediction);
    }

  private:
    template <class T>
    void generate(std::int64_t step, Range members, std::span<T> truth, std::span<T> prediction) const {
        if (members.size() > 0) {
            source_.generate(kind_, step, box_, truth, prediction);
        } else {
            std::vector<T> unused(truth.size());
            source_.generate(kind_, step, box_, truth, std::span<T>(unused));
        }
    }

    const BuiltinSource& source_;
    int kind_;
    Box box_;
};

int builtin_kind(const std::string& name) {
    return name == "h" ? 0 : name == "t850" ? 1 : 2;
}

std::unique_ptr<ForecastSteps> BuiltinSource::open(const SourceVariable& variable, const Box& box) const {
    return std::make_unique<BuiltinSteps>(*this, builtin_kind(variable.name), box);
}

// The built-in forecast: initial conditions a day (4 steps) apart; lead 0 is the initial condition.
constexpr std::int64_t steps_between_initial_conditions = 4;

class BuiltinForecast final : public ForecastSource {
  public:
    BuiltinForecast(std::int64_t nlat, std::int64_t nlon, std::int64_t initial_conditions, std::int64_t members,
                    std::int64_t lead_times)
        : case_(nlat, nlon, (initial_conditions - 1) * steps_between_initial_conditions + lead_times) {
        if (initial_conditions < 1 || members < 1 || lead_times < 1) {
            throw ArgumentError("built-in forecast needs " + setting_name("initial_conditions") + ", " +
                                setting_name("members") + " and " + setting_name("lead_times") + " >= 1, got " +
                                std::to_string(initial_conditions) + ", " + std::to_string(members) + ", " +
                                std::to_string(lead_times));
        }
        grid_ = case_.grid();
        grid_.ntime = lead_times;
        grid_.time_values.resize(static_cast<std::size_t>(lead_times));
        for (std::int64_t l = 0; l < lead_times; ++l) {
            grid_.time_values[static_cast<std::size_t>(l)] = 6.0 * static_cast<double>(l);
        }
        grid_.time_units = "hours";
        layout_ = {
            initial_conditions, members, lead_times, members > 1 ? "ensemble_size" : "none", "", "", false, false};
        lead_times_.units = "hours";
        lead_times_.values = grid_.time_values;
        for (std::int64_t i = 0; i < initial_conditions; ++i) {
            lead_times_.init_times.push_back(24.0 * static_cast<double>(i));
        }
        lead_times_.init_time_units = "hours since 2000-01-01 00:00:00";
        lead_times_.calendar = "standard";
    }

    [[nodiscard]] const SourceGrid& grid() const override { return grid_; }
    [[nodiscard]] const ForecastLayout& layout() const override { return layout_; }
    [[nodiscard]] const LeadTimes& lead_times() const override { return lead_times_; }
    [[nodiscard]] std::vector<SourceVariable> variables() const override { return case_.variables(); }
    [[nodiscard]] std::unique_ptr<ForecastSteps> open(const SourceVariable& variable, const Box& box) const override;

    template <class T>
    void generate(int kind, std::int64_t initial_condition, std::int64_t lead, Range members, const Box& box,
                  std::span<T> truth, std::span<T> values) const {
        const std::size_t area = truth.size();
        if (members.begin < 0 || members.end > layout_.members ||
            values.size() != area * static_cast<std::size_t>(members.size())) {
            throw ArgumentError("built-in forecast: a members buffer of " + std::to_string(values.size()) +
                                " values for members [" + std::to_string(members.begin) + ", " +
                                std::to_string(members.end) + ") of " + std::to_string(area));
        }
        const std::int64_t step = initial_condition * steps_between_initial_conditions + lead;
        if (members.size() == 0) {
            std::vector<T> unused(area);
            case_.generate(kind, step, box, truth, std::span<T>(unused), Member{0, lead});
        }
        for (std::int64_t m = members.begin; m < members.end; ++m) {
            case_.generate(kind, step, box, truth,
                           values.subspan(static_cast<std::size_t>(m - members.begin) * area, area), Member{m, lead});
        }
    }

  private:
    BuiltinSource case_;
    SourceGrid grid_;
    ForecastLayout layout_;
    LeadTimes lead_times_;
};

class BuiltinForecastSteps final : public ForecastSteps {
  public:
    BuiltinForecastSteps(const BuiltinForecast& source, int kind, const Box& box)
        : source_(source), kind_(kind), box_(box) {}
    void read(std::int64_t initial_condition, std::int64_t lead, Range members, std::span<float> truth,
              std::span<float> values) override {
        source_.generate(kind_, initial_condition, lead, members, box_, truth, values);
    }
    void read(std::int64_t initial_condition, std::int64_t lead, Range members, std::span<double> truth,
              std::span<double> values) override {
        source_.generate(kind_, initial_condition, lead, members, box_, truth, values);
    }

  private:
    const BuiltinForecast& source_;
    int kind_;
    Box box_;
};

std::unique_ptr<ForecastSteps> BuiltinForecast::open(const SourceVariable& variable, const Box& box) const {
    return std::make_unique<BuiltinForecastSteps>(*this, builtin_kind(variable.name), box);
}

}  // namespace

std::unique_ptr<ForecastSource> make_builtin_forecast(std::int64_t nlat, std::int64_t nlon,
                                                      std::int64_t initial_conditions, std::int64_t members,
                                                      std::int64_t lead_times) {
    return std::make_unique<BuiltinForecast>(nlat, nlon, initial_conditions, members, lead_times);
}

std::unique_ptr<ForecastSource> make_builtin_pair(std::int64_t nlat, std::int64_t nlon, std::int64_t ntime) {
    return std::make_unique<BuiltinSource>(nlat, nlon, ntime);
}

}  // namespace gridshard::io
