// `gridshard eval` on a pair of CF netCDF files: each rank reads only its hyperslabs.

#include "field_source.hpp"
#include "gridshard/core/error.hpp"
#include "output.hpp"

namespace gridshard::cli {
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

class NetcdfSource final : public FieldSource {
  public:
    NetcdfSource(const std::string& truth_path, const std::string& prediction_path,
                 const std::vector<std::string>& names)
        : truth_(truth_path), prediction_(prediction_path) {
        const io::GridInfo& a = truth_.grid();
        const io::GridInfo& b = prediction_.grid();
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
        for (const std::string& name : names.empty() ? truth_.field_variables() : names) {
            const io::VariableShape t = truth_.variable(name);
            const io::VariableShape p = prediction_.variable(name);
            if (t.dim_sizes != p.dim_sizes) {
                throw ArgumentError("variable '" + name + "' has shape " + shape_text(t) + " in the truth but " +
                                    shape_text(p) + " in the prediction");
            }
            variables_.push_back({name, t.channels_per_step});
        }
        if (variables_.empty()) {
            throw ArgumentError("truth '" + truth_path + "' has no variable on its lat x lon grid");
        }
    }

    [[nodiscard]] const SourceGrid& grid() const override { return truth_.grid(); }
    [[nodiscard]] std::vector<SourceVariable> variables() const override { return variables_; }

    void read(const SourceVariable& variable, std::int64_t step, const Box& box, std::vector<float>& truth,
              std::vector<float>& prediction) const override {
        truth = truth_.read(variable.name, {step, step + 1}, box);
        prediction = prediction_.read(variable.name, {step, step + 1}, box);
    }

  private:
    io::NetcdfReader truth_;
    io::NetcdfReader prediction_;
    std::vector<SourceVariable> variables_;
};

}  // namespace

std::unique_ptr<FieldSource> make_netcdf_source(const std::string& truth_path, const std::string& prediction_path,
                                                const std::vector<std::string>& names) {
    return std::make_unique<NetcdfSource>(truth_path, prediction_path, names);
}

void write_zonal_file(const std::string& path, const SourceGrid& grid,
                      const std::vector<std::pair<std::string, std::vector<double>>>& fields) {
    std::vector<io::ZonalVariable> variables;
    for (const auto& [name, values] : fields) {
        variables.push_back({name, values, "", "zonal mean of " + name});
    }
    io::write_zonal_means(path, grid, grid.ntime, variables);
}

}  // namespace gridshard::cli
