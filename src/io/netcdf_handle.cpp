#include "netcdf_handle.hpp"

#if GRIDSHARD_PARALLEL_IO
#include <netcdf_par.h>
#endif

#include <algorithm>
#include <cctype>
#include <utility>

#include "gridshard/core/memory.hpp"
#include "gridshard/io/netcdf_error.hpp"

namespace gridshard::io::detail {
namespace {

std::string trim(std::string text) {
    const auto not_space = [](unsigned char c) { return std::isspace(c) == 0 && c != '\0'; };
    text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
    text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
    return text;
}

}  // namespace

void fail(const std::string& path, const std::string& problem, int status) {
    std::string message = "netCDF file '" + path + "': " + problem;
    if (status != NC_NOERR) {
        message += ": ";
        message += nc_strerror(status);
    }
    if (status == NC_NOERR) {
        throw NetcdfError(message);
    }
    throw_netcdf_failure(status, message);
}

void check(int status, const std::string& path, std::string_view doing) {
    if (status != NC_NOERR) {
        fail(path, std::string(doing), status);
    }
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool is_numeric(nc_type type) {
    switch (type) {
        case NC_BYTE:
        case NC_UBYTE:
        case NC_SHORT:
        case NC_USHORT:
        case NC_INT:
        case NC_UINT:
        case NC_INT64:
        case NC_UINT64:
        case NC_FLOAT:
        case NC_DOUBLE:
            return true;
        default:
            return false;
    }
}

NetcdfHandle::NetcdfHandle(const std::string& path) : path_(path) {
    const int status = nc_open(path.c_str(), NC_NOWRITE, &ncid_);
    if (status != NC_NOERR) {
        ncid_ = -1;
        fail(path_, "cannot open", status);
    }
}

NetcdfHandle::NetcdfHandle(const std::string& path, MPI_Comm comm) : path_(path) {
#if GRIDSHARD_PARALLEL_IO
    const int status = nc_open_par(path.c_str(), NC_NOWRITE, comm, MPI_INFO_NULL, &ncid_);
#else
    (void)comm;
    const int status = NC_ENOPAR;
#endif
    if (status != NC_NOERR) {
        ncid_ = -1;
        fail(path_, "cannot open collectively", status);
    }
}

NetcdfHandle::~NetcdfHandle() {
    if (ncid_ >= 0) {
        nc_close(ncid_);  // read-only: nothing to lose if closing fails
    }
}

NetcdfHandle::NetcdfHandle(NetcdfHandle&& other) noexcept
    : path_(std::move(other.path_)), ncid_(std::exchange(other.ncid_, -1)) {}

std::string NetcdfHandle::var_name(int varid) const {
    char name[NC_MAX_NAME + 1] = {};
    check(nc_inq_varname(ncid_, varid, name), path_, "reading a variable's name");
    return name;
}

std::string NetcdfHandle::dim_name(int dimid) const {
    char name[NC_MAX_NAME + 1] = {};
    check(nc_inq_dimname(ncid_, dimid, name), path_, "reading a dimension's name");
    return name;
}

std::int64_t NetcdfHandle::dim_length(int dimid) const {
    std::size_t length = 0;
    check(nc_inq_dimlen(ncid_, dimid, &length), path_, "reading the length of dimension '" + dim_name(dimid) + "'");
    return static_cast<std::int64_t>(length);
}

std::vector<int> NetcdfHandle::dim_ids() const {
    int ndims = 0;
    check(nc_inq_dimids(ncid_, &ndims, nullptr, 0), path_, "listing dimensions");
    std::vector<int> ids(static_cast<std::size_t>(ndims));
    check(nc_inq_dimids(ncid_, &ndims, ids.data(), 0), path_, "listing dimensions");
    return ids;
}

int NetcdfHandle::nvars() const {
    int nvars = 0;
    check(nc_inq_nvars(ncid_, &nvars), path_, "counting variables");
    return nvars;
}

std::optional<int> NetcdfHandle::find_var(const std::string& name) const {
    int varid = -1;
    const int status = nc_inq_varid(ncid_, name.c_str(), &varid);
    if (status == NC_ENOTVAR) {
        return std::nullopt;
    }
    check(status, path_, "looking up variable '" + name + "'");
    return varid;
}

nc_type NetcdfHandle::var_type(int varid) const {
    nc_type type = NC_NAT;
    check(nc_inq_vartype(ncid_, varid, &type), path_, "reading the type of variable '" + var_name(varid) + "'");
    return type;
}

std::vector<int> NetcdfHandle::var_dims(int varid) const {
    int ndims = 0;
    check(nc_inq_varndims(ncid_, varid, &ndims), path_, "reading the dims of variable '" + var_name(varid) + "'");
    std::vector<int> dims(static_cast<std::size_t>(ndims));
    check(nc_inq_vardimid(ncid_, varid, dims.data()), path_, "reading the dims of variable '" + var_name(varid) + "'");
    return dims;
}

std::optional<nc_type> NetcdfHandle::attribute_type(int varid, const char* name) const {
    const auto info = attribute_info(varid, name);
    return info ? std::optional<nc_type>(info->type) : std::nullopt;
}

std::optional<NetcdfHandle::AttributeInfo> NetcdfHandle::attribute_info(int varid, const char* name) const {
    AttributeInfo info;
    const int status = nc_inq_att(ncid_, varid, name, &info.type, &info.length);
    if (status == NC_ENOTATT) {
        return std::nullopt;
    }
    check(status, path_, "reading attribute '" + std::string(name) + "' of '" + var_name(varid) + "'");
    return info;
}

std::optional<std::string> NetcdfHandle::text_attribute(int varid, const char* name) const {
    const auto info = attribute_info(varid, name);
    if (!info) {
        return std::nullopt;
    }
    const auto [type, length] = *info;
    const std::string doing = "reading attribute '" + std::string(name) + "' of '" + var_name(varid) + "'";
    if (type == NC_CHAR) {
        std::string text(length, '\0');
        check(nc_get_att_text(ncid_, varid, name, text.data()), path_, doing);
        return trim(std::move(text));
    }
    if (type == NC_STRING && length > 0) {
        std::vector<char*> strings(length, nullptr);
        check(nc_get_att_string(ncid_, varid, name, strings.data()), path_, doing);
        std::string text = strings[0] != nullptr ? strings[0] : "";
        nc_free_string(length, strings.data());
        return trim(std::move(text));
    }
    return std::nullopt;
}

std::optional<std::vector<double>> NetcdfHandle::numeric_attribute(int varid, const char* name) const {
    const auto info = attribute_info(varid, name);
    if (!info) {
        return std::nullopt;
    }
    if (!is_numeric(info->type)) {
        fail(path_, "attribute '" + std::string(name) + "' of '" + var_name(varid) + "' is not numeric");
    }
    const std::string doing = "reading attribute '" + std::string(name) + "' of '" + var_name(varid) + "'";
    std::vector<double> values(info->length);
    check(nc_get_att_double(ncid_, varid, name, values.data()), path_, doing);
    return values;
}

std::optional<double> NetcdfHandle::scalar_attribute(int varid, const char* name) const {
    const auto values = numeric_attribute(varid, name);
    if (!values) {
        return std::nullopt;
    }
    if (values->size() != 1) {
        fail(path_, "attribute '" + std::string(name) + "' of '" + var_name(varid) + "' has " +
                        std::to_string(values->size()) + " values, not 1");
    }
    return values->front();
}

std::vector<double> NetcdfHandle::read_all(int varid, std::size_t count) const {
    const std::string what = "variable '" + var_name(varid) + "' of '" + path_ + "'";
    if (const auto available = available_memory_bytes(); available && count > *available / sizeof(double)) {
        fail(path_, "variable '" + var_name(varid) + "' has " + std::to_string(count) + " values (" +
                        format_bytes(count * sizeof(double)) + "), more than the " + format_bytes(*available) +
                        " of memory available");
    }
    std::vector<double> values = allocate_vector<double>(count, what);
    if (count > 0) {
        check(nc_get_var_double(ncid_, varid, values.data()), path_, "reading variable '" + var_name(varid) + "'");
    }
    return values;
}

}  // namespace gridshard::io::detail
