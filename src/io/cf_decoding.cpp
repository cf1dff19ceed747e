#include "cf_decoding.hpp"

#include "../comm/thread_blocks.hpp"
#include "../core/kernel_dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace gridshard::io::detail {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// netCDF's default fill value for a stored type, or NaN for bytes (which have none: netCDF guide).
double default_fill(nc_type type) {
    switch (type) {
        case NC_SHORT:
            return NC_FILL_SHORT;
        case NC_USHORT:
            return NC_FILL_USHORT;
        case NC_INT:
            return NC_FILL_INT;
        case NC_UINT:
            return NC_FILL_UINT;
        case NC_INT64:
            return static_cast<double>(NC_FILL_INT64);
        case NC_UINT64:
            return static_cast<double>(NC_FILL_UINT64);
        case NC_FLOAT:
            return NC_FILL_FLOAT;
        case NC_DOUBLE:
            return NC_FILL_DOUBLE;
        default:
            return std::numeric_limits<double>::quiet_NaN();
    }
}

}  // namespace

CfDecoding::CfDecoding(const NetcdfHandle& file, int varid)
    : stored_type_(file.var_type(varid)), valid_min_(-infinity), valid_max_(infinity) {
    const std::string name = file.var_name(varid);
    missing_ = file.numeric_attribute(varid, "missing_value").value_or(std::vector<double>{});
    if (const auto fill = file.scalar_attribute(varid, "_FillValue")) {
        missing_.push_back(*fill);
    } else {
        int no_fill = 0;
        check(nc_inq_var_fill(file.ncid(), varid, &no_fill, nullptr), file.path(),
              "reading the fill mode of '" + name + "'");
        if (const double default_value = default_fill(stored_type_); no_fill == 0 && !std::isnan(default_value)) {
            missing_.push_back(default_value);
        }
    }
    is_unsigned_ = (stored_type_ == NC_BYTE || stored_type_ == NC_SHORT || stored_type_ == NC_INT) &&
                   lower(file.text_attribute(varid, "_Unsigned").value_or("")) == "true";
    wrap_ = stored_type_ == NC_BYTE ? 256.0 : stored_type_ == NC_SHORT ? 65536.0 : 4294967296.0;
    const auto as_stored = [this](double v) { return is_unsigned_ && v < 0.0 ? v + wrap_ : v; };

    if (const auto range = file.numeric_attribute(varid, "valid_range")) {
        if (range->size() != 2) {
            fail(file.path(),
                 "attribute 'valid_range' of '" + name + "' has " + std::to_string(range->size()) + " values, not 2");
        }
        valid_min_ = as_stored((*range)[0]);
        valid_max_ = as_stored((*range)[1]);
    } else {
        valid_min_ = as_stored(file.scalar_attribute(varid, "valid_min").value_or(-infinity));
        valid_max_ = as_stored(file.scalar_attribute(varid, "valid_max").value_or(infinity));
    }
    if (!(valid_min_ <= valid_max_)) {
        fail(file.path(), "variable '" + name + "' has a valid range [" + std::to_string(valid_min_) + ", " +
                              std::to_string(valid_max_) + "] whose minimum is above its maximum");
    }

    const auto scale_type = file.attribute_type(varid, "scale_factor");
    const auto offset_type = file.attribute_type(varid, "add_offset");
    scale_ = file.scalar_attribute(varid, "scale_factor").value_or(1.0);
    offset_ = file.scalar_attribute(varid, "add_offset").value_or(0.0);
    packed_ = scale_type.has_value() || offset_type.has_value() || is_unsigned_;
    if (scale_type || offset_type) {
        value_type_ = (scale_type ? *scale_type : *offset_type) == NC_FLOAT ? ValueType::float32 : ValueType::float64;
    } else {
        switch (stored_type_) {
            case NC_FLOAT:
            case NC_BYTE:
            case NC_UBYTE:
            case NC_SHORT:
            case NC_USHORT:
                value_type_ = ValueType::float32;
                break;
            default:
                value_type_ = ValueType::float64;
                break;
        }
    }
}

template <class T>
bool CfDecoding::stored_values_fit() const noexcept {
    if constexpr (std::is_same_v<T, double>) {
        return stored_type_ != NC_INT64 && stored_type_ != NC_UINT64;  // beyond 2^53 netCDF rounds anyway
    } else {
        return stored_type_ == NC_FLOAT || stored_type_ == NC_BYTE || stored_type_ == NC_UBYTE ||
               stored_type_ == NC_SHORT || stored_type_ == NC_USHORT;
    }
}

