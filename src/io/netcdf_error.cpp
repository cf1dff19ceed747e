#include "gridshard/io/netcdf_error.hpp"

#include <netcdf.h>

#include <cerrno>

namespace gridshard::io {

NetcdfFailure classify_netcdf_status(int status) noexcept {
    if (status > 0) {
        switch (status) {
            case ENOENT:
            case ENOTDIR:
            case EISDIR:
            case ENAMETOOLONG:
            case ELOOP:
            case EACCES:
            case EPERM:
            case EEXIST:
            case EROFS:
                return NetcdfFailure::argument;
            default:
                return NetcdfFailure::system;
        }
    }
    switch (status) {
        case NC_ENOMEM:
        case NC_EIO:
        case NC_EMPI:
        case NC_ECANTWRITE:
        case pnetcdf_status::file:
        case pnetcdf_status::read:
        case pnetcdf_status::write:
        case pnetcdf_status::open:
        case pnetcdf_status::no_space:
        case pnetcdf_status::quota:
            return NetcdfFailure::system;
        default:
            return NetcdfFailure::argument;
    }
}

void throw_netcdf_failure(int status, const std::string& message) {
    if (classify_netcdf_status(status) == NetcdfFailure::system) {
        throw SystemError(message);
    }
    throw NetcdfError(message, status);
}

}  // namespace gridshard::io
