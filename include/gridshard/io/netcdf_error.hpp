#pragma once
/// @file
/// The one rule for a failed netCDF or PnetCDF call: which statuses are the caller's (a file that is not netCDF,
/// a name the library refuses, a path that does not exist: ArgumentError, exit status 2) and which are the
/// system's (a full disk, an I/O error, memory, MPI-IO: SystemError, exit status 1). Every reader and writer, serial
/// or collective, throws through throw_netcdf_failure(), so the same failure gives the same exit status wherever it
/// happens. No MPI calls; includes neither netcdf.h nor pnetcdf.h.

#include <string>

#include "gridshard/core/error.hpp"

namespace gridshard::io {

/// A netCDF file cannot be read or written as asked: missing or unreadable, not netCDF, truncated, no
/// latitude or longitude coordinate, a missing or misshapen variable, a name netCDF refuses. The one-line message names
/// the file and the problem, and carries netCDF's own message (nc_strerror) when a netCDF call failed.
class NetcdfError : public ArgumentError {
  public:
    /// `nc_status` is the netCDF return code that caused the error, or 0 (NC_NOERR) when none did.
    explicit NetcdfError(const std::string& what, int nc_status = 0) : ArgumentError(what), nc_status_(nc_status) {}
    /// The netCDF return code (0 when the error was not a failed netCDF call).
    [[nodiscard]] int nc_status() const noexcept { return nc_status_; }

  private:
    int nc_status_;
};

/// Whose a failed call's status is.
enum class NetcdfFailure {
    argument,  ///< the input's or the caller's: NetcdfError
    system,    ///< the system's: SystemError
};

/// The class of a netCDF-C or PnetCDF return code other than NC_NOERR (the two libraries share their codes where
/// both have them). The system's: an errno value (netCDF-C passes the system's errors through as positive codes)
/// other than those that name a bad path (ENOENT, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, EACCES, EPERM, EEXIST,
/// EROFS); NC_ENOMEM, NC_EIO, NC_EMPI, NC_ECANTWRITE; PnetCDF's NC_EFILE, NC_EREAD,
/// NC_EWRITE, NC_EOFILE, NC_ENO_SPACE, NC_EQUOTA. Every other code is the caller's: the file's contents (not
/// netCDF, a corrupt HDF5 object, a library error a malformed file provokes) or the request.
[[nodiscard]] NetcdfFailure classify_netcdf_status(int status) noexcept;

/// Throws `message` as the class of `status` says: NetcdfError(message, status) or SystemError(message).
[[noreturn]] void throw_netcdf_failure(int status, const std::string& message);

/// PnetCDF's own codes that the rule names (pnetcdf.h cannot be included beside netcdf.h; pnetcdf_file.cpp checks
/// these values against its header).
namespace pnetcdf_status {
inline constexpr int file = -204;      // NC_EFILE
inline constexpr int read = -205;      // NC_EREAD
inline constexpr int write = -206;     // NC_EWRITE
inline constexpr int open = -207;      // NC_EOFILE
inline constexpr int no_space = -224;  // NC_ENO_SPACE
inline constexpr int quota = -225;     // NC_EQUOTA
}  // namespace pnetcdf_status

}  // namespace gridshard::io
