#include "pnetcdf_file.hpp"

#include <fcntl.h>
#include <pnetcdf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/io/netcdf_error.hpp"

namespace gridshard::io::detail {

static_assert(pnetcdf_status::file == NC_EFILE && pnetcdf_status::read == NC_EREAD &&
                  pnetcdf_status::write == NC_EWRITE && pnetcdf_status::open == NC_EOFILE &&
                  pnetcdf_status::no_space == NC_ENO_SPACE && pnetcdf_status::quota == NC_EQUOTA,
              "gridshard/io/netcdf_error.hpp names PnetCDF's codes by value");

namespace {

std::vector<MPI_Offset> offsets(const std::size_t* values, int n) {
    return std::vector<MPI_Offset>(values, values + n);
}
std::vector<MPI_Offset> offsets(std::span<const std::int64_t> values) {
    return std::vector<MPI_Offset>(values.begin(), values.end());
}

// netCDF-C's layout of a new classic file: the header and every variable aligned to 4 bytes (PnetCDF's
// default is 512), so both libraries write the same bytes. Where MPI cannot make the hints, `failure` says why and
// the info is MPI_INFO_NULL: the caller notes the failure after the collective create, which every rank must join.
class NetcdfCAlignment {
  public:
    NetcdfCAlignment() {
        try {
            GRIDSHARD_MPI(MPI_Info_create, &info_);
            GRIDSHARD_MPI(MPI_Info_set, info_, "nc_header_align_size", "4");
            GRIDSHARD_MPI(MPI_Info_set, info_, "nc_var_align_size", "4");
        } catch (const MpiError& e) {
            failure_ = e.what();
        }
    }
    ~NetcdfCAlignment() {
        if (info_ != MPI_INFO_NULL) {
            MPI_Info_free(&info_);  // a destructor cannot throw; a failed free only leaks the hints
        }
    }
    NetcdfCAlignment(const NetcdfCAlignment&) = delete;
    NetcdfCAlignment& operator=(const NetcdfCAlignment&) = delete;

    [[nodiscard]] MPI_Info info() const noexcept { return failure_.empty() ? info_ : MPI_INFO_NULL; }
    [[nodiscard]] const std::string& failure() const noexcept { return failure_; }

