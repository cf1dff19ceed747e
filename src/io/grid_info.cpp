#include "gridshard/io/grid_info.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

namespace gridshard::io {

std::string_view to_string(ValueType type) noexcept {
    return type == ValueType::float32 ? "float32" : "float64";
}

bool is_ensemble_dim_name(std::string_view name) noexcept {
    std::string lower;
    for (const char c : name) {
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    constexpr std::array<std::string_view, 10> names = {"sample",      "samples",     "member", "members",
                                                        "ensemble",    "ensembles",   "ens",    "number",
                                                        "realization", "realizations"};
    return std::find(names.begin(), names.end(), lower) != names.end();
}

bool same_grid(const GridInfo& a, const GridInfo& b, double tolerance_deg) noexcept {
    const auto close = [tolerance_deg](const std::vector<double>& x, const std::vector<double>& y) {
        if (x.size() != y.size()) {
            return false;
        }
        for (std::size_t k = 0; k < x.size(); ++k) {
            if (!(std::abs(x[k] - y[k]) <= tolerance_deg)) {
                return false;
            }
        }
        return true;
    };
    return close(a.lat_deg, b.lat_deg) && close(a.lon_deg, b.lon_deg);
}

}  // namespace gridshard::io