namespace {

// The rule after the missing-value test: unsigned stored values wrapped (`wrap` is 2^bits for them, else 0), the
// valid range checked, the value unpacked in double and rounded once to T; NaN where missing or invalid.
template <class T, bool packed>
inline T decoded_value(double x, bool missing, double wrap, double low, double high, double scale,
                       double offset) noexcept {
    x += x < 0.0 ? wrap : 0.0;
    const bool invalid = !(x >= low && x <= high);
    const double data = packed ? x * scale + offset : x;
    return (missing | invalid) ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(data);
}

// CfDecoding::apply for at most two missing values (`first`, `second`; NaN for none), branch-free so that it
// vectorises.
template <class T, bool packed>
GRIDSHARD_KERNEL void decode_values(T* values, std::int64_t n, double first, double second, double wrap, double low,
                                    double high, double scale, double offset) noexcept {
    for (std::int64_t j = 0; j < n; ++j) {
        const double x = static_cast<double>(values[j]);
        values[j] = decoded_value<T, packed>(x, (x == first) | (x == second), wrap, low, high, scale, offset);
    }
}

}  // namespace

template <class T>
void CfDecoding::apply_to_block(std::span<T> values) const noexcept {
    constexpr T nan = std::numeric_limits<T>::quiet_NaN();
    const bool float_bounds = static_cast<double>(static_cast<T>(valid_min_)) == valid_min_ &&
                              static_cast<double>(static_cast<T>(valid_max_)) == valid_max_;
    if (!packed_ && missing_.size() <= 2 && float_bounds && std::all_of(missing_.begin(), missing_.end(), [](double m) {
            return std::isnan(m) || static_cast<double>(static_cast<T>(m)) == m;  // a NaN fill is a NaN of T
        })) {
        // The common case, branch-free so it vectorises: at most two missing values, no packing.
        const T first = missing_.empty() ? nan : static_cast<T>(missing_[0]);
        const T second = missing_.size() < 2 ? first : static_cast<T>(missing_[1]);
        const T low = static_cast<T>(valid_min_);
        const T high = static_cast<T>(valid_max_);
        if (std::isnan(first) && std::isnan(second) && low == -std::numeric_limits<T>::infinity() &&
            high == std::numeric_limits<T>::infinity()) {
            return;  // missing values are NaN already (ACE's _FillValue) and every value is in range: nothing to do
        }
        for (T& v : values) {
            v = (v == first || v == second || !(v >= low && v <= high)) ? nan : v;
        }
        return;
    }
    const double wrap = is_unsigned_ ? wrap_ : 0.0;
    if (missing_.size() <= 2) {
        constexpr double no_value = std::numeric_limits<double>::quiet_NaN();
        const double first = missing_.empty() ? no_value : missing_[0];
        const double second = missing_.size() < 2 ? no_value : missing_[1];
        const auto n = static_cast<std::int64_t>(values.size());
        packed_
            ? decode_values<T, true>(values.data(), n, first, second, wrap, valid_min_, valid_max_, scale_, offset_)
            : decode_values<T, false>(values.data(), n, first, second, wrap, valid_min_, valid_max_, scale_, offset_);
        return;
    }
    for (T& v : values) {  // more missing values
        const double x = static_cast<double>(v);
        const bool missing = std::find(missing_.begin(), missing_.end(), x) != missing_.end();
        v = packed_ ? decoded_value<T, true>(x, missing, wrap, valid_min_, valid_max_, scale_, offset_)
                    : decoded_value<T, false>(x, missing, wrap, valid_min_, valid_max_, scale_, offset_);
    }
}

template <class T>
void CfDecoding::apply(std::span<T> values) const noexcept {
    // Each value on its own: the threads take blocks of them.
    gridshard::detail::for_each_block(
        static_cast<std::int64_t>(values.size()), 1, [&](std::int64_t begin, std::int64_t count) {
            apply_to_block(values.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(count)));
        });
}

template bool CfDecoding::stored_values_fit<float>() const noexcept;
template bool CfDecoding::stored_values_fit<double>() const noexcept;
template void CfDecoding::apply<float>(std::span<float>) const noexcept;
template void CfDecoding::apply<double>(std::span<double>) const noexcept;

}  // namespace gridshard::io::detail
