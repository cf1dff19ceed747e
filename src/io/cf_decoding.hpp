#pragma once
// CF decoding of one variable: how its stored values become data values. Resolved once per variable from
// its attributes, then applied in place to every buffer read. Internal to the io layer. No MPI calls.

#include <netcdf.h>

#include <span>
#include <string>
#include <vector>

#include "gridshard/io/grid_info.hpp"
#include "netcdf_handle.hpp"

namespace gridshard::io::detail {

/// The decoding of one variable, in the order CF gives (conventions §2.5.1 and §8.1):
/// 1. stored values equal to `_FillValue` or to any `missing_value` become NaN (without `_FillValue`,
///    netCDF's default fill for the type does, unless the variable is written without fill; bytes have
///    no default fill);
/// 2. `_Unsigned = "true"` makes a signed stored byte, short or int unsigned;
/// 3. values outside `valid_range`, or below `valid_min` or above `valid_max`, become NaN; these
///    attributes are in the stored (packed) type and are applied before unpacking;
/// 4. `scale_factor` and `add_offset` unpack, computed in double and rounded once to the value type.
/// The value type (see ValueType) is the type of `scale_factor` (or `add_offset`) for packed variables,
/// else float for float and for integers of 16 bits or fewer (exact), double for double and wider integers.
class CfDecoding {
  public:
    /// Reads the attributes of `varid`. Throws NetcdfError for attributes that contradict each other
    /// (valid_min above valid_max, a valid_range of other than two values, text where numbers belong).
    CfDecoding(const NetcdfHandle& file, int varid);

    [[nodiscard]] ValueType value_type() const noexcept { return value_type_; }
    [[nodiscard]] nc_type stored_type() const noexcept { return stored_type_; }
    /// Whether every stored value converts exactly to T, so a buffer of T can hold the stored values
    /// before decoding (false for float and integers wider than 24 bits).
    template <class T>
    [[nodiscard]] bool stored_values_fit() const noexcept;

    /// Decodes `values` in place: on entry they are the stored values converted to T (exactly; see
    /// stored_values_fit), on return data values with NaN where missing or invalid. The OpenMP threads share the
    /// values (comm/thread_blocks.hpp).
    template <class T>
    void apply(std::span<T> values) const noexcept;

  private:
    /// apply() on one thread.
    template <class T>
    void apply_to_block(std::span<T> values) const noexcept;

    nc_type stored_type_ = NC_NAT;
    ValueType value_type_ = ValueType::float32;
    std::vector<double> missing_;  // stored values that mean "missing"
    bool is_unsigned_ = false;
    double wrap_ = 0.0;  // 2^bits, added to negative stored values when is_unsigned_
    double valid_min_;   // -inf when absent
    double valid_max_;   // +inf when absent
    bool packed_ = false;
    double scale_ = 1.0;
    double offset_ = 0.0;
};

}  // namespace gridshard::io::detail