  private:
    MPI_Info info_ = MPI_INFO_NULL;
    std::string failure_;
};

// Agrees on the outcome of a collective ncmpi_open or ncmpi_create (`status` on this rank; one allreduce) and
// returns it. Where some ranks failed and others opened the file, those hold a handle that only a collective close
// (MPI_File_close, inside ncmpi_close or ncmpi_abort) releases, which the failed ranks can never join, and no other
// collective can be made on it: the job ends here (MPI_Abort over `comm`, docs/design.md §6), the failed ranks' message
// on stderr first, rather than hanging in the close.
int agreed_open(MPI_Comm comm, int status, const std::string& doing) {
    int outcome[2] = {status != NC_NOERR ? 1 : 0, status == NC_NOERR ? 1 : 0};  // ranks that failed, that opened
    if (MPI_Allreduce(MPI_IN_PLACE, outcome, 2, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) {
        MPI_Abort(comm, 1);
    }
    if (outcome[0] > 0 && outcome[1] > 0) {
        if (status != NC_NOERR) {
            std::fprintf(stderr,
                         "gridshard: error: %s: %s on %d of %d ranks; the others opened it and cannot close it "
                         "without them: ending the job (MPI_Abort)\n",
                         doing.c_str(), ncmpi_strerror(status), outcome[0], outcome[0] + outcome[1]);
            std::fflush(stderr);
        }
        MPI_Abort(comm, 1);
    }
    return status;
}

}  // namespace

std::string pnetcdf_message(int status) {
    return ncmpi_strerror(status);
}

PnetcdfFile::PnetcdfFile(const std::string& path, MPI_Comm comm) : path_(path) {
    const int status = agreed_open(comm, ncmpi_open(comm, path.c_str(), NC_NOWRITE, MPI_INFO_NULL, &ncid_),
                                   "netCDF file '" + path + "': opening it collectively (PnetCDF)");
    if (status != NC_NOERR) {
        ncid_ = -1;
        throw_netcdf_failure(
            status, "netCDF file '" + path + "': cannot open collectively (PnetCDF): " + pnetcdf_message(status));
    }
}

PnetcdfFile::~PnetcdfFile() {
    if (ncid_ >= 0) {
        ncmpi_close(ncid_);  // read-only: nothing to lose if closing fails
    }
}

PnetcdfFile::PnetcdfFile(PnetcdfFile&& other) noexcept
    : path_(std::move(other.path_)), ncid_(std::exchange(other.ncid_, -1)) {}

PnetcdfFile& PnetcdfFile::operator=(PnetcdfFile&& other) noexcept {
    if (this != &other) {
        if (ncid_ >= 0) {
            ncmpi_close(ncid_);
        }
        path_ = std::move(other.path_);
        ncid_ = std::exchange(other.ncid_, -1);
    }
    return *this;
}

int PnetcdfFile::varid(const std::string& name) const {
    int id = -1;
    if (const int status = ncmpi_inq_varid(ncid_, name.c_str(), &id); status != NC_NOERR) {
        throw_netcdf_failure(status, "netCDF file '" + path_ + "': PnetCDF does not see variable '" + name +
                                         "': " + pnetcdf_message(status));
    }
    return id;
}

int PnetcdfFile::get_all(int varid, const std::size_t* start, const std::size_t* count, int ndims, float* out) const {
    const auto s = offsets(start, ndims);
    const auto c = offsets(count, ndims);
    return ncmpi_get_vara_float_all(ncid_, varid, s.data(), c.data(), out);
}

int PnetcdfFile::get_all(int varid, const std::size_t* start, const std::size_t* count, int ndims, double* out) const {
    const auto s = offsets(start, ndims);
    const auto c = offsets(count, ndims);
    return ncmpi_get_vara_double_all(ncid_, varid, s.data(), c.data(), out);
}

// ------------------------------------------------------------------------------------ PnetcdfCollective

void PnetcdfCollective::note(int status, const std::string& doing) {
    if (status == NC_NOERR) {
        return;
    }
    fail(doing + ": " + pnetcdf_message(status), classify_netcdf_status(status) == NetcdfFailure::system);
}

void PnetcdfCollective::fail(const std::string& what, bool system) {
    if (failure_.empty()) {
        failure_ = "cannot write '" + path_ + "': " + what;
        system_ = system;
    }
}

bool PnetcdfCollective::carry_on() {
    // PnetCDF does not keep its ranks in step once a write failed on some (ncmpi_sync returns early where
    // it did and waits in a barrier elsewhere): every collective step is followed by this agreement.
    if (stopped_) {
        return false;
    }
    int failed = failure_.empty() ? 0 : 1;
    int any = 0;
    if (MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm_) != MPI_SUCCESS) {
        any = 1;
        note(NC_EMPI, "agreeing on the write");
    }
    stopped_ = any != 0;
    return !stopped_;
}

// ------------------------------------------------------------------------------------------ PnetcdfSink

PnetcdfSink::PnetcdfSink(const std::string& temporary_path, const std::string& path, MPI_Comm comm,
                         std::uint64_t file_bytes)
    : PnetcdfCollective(path, comm) {
    const NetcdfCAlignment alignment;
    const int status = agreed_open(
        comm, ncmpi_create(comm, temporary_path.c_str(), NC_CLOBBER | NC_64BIT_OFFSET, alignment.info(), &ncid_),
        "cannot write '" + path + "': creating '" + temporary_path + "' collectively (PnetCDF)");
    if (status != NC_NOERR) {
        ncid_ = -1;
    }
    note(status, "creating '" + temporary_path + "'");
    if (!alignment.failure().empty()) {
        fail("setting netCDF-C's alignment: " + alignment.failure(), true);
    }
    if (carry_on()) {
        int previous = 0;
        note(ncmpi_set_fill(ncid_, NC_FILL, &previous), "setting fill mode");  // netCDF-C's default
        int rank = 0;
        GRIDSHARD_MPI(MPI_Comm_rank, comm, &rank);
        if (rank == 0) {
            reserve(temporary_path, file_bytes);  // after ncmpi_create, which truncates the file
        }
        carry_on();
    }
}

PnetcdfSink::~PnetcdfSink() {
    if (ncid_ >= 0) {
        ncmpi_abort(ncid_);  // collective: every rank stopped at the same call
    }
}

void PnetcdfSink::reserve(const std::string& temporary_path, std::uint64_t bytes) {
    // The whole file's blocks before MPI-IO writes any of them: a full disk or quota is met here, with the
    // system's message, never inside MPI-IO, which may count a failed or short write as done and prints lines
    // of its own (Open MPI's OMPIO: "mca_fbtl_posix_pwritev: error in writev"). A file system that cannot
    // allocate ahead (EOPNOTSUPP) writes as before; the read-back still checks every byte.
    if (bytes == 0) {
        return;
    }
    const int fd = ::open(temporary_path.c_str(), O_WRONLY | O_CLOEXEC);
    const int error = fd < 0 ? errno : ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (fd >= 0) {
        ::close(fd);
    }
    if (error != 0 && error != EOPNOTSUPP) {
        fail("reserving its " + std::to_string(bytes) + " bytes on disk: " + std::strerror(error), true);
    }
}

int PnetcdfSink::def_dim(const std::string& name, std::int64_t size, bool unlimited) {
    int id = -1;
    if (!stopped_) {
        note(ncmpi_def_dim(ncid_, name.c_str(), unlimited ? NC_UNLIMITED : static_cast<MPI_Offset>(size), &id),
             "defining dim '" + name + "'");
    }
    return id;
}

int PnetcdfSink::def_var(const std::string& name, const std::vector<int>& dims) {
    int id = -1;
    if (!stopped_) {
        note(ncmpi_def_var(ncid_, name.c_str(), NC_DOUBLE, static_cast<int>(dims.size()), dims.data(), &id),
             "defining variable '" + name + "'");
    }
    return id;
}

int PnetcdfSink::def_char_var(const std::string& name, const std::vector<int>& dims) {
    int id = -1;
    if (!stopped_) {
        note(ncmpi_def_var(ncid_, name.c_str(), NC_CHAR, static_cast<int>(dims.size()), dims.data(), &id),
             "defining variable '" + name + "'");
    }
    return id;
}

void PnetcdfSink::put_text(int varid, const std::string& name, const std::string& value) {
    if (!stopped_) {
        note(ncmpi_put_att_text(ncid_, varid, name.c_str(), static_cast<MPI_Offset>(value.size()), value.c_str()),
             "writing attribute '" + name + "'");
    }
}

void PnetcdfSink::put_double(int varid, const std::string& name, double value) {
    if (!stopped_) {
        note(ncmpi_put_att_double(ncid_, varid, name.c_str(), NC_DOUBLE, 1, &value),
             "writing attribute '" + name + "'");
    }
}

void PnetcdfSink::end_definitions() {
    // The definitions are local to each rank until here: all must have made them before enddef checks them.
    if (carry_on()) {
        note(ncmpi_enddef(ncid_), "ending define mode");
        carry_on();
    }
}

void PnetcdfSink::put(int varid, const std::string& name, std::span<const std::int64_t> start,
                      std::span<const std::int64_t> count, const double* values) {
    if (stopped_) {
        return;
    }
    const auto s = offsets(start);
    const auto c = offsets(count);
    const double none = 0.0;
    note(ncmpi_put_vara_double_all(ncid_, varid, s.data(), c.data(), values != nullptr ? values : &none),
         "writing variable '" + name + "'");
    carry_on();
}

void PnetcdfSink::put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                            const char* values) {
    if (stopped_) {
        return;
    }
    const std::vector<std::int64_t> start(count.size(), 0);
    const auto s = offsets(start);
    const auto c = offsets(count);
    note(ncmpi_put_vara_text_all(ncid_, varid, s.data(), c.data(), values), "writing variable '" + name + "'");
    carry_on();
}

