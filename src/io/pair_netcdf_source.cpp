// A pair of CF netCDF files as a forecast of one initial condition and one member: each rank reads only its
// hyperslabs, through read plans.

#include "gridshard/core/error.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/units.hpp"

namespace gridshard::io {
namespace {

std::string shape_text(const io::VariableShape& v) {
    std::string text;
    for (std::size_t k = 0; k < v.dim_sizes.size(); ++k) {
        if (k > 0) {
            text += ',';
        }
        text += std::to_string(v.dim_sizes[k]);
    }
    return "(" + text + ")";
}

// The step of a pair is its lead time; its one member, the prediction (none: only the truth is read).
class NetcdfSteps final : public ForecastSteps {
  public:
    NetcdfSteps(io::VariableReader truth, io::VariableReader prediction)
        : truth_(std::move(truth)), prediction_(std::move(prediction)) {}
    void read(std::int64_t /*initial_condition*/, std::int64_t step, Range members, std::span<float> truth,
              std::span<float> prediction) override {
        read_both(step, members, truth, prediction);
    }
    void read(std::int64_t /*initial_condition*/, std::int64_t step, Range members, std::span<double> truth,
              std::span<double> prediction) override {
        read_both(step, members, truth, prediction);
    }
    void read_none() override {
        truth_.read_none();
        prediction_.read_none();
    }

  private:
    template <class T>
    void read_both(std::int64_t step, Range members, std::span<T> truth, std::span<T> prediction) {
        read_round(
            truth_.collective() || prediction_.collective(), [&] { truth_.read_step(step, truth); },
            [&] {
                if (members.size() > 0) {
                    prediction_.read_step(step, prediction);
                } else {
                    prediction_.read_none();
                }
            });
    }

    io::VariableReader truth_;
    io::VariableReader prediction_;
};

class NetcdfSource final : public ForecastSource {
  public:
    NetcdfSource(const std::string& truth_path, const std::string& prediction_path,
                 const std::vector<std::string>& names, bool allow_time_mismatch, const InputAccess& access)
        : truth_(access.open(truth_path)), prediction_(access.open(prediction_path)) {
        const io::GridInfo& a = truth_.grid();
        const io::GridInfo& b = prediction_.grid();
        const std::string truth_name = "the truth '" + truth_path + "'";
        const std::string prediction_name = "the prediction '" + prediction_path + "'";
        if (!io::same_grid(a, b)) {
            throw ArgumentError("truth '" + truth_path + "' (" + std::to_string(a.shape().nlat) + " x " +
                                std::to_string(a.shape().nlon) + ") and prediction '" + prediction_path + "' (" +
                                std::to_string(b.shape().nlat) + " x " + std::to_string(b.shape().nlon) +
                                ") lie on different grids");
        }
        if (a.ntime != b.ntime) {
            throw ArgumentError("truth '" + truth_path + "' has " + std::to_string(a.ntime) +
                                " time steps, prediction '" + prediction_path + "' " + std::to_string(b.ntime));
        }
        if (a.ntime < 1) {
            throw ArgumentError("truth '" + truth_path + "' has no time steps");
        }
        if (!allow_time_mismatch) {
            if (const std::string problem = io::time_mismatch(a, truth_name, b, prediction_name); !problem.empty()) {
                throw ArgumentError(problem + " (" + setting_name("allow_time_mismatch") +
                                    " compares them step by step regardless)");
            }
        }
        for (const std::string& name : names.empty() ? truth_.field_variables() : names) {
            const io::VariableShape t = truth_.variable(name);
            const io::VariableShape p = prediction_.variable(name);
            if (t.ntime != a.ntime) {
                if (names.empty()) {
                    continue;  // a field without the time dim (a mask, orography) has nothing to score per step
                }
                throw ArgumentError(setting_name("variables") + ": variable '" + name + "' of " + truth_name +
                                    " has no time dim, but the " + "files have " + std::to_string(a.ntime) + " steps");
            }
            if (t.dim_sizes != p.dim_sizes) {
                throw ArgumentError("variable '" + name + "' has shape " + shape_text(t) + " in the truth but " +
                                    shape_text(p) + " in the prediction");
            }
            if (!io::same_units(t.units, p.units)) {
                throw ArgumentError("variable '" + name + "' has units '" + t.units + "' in " + truth_name + " but '" +
                                    p.units + "' in " + prediction_name + " (no conversion is made)");
            }
            const bool any_double = t.value_type == io::ValueType::float64 || p.value_type == io::ValueType::float64;
            variables_.push_back(
                {name, t.channels_per_step, any_double ? io::ValueType::float64 : io::ValueType::float32});
        }
        if (variables_.empty()) {
            throw ArgumentError("truth '" + truth_path + "' has no variable on its lat x lon grid");
        }
        layout_.lead_times = a.ntime;
    }

    [[nodiscard]] const SourceGrid& grid() const override { return truth_.grid(); }
    [[nodiscard]] const ForecastLayout& layout() const override { return layout_; }
    [[nodiscard]] const LeadTimes& lead_times() const override { return lead_times_; }
    [[nodiscard]] std::vector<SourceVariable> variables() const override { return variables_; }

    [[nodiscard]] std::unique_ptr<ForecastSteps> open(const SourceVariable& variable, const Box& box) const override {
        return std::make_unique<NetcdfSteps>(truth_.reader(variable.name, box), prediction_.reader(variable.name, box));
    }

  private:
    io::NetcdfReader truth_;
    io::NetcdfReader prediction_;
    std::vector<SourceVariable> variables_;
    ForecastLayout layout_;
    LeadTimes lead_times_;  // none: a pair has no initial time
};

}  // namespace

std::unique_ptr<ForecastSource> make_netcdf_pair(const std::string& truth_path, const std::string& prediction_path,
                                                 const std::vector<std::string>& names, bool allow_time_mismatch,
                                                 const InputAccess& access) {
    return std::make_unique<NetcdfSource>(truth_path, prediction_path, names, allow_time_mismatch, access);
}

}  // namespace gridshard::io
