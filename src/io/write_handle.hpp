#pragma once
// The netCDF file an output writer fills: created in an AtomicOutput's temporary and aborted unless
// closed, and the checks of every netCDF call of a write. Internal to the io layer; no MPI calls.

#include <netcdf.h>

#include <string>
#include <utility>

#include "gridshard/core/error.hpp"
#include "gridshard/io/netcdf_error.hpp"
#include "gridshard/io/output_file.hpp"
#include "netcdf_handle.hpp"

namespace gridshard::io::detail {

// Every netCDF return code of a write, classed by the one rule (gridshard/io/netcdf_error.hpp).
inline void check_write(int status, const std::string& path, const std::string& doing) {
    if (status == NC_NOERR) {
        return;
    }
    throw_netcdf_failure(status, "cannot write '" + path + "': " + doing + ": " + nc_strerror(status));
}

// The netCDF file being written into an AtomicOutput's temporary; aborted unless closed.
class WriteHandle {
  public:
    explicit WriteHandle(const AtomicOutput& output) : path_(output.path()), temporary_(output.temporary_path()) {
        check_write(nc_create(output.temporary_path().c_str(), NC_CLOBBER | NC_64BIT_OFFSET, &ncid_), path_,
                    "creating '" + output.temporary_path() + "'");
    }
    ~WriteHandle() {
        if (ncid_ >= 0) {
            nc_abort(ncid_);
        }
    }
    WriteHandle(const WriteHandle&) = delete;
    WriteHandle& operator=(const WriteHandle&) = delete;

    [[nodiscard]] int ncid() const noexcept { return ncid_; }
    /// Closes the file, checks it holds all its data and cuts the zeros netCDF-C may leave past it.
    void close() {
        check_write(nc_close(std::exchange(ncid_, -1)), path_, "closing");
        fit_to_extent(temporary_, path_);
    }

  private:
    std::string path_;
    std::string temporary_;
    int ncid_ = -1;
};

inline void put_text(int ncid, int varid, const char* name, const std::string& value, const std::string& path) {
    check_write(nc_put_att_text(ncid, varid, name, value.size(), value.c_str()), path,
                "writing attribute '" + std::string(name) + "'");
}

}  // namespace gridshard::io::detail