void PnetcdfSink::close() {
    if (stopped_ || ncid_ < 0) {
        return;  // the destructor aborts
    }
    // No ncmpi_sync: it returns at once on a rank that saw a write fail and waits in a barrier on the others.
    // MPI_File_close, inside ncmpi_close, syncs the file first (as MPI_File_sync would).
    note(ncmpi_close(std::exchange(ncid_, -1)), "closing");
    carry_on();
}

// -------------------------------------------------------------------------------------- PnetcdfReadBack

PnetcdfReadBack::PnetcdfReadBack(const std::string& temporary_path, const std::string& path, MPI_Comm comm)
    : PnetcdfCollective(path, comm) {
    const int status = agreed_open(comm, ncmpi_open(comm, temporary_path.c_str(), NC_NOWRITE, MPI_INFO_NULL, &ncid_),
                                   "cannot write '" + path + "': reading it back collectively (PnetCDF)");
    if (status != NC_NOERR) {
        ncid_ = -1;
        fail("reading it back: " + pnetcdf_message(status) + " (a write was lost)", true);
    }
    carry_on();
}

PnetcdfReadBack::~PnetcdfReadBack() {
    close();
}

int PnetcdfReadBack::def_dim(const std::string& /*name*/, std::int64_t /*size*/, bool /*unlimited*/) {
    return -1;  // the reads name variables only
}

