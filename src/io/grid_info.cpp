#include "gridshard/io/grid_info.hpp"

#include <cmath>

namespace gridshard::io {

std::string_view to_string(ValueType type) noexcept {
    return type == ValueType::float32 ? "float32" : "float64";
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
