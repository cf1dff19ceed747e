#pragma once
// The thin checked layer over the netCDF C library that the reader and the CF discovery use: an owning
// read-only handle whose every call checks its return code and names the file. Internal to the io
// layer. No MPI calls, except in opening and closing a file opened collectively; not thread-safe (netCDF is
// not).

#include <mpi.h>
#include <netcdf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gridshard::io::detail {

/// Throws NetcdfError "netCDF file 'PATH': PROBLEM[: netCDF's message]".
[[noreturn]] void fail(const std::string& path, const std::string& problem, int status = NC_NOERR);

/// Every netCDF return code of a read goes through here: throws fail(path, doing, status) on error.
void check(int status, const std::string& path, std::string_view doing);

/// Checks that `temporary`, just written as output `path`, holds a complete classic-format header and every
/// byte it declares (SystemError otherwise: a write was lost, even the header's), and cuts the zeros netCDF-C may leave
/// past the last variable (it writes whole pages; PnetCDF does not), so both writers give the same bytes.
void fit_to_extent(const std::string& temporary, const std::string& path);

[[nodiscard]] std::string lower(std::string_view text);
[[nodiscard]] bool is_numeric(nc_type type);

/// A netCDF file opened read-only (nc_open NC_NOWRITE), closed by the destructor. Move-only.
class NetcdfHandle {
  public:
    /// Opens `path`; throws NetcdfError with netCDF's message when it cannot.
    explicit NetcdfHandle(const std::string& path);
    /// Opens the netCDF-4/HDF5 file `path` collectively over `comm` (nc_open_par: collective, as is closing
    /// it); its variables read independently until NC_COLLECTIVE is set on them. Only with
    /// GRIDSHARD_PARALLEL_IO; throws NetcdfError with netCDF's message when it cannot.
    NetcdfHandle(const std::string& path, MPI_Comm comm);
    ~NetcdfHandle();
    NetcdfHandle(NetcdfHandle&& other) noexcept;
    NetcdfHandle& operator=(NetcdfHandle&&) = delete;
    NetcdfHandle(const NetcdfHandle&) = delete;
    NetcdfHandle& operator=(const NetcdfHandle&) = delete;

    [[nodiscard]] int ncid() const noexcept { return ncid_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

    [[nodiscard]] std::string var_name(int varid) const;
    [[nodiscard]] std::string dim_name(int dimid) const;
    [[nodiscard]] std::int64_t dim_length(int dimid) const;
    [[nodiscard]] std::vector<int> dim_ids() const;
    [[nodiscard]] int nvars() const;
    [[nodiscard]] std::optional<int> find_var(const std::string& name) const;
    [[nodiscard]] nc_type var_type(int varid) const;
    [[nodiscard]] std::vector<int> var_dims(int varid) const;
    struct AttributeInfo {
        nc_type type = NC_NAT;
        std::size_t length = 0;
    };
    /// The type and length of attribute `name` of `varid`, or nothing when absent.
    [[nodiscard]] std::optional<AttributeInfo> attribute_info(int varid, const char* name) const;
    /// The type of attribute `name` of `varid`, or nothing when absent.
    [[nodiscard]] std::optional<nc_type> attribute_type(int varid, const char* name) const;
    /// A text attribute (NC_CHAR or NC_STRING), trimmed, or nothing when absent or not text.
    [[nodiscard]] std::optional<std::string> text_attribute(int varid, const char* name) const;
    /// A numeric attribute converted to double, or nothing when absent; text is an error.
    [[nodiscard]] std::optional<std::vector<double>> numeric_attribute(int varid, const char* name) const;
    /// A numeric attribute of exactly one value, or nothing when absent.
    [[nodiscard]] std::optional<double> scalar_attribute(int varid, const char* name) const;
    /// Every value of a variable of `count` values, as double (coordinates and bounds). The count is
    /// checked against the memory available before anything is allocated.
    [[nodiscard]] std::vector<double> read_all(int varid, std::size_t count) const;

  private:
    std::string path_;
    int ncid_ = -1;
};

}  // namespace gridshard::io::detail