int PnetcdfReadBack::def_var(const std::string& name, const std::vector<int>& /*dims*/) {
    int id = -1;
    if (!stopped_) {
        note(ncmpi_inq_varid(ncid_, name.c_str(), &id), "reading back variable '" + name + "'");
    }
    return id;
}

int PnetcdfReadBack::def_char_var(const std::string& name, const std::vector<int>& dims) {
    return def_var(name, dims);
}

void PnetcdfReadBack::put_text(int /*varid*/, const std::string& /*name*/, const std::string& /*value*/) {}

void PnetcdfReadBack::put_double(int /*varid*/, const std::string& /*name*/, double /*value*/) {}

void PnetcdfReadBack::end_definitions() {
    carry_on();  // every rank found every variable
}

void PnetcdfReadBack::put(int varid, const std::string& name, std::span<const std::int64_t> start,
                          std::span<const std::int64_t> count, const double* values) {
    if (stopped_) {
        return;
    }
    std::size_t size = 1;
    for (const std::int64_t n : count) {
        size *= static_cast<std::size_t>(n);
    }
    read_.assign(std::max<std::size_t>(size, 1), 0.0);
    const auto s = offsets(start);
    const auto c = offsets(count);
    note(ncmpi_get_vara_double_all(ncid_, varid, s.data(), c.data(), read_.data()),
         "reading back variable '" + name + "'");
    if (failure().empty() && size > 0 && std::memcmp(read_.data(), values, size * sizeof(double)) != 0) {
        fail("variable '" + name + "' reads back other values than were written (a write was lost: a full disk?)",
             true);
    }
    carry_on();
}

void PnetcdfReadBack::put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                                const char* values) {
    if (stopped_) {
        return;
    }
    std::size_t size = 1;
    for (const std::int64_t n : count) {
        size *= static_cast<std::size_t>(n);
    }
    std::string read(std::max<std::size_t>(size, 1), '\0');
    const std::vector<std::int64_t> start(count.size(), 0);
    const auto s = offsets(start);
    const auto c = offsets(count);
    note(ncmpi_get_vara_text_all(ncid_, varid, s.data(), c.data(), read.data()),
         "reading back variable '" + name + "'");
    if (failure().empty() && size > 0 && std::memcmp(read.data(), values, size) != 0) {
        fail("variable '" + name + "' reads back other values than were written (a write was lost: a full disk?)",
             true);
    }
    carry_on();
}

void PnetcdfReadBack::close() {
    if (ncid_ >= 0) {
        note(ncmpi_close(std::exchange(ncid_, -1)), "closing it after reading it back");  // collective
    }
}

}  // namespace gridshard::io::detail
