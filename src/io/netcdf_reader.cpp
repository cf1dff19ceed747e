#include "gridshard/io/netcdf_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cf_decoding.hpp"
#include "cf_grid.hpp"
#include "file_kind.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/parallel_io.hpp"
#include "netcdf_handle.hpp"
#if GRIDSHARD_PARALLEL_IO
#include <netcdf_par.h>

#include "pnetcdf_file.hpp"
#endif

namespace gridshard::io {

namespace detail {

/// The state every reader and plan of one file shares: the netCDF handle, the grid, and a descriptor of
/// our own on the same file with the size its header needs, to see a file that is or becomes too short.
struct OpenFile {
    explicit OpenFile(const std::string& path);
    /// Collective over `comm`: every rank checks the file, all agree, then open it together (netCDF-4 with
    /// nc_open_par; a classic file with netCDF-C for its metadata and PnetCDF for its data), or with
    /// IoMode::automatic a classic file independently.
    OpenFile(const std::string& path, const Communicator& comm, IoMode mode);

    /// Throws NetcdfError naming `context()` when the file is shorter than its header needs.
    template <class Context>
    void check_complete(Context&& context) const {
        const std::uint64_t size = current_size();
        if (size < required_bytes) {
            fail_truncated(size, context());
        }
    }
    [[nodiscard]] std::uint64_t current_size() const;
    [[noreturn]] void fail_truncated(std::uint64_t size, const std::string& context) const;

    // Opens our descriptor and checks the file is complete before `handle` opens it; returns `file_path`.
    const std::string& opened_complete(const std::string& file_path);
    // The same on every rank of `comm`, agreed (and the format and size agreed), then the handle opened:
    // collectively unless `mode` is automatic and the file classic (sets `collective`).
    NetcdfHandle opened_collectively(const std::string& file_path, const Communicator& comm, IoMode mode);
    // What every constructor checks once the handle is open: the same file, its grid, still complete.
    void find_grid_checked();

    // A descriptor closed by its destructor, so that a constructor that throws half-way leaks nothing.
    struct Descriptor {
        int value = -1;
        Descriptor() = default;
        Descriptor(const Descriptor&) = delete;
        Descriptor& operator=(const Descriptor&) = delete;
        ~Descriptor() {
            if (value >= 0) {
                ::close(value);
            }
        }
    };

    std::string path;
    Descriptor descriptor;
    std::uint64_t required_bytes = 0;
    FileExtent::Format format = FileExtent::Format::unknown;
    bool collective = false;
    NetcdfHandle handle;  // after descriptor, required_bytes and format, which opened_complete() sets first
    GridInfo grid;
#if GRIDSHARD_PARALLEL_IO
    PnetcdfFile pnetcdf;  // a classic file's data, opened collectively
#endif
};

namespace {

// Refuses anything but a regular file before netCDF opens it: opening a FIFO would block forever.
const std::string& regular_file(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        fail(path, std::string("cannot open: ") + std::strerror(errno));
    }
    if (!S_ISREG(info.st_mode)) {
        fail(path, std::string("is not a regular file (") + file_kind(info.st_mode) + ")");
    }
    return path;
}

std::uint64_t file_size(int fd, const std::string& path) {
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
        fail(path, std::string("cannot read its size: ") + std::strerror(errno));
    }
    return static_cast<std::uint64_t>(info.st_size);
}

// The bytes the header of the file behind `fd` says the file must have (0 when the format is unknown), and
// its format.
std::uint64_t required_bytes(int fd, const std::string& path, std::uint64_t size, FileExtent::Format& format) {
    std::vector<unsigned char> prefix;
    std::uint64_t wanted = std::min<std::uint64_t>(size, 64 * 1024);
    for (;;) {
        prefix.resize(static_cast<std::size_t>(wanted));
        std::size_t have = 0;
        while (have < prefix.size()) {
            const ssize_t got = ::pread(fd, prefix.data() + have, prefix.size() - have, static_cast<off_t>(have));
            if (got < 0 && errno == EINTR) {
                continue;
            }
            if (got < 0) {
                fail(path, std::string("cannot read its header: ") + std::strerror(errno));
            }
            if (got == 0) {
                break;  // shorter than it was a moment ago: the parser sees the end
            }
            have += static_cast<std::size_t>(got);
        }
        prefix.resize(have);
        const FileExtent extent = netcdf_file_extent(prefix, have < wanted ? have : size);
        if (!extent.problem.empty()) {
            fail(path, extent.problem);
        }
        format = extent.format;
        if (extent.more_header_bytes == 0) {
            return extent.required_bytes;
        }
        if (extent.more_header_bytes <= prefix.size()) {
            return 0;  // no progress possible: do not loop
        }
        wanted = extent.more_header_bytes;
    }
}

}  // namespace

void fit_to_extent(const std::string& temporary, const std::string& path) {
    const auto failed = [&](const std::string& doing) {
        throw SystemError("cannot write '" + path + "': " + doing +
                          (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
    };
    errno = 0;
    const int fd = ::open(temporary.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        failed("reopening '" + temporary + "'");
    }
    OpenFile::Descriptor owned;
    owned.value = fd;
    const std::uint64_t size = file_size(fd, temporary);
    FileExtent::Format format = FileExtent::Format::unknown;
    std::uint64_t required = 0;
    try {
        required = required_bytes(fd, temporary, size, format);
    } catch (const NetcdfError&) {
        format = FileExtent::Format::unknown;  // a header cut short
    }
    errno = 0;
    if (format != FileExtent::Format::classic || required == 0) {
        // A writer that lost even its header (a disk full from the start) may still report success.
        failed("it has " + std::to_string(size) +
               " bytes and no complete netCDF header (a write was lost: a full disk?)");
    }
    if (size < required) {
        failed("it has " + std::to_string(size) + " of the " + std::to_string(required) +
               " bytes its header declares (a write was lost: a full disk?)");
    }
    if (size > required && ::ftruncate(fd, static_cast<off_t>(required)) != 0) {
        failed("cutting the zeros past its data");
    }
}

namespace {

// Our own descriptor, opened before netCDF opens the file, so that a file cut short is reported as such
// rather than as whatever netCDF or HDF5 make of it.
int open_checked(const std::string& path) {
    const int fd = ::open(regular_file(path).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(path, std::string("cannot open: ") + std::strerror(errno));
    }
    return fd;
}

}  // namespace

OpenFile::OpenFile(const std::string& file_path) : path(file_path), handle(opened_complete(file_path)) {
    find_grid_checked();
}

OpenFile::OpenFile(const std::string& file_path, const Communicator& comm, IoMode mode)
    : path(file_path), handle(opened_collectively(file_path, comm, mode)) {
    check_collectively(comm, attempt([&] { find_grid_checked(); }));
#if GRIDSHARD_PARALLEL_IO
    if (collective && format == FileExtent::Format::classic) {
        pnetcdf = PnetcdfFile(path, comm.native());
    }
#endif
}

NetcdfHandle OpenFile::opened_collectively(const std::string& file_path, const Communicator& comm, IoMode mode) {
    if (mode == IoMode::collective && !collective_io_available()) {
        throw ArgumentError("netCDF file '" + file_path + "': " + std::string(collective_io_unavailable_reason()));
    }
    const LocalFailure failure = attempt([&] { opened_complete(file_path); });
    gridshard::detail::agree_or_throw(
        comm, failure,
        {static_cast<std::int64_t>(format), failure.failed() ? 0 : static_cast<std::int64_t>(current_size())},
        "netCDF file '" + file_path + "' as each rank sees it (format, bytes)");
    const bool classic = format == FileExtent::Format::classic;
    collective = collective_io_available() && (mode == IoMode::collective || (mode == IoMode::automatic && !classic));
    // A classic file's metadata comes from netCDF-C on each rank, its data (read collectively) from PnetCDF.
    return collective && !classic ? NetcdfHandle(file_path, comm.native()) : NetcdfHandle(file_path);
}

void OpenFile::find_grid_checked() {
    // The checks watch our descriptor's file: it must be the one netCDF opened, not one renamed away since.
    struct stat ours {};
    struct stat now {};
    if (::fstat(descriptor.value, &ours) != 0 || ::stat(path.c_str(), &now) != 0 || ours.st_dev != now.st_dev ||
        ours.st_ino != now.st_ino) {
        fail(path, "was replaced while it was being opened");
    }
    grid = find_grid(handle);
    check_complete([] { return std::string("reading its coordinates"); });  // a cut meanwhile reads as zeros
}

const std::string& OpenFile::opened_complete(const std::string& file_path) {
    descriptor.value = open_checked(file_path);
    const int fd = descriptor.value;
    required_bytes = io::detail::required_bytes(fd, file_path, file_size(fd, file_path), format);
    check_complete([] { return std::string(); });
    return file_path;
}

std::uint64_t OpenFile::current_size() const {
    return file_size(descriptor.value, path);
}

void OpenFile::fail_truncated(std::uint64_t size, const std::string& context) const {
    fail(path, "is truncated: it has " + std::to_string(size) + " of the " + std::to_string(required_bytes) +
                   " bytes its header declares" + (context.empty() ? "" : " (" + context + ")"));
}

}  // namespace detail

// ------------------------------------------------------------------------------------------ NetcdfReader

NetcdfReader::NetcdfReader(const std::string& path) : file_(std::make_shared<detail::OpenFile>(path)) {}
NetcdfReader::NetcdfReader(const std::string& path, const Communicator& comm, IoMode mode)
    : file_(mode == IoMode::independent ? std::make_shared<detail::OpenFile>(path)
                                        : std::make_shared<detail::OpenFile>(path, comm, mode)) {}
NetcdfReader::~NetcdfReader() = default;
NetcdfReader::NetcdfReader(NetcdfReader&&) noexcept = default;
NetcdfReader& NetcdfReader::operator=(NetcdfReader&&) noexcept = default;

const std::string& NetcdfReader::path() const {
    return file_->path;
}
const GridInfo& NetcdfReader::grid() const {
    return file_->grid;
}

void NetcdfReader::check_complete(const std::string& context) const {
    file_->check_complete([&] { return context; });
}

std::vector<std::string> NetcdfReader::field_variables() const {
    const detail::NetcdfHandle& file = file_->handle;
    const std::vector<std::string> auxiliary = detail::auxiliary_variables(file);
    std::vector<std::string> names;
    const int nvars = file.nvars();
    for (int varid = 0; varid < nvars; ++varid) {
        VariableShape shape;
        // Coordinate variables are 1-D, so never fields; bounds and cell measures can look like fields.
        if (!detail::describe(file, file_->grid, varid, shape).empty() ||
            std::find(auxiliary.begin(), auxiliary.end(), shape.name) != auxiliary.end()) {
            continue;
        }
        names.push_back(variable(shape.name).name);  // refuses a field on curvilinear coordinates
    }
    return names;
}

VariableShape NetcdfReader::variable(const std::string& name) const {
    const detail::NetcdfHandle& file = file_->handle;
    int varid = -1;
    detail::check(nc_inq_varid(file.ncid(), name.c_str(), &varid), file.path(), "no variable '" + name + "'");
    VariableShape shape;
    if (const std::string problem = detail::describe(file, file_->grid, varid, shape); !problem.empty()) {
        detail::fail(file.path(), "variable '" + name + "' " + problem);
    }
    if (const std::string coordinate = detail::curvilinear_coordinate(file, varid); !coordinate.empty()) {
        detail::fail(file.path(), "variable '" + name + "' lies on the 2-D coordinate " + coordinate +
                                      ": a curvilinear grid, which is not supported");
    }
    shape.value_type = detail::CfDecoding(file, varid).value_type();
    return shape;
}

std::optional<WholeVariable> NetcdfReader::whole_variable(const std::string& name) const {
    const detail::NetcdfHandle& file = file_->handle;
    const std::optional<int> varid = file.find_var(name);
    if (!varid) {
        return std::nullopt;
    }
    if (!detail::is_numeric(file.var_type(*varid))) {
        detail::fail(file.path(), "variable '" + name + "' is not numeric");
    }
    WholeVariable whole{name,
                        {},
                        {},
                        file.text_attribute(*varid, "units").value_or(""),
                        file.text_attribute(*varid, "calendar").value_or("")};
    std::size_t count = 1;
    for (const int dimid : file.var_dims(*varid)) {
        whole.dims.push_back(file.dim_name(dimid));
        count *= static_cast<std::size_t>(file.dim_length(dimid));
    }
    whole.values = file.read_all(*varid, count);
    file_->check_complete([&] { return "reading variable '" + name + "'"; });
    return whole;
}

// ---------------------------------------------------------------------------------------- VariableReader

struct VariableReader::Plan {
    int varid = -1;
    detail::CfDecoding decoding;
    std::vector<std::size_t> start;
    std::vector<std::size_t> count;
    std::vector<std::size_t> indexed;  // the positions of the dims each read picks one index of
    std::vector<double> staging;       // stored values that a float buffer cannot hold exactly
    std::vector<std::size_t> nothing;  // zeros: the start and count of a collective read of nothing
    int pnetcdf_varid = -1;            // a classic file read collectively: the variable's PnetCDF id
};

VariableReader NetcdfReader::reader(const std::string& name, const Box& box) const {
    const VariableShape shape = variable(name);
    std::vector<std::string> indexed;
    if (shape.time_index) {
        indexed.push_back(shape.dim_names[static_cast<std::size_t>(*shape.time_index)]);
    }
    return reader(name, box, indexed);
}

VariableReader NetcdfReader::reader(const std::string& name, const Box& box,
                                    const std::vector<std::string>& indexed_dims) const {
    const VariableShape shape = variable(name);
    const auto fits = [](const Range& r, std::int64_t n) { return r.begin >= 0 && r.begin <= r.end && r.end <= n; };
    if (!fits(box.lat, shape.nlat) || !fits(box.lon, shape.nlon)) {
        throw ArgumentError("netCDF file '" + path() + "': box lat [" + std::to_string(box.lat.begin) + ", " +
                            std::to_string(box.lat.end) + ") lon [" + std::to_string(box.lon.begin) + ", " +
                            std::to_string(box.lon.end) + ") of variable '" + name + "' is outside its " +
                            std::to_string(shape.nlat) + " x " + std::to_string(shape.nlon) + " grid");
    }
    const detail::NetcdfHandle& file = file_->handle;
    const int varid = *file.find_var(name);
    auto plan = std::make_unique<VariableReader::Plan>(
        VariableReader::Plan{varid, detail::CfDecoding(file, varid), {}, {}, {}, {}, {}, -1});
    const std::size_t ndims = shape.dim_sizes.size();
    plan->nothing.assign(ndims, 0);
#if GRIDSHARD_PARALLEL_IO
    if (file_->collective && file_->pnetcdf.is_open()) {
        plan->pnetcdf_varid = file_->pnetcdf.varid(name);
    } else if (file_->collective) {
        detail::check(nc_var_par_access(file.ncid(), varid, NC_COLLECTIVE), path(),
                      "making the reads of variable '" + name + "' collective");
    }
#endif
    plan->start.assign(ndims, 0);
    plan->count.resize(ndims);
    for (std::size_t k = 0; k < ndims; ++k) {
        plan->count[k] = static_cast<std::size_t>(shape.dim_sizes[k]);
    }
    plan->start[ndims - 2] = static_cast<std::size_t>(box.lat.begin);
    plan->count[ndims - 2] = static_cast<std::size_t>(box.lat.size());
    plan->start[ndims - 1] = static_cast<std::size_t>(box.lon.begin);
    plan->count[ndims - 1] = static_cast<std::size_t>(box.lon.size());
    std::size_t channels = 1;
    for (const std::string& dim : indexed_dims) {
        const auto at = std::find(shape.dim_names.begin(), shape.dim_names.end() - 2, dim);
        if (at == shape.dim_names.end() - 2 ||
            std::find(plan->indexed.begin(), plan->indexed.end(),
                      static_cast<std::size_t>(at - shape.dim_names.begin())) != plan->indexed.end()) {
            detail::fail(path(), "variable '" + name + "' has no dim '" + dim + "' before its grid dims" +
                                     " (or it is named twice)");
        }
        plan->indexed.push_back(static_cast<std::size_t>(at - shape.dim_names.begin()));
        plan->count[plan->indexed.back()] = 1;
    }
    for (std::size_t k = 0; k + 2 < ndims; ++k) {
        channels *= plan->count[k];
    }
    const std::size_t values = channels * static_cast<std::size_t>(box.area());
    return VariableReader(file_, std::move(plan), shape, values);
}

template <class T>
std::vector<T> NetcdfReader::read(const std::string& name, const Range& steps, const Box& box) const {
    VariableReader plan = reader(name, box);
    const VariableShape& shape = plan.shape();
    if (!(steps.begin >= 0 && steps.begin <= steps.end && steps.end <= shape.ntime)) {
        throw ArgumentError("netCDF file '" + path() + "': steps [" + std::to_string(steps.begin) + ", " +
                            std::to_string(steps.end) + ") of variable '" + name + "' are outside [0, " +
                            std::to_string(shape.ntime) + ")" + (shape.time_index ? "" : " (it has no time dim)"));
    }
    const std::size_t step_size = plan.values_per_step();
    std::vector<T> out =
        allocate_vector<T>(static_cast<std::size_t>(steps.size()) * step_size, "variable '" + name + "'");
    for (std::int64_t t = 0; t < steps.size(); ++t) {
        plan.read_step(steps.begin + t, std::span<T>(out).subspan(static_cast<std::size_t>(t) * step_size, step_size));
    }
    return out;
}

template std::vector<float> NetcdfReader::read<float>(const std::string&, const Range&, const Box&) const;
template std::vector<double> NetcdfReader::read<double>(const std::string&, const Range&, const Box&) const;

VariableReader::VariableReader(std::shared_ptr<detail::OpenFile> file, std::unique_ptr<Plan> plan, VariableShape shape,
                               std::size_t values_per_step)
    : file_(std::move(file)), plan_(std::move(plan)), shape_(std::move(shape)), values_per_step_(values_per_step) {}
VariableReader::~VariableReader() = default;
VariableReader::VariableReader(VariableReader&&) noexcept = default;
VariableReader& VariableReader::operator=(VariableReader&&) noexcept = default;

void VariableReader::read_step(std::int64_t step, std::span<float> out) {
    read_into(std::span<const std::int64_t>(&step, plan_->indexed.empty() ? 0 : 1), true, step, {}, out);
}
void VariableReader::read_step(std::int64_t step, std::span<double> out) {
    read_into(std::span<const std::int64_t>(&step, plan_->indexed.empty() ? 0 : 1), true, step, {}, out);
}
void VariableReader::read_at(std::span<const std::int64_t> position, std::span<float> out) {
    read_into(position, false, 0, {}, out);
}
void VariableReader::read_at(std::span<const std::int64_t> position, std::span<double> out) {
    read_into(position, false, 0, {}, out);
}
void VariableReader::read_run(std::span<const std::int64_t> position, Run run, std::span<float> out) {
    read_into(position, false, 0, run, out);
}
void VariableReader::read_run(std::span<const std::int64_t> position, Run run, std::span<double> out) {
    read_into(position, false, 0, run, out);
}

bool VariableReader::can_read_run(std::size_t dim) const noexcept {
    if (dim >= plan_->indexed.size()) {
        return false;
    }
    // Every dim before it in the file must be indexed (read one index at a time), so that the run is the
    // slowest dim of the values read.
    for (std::size_t k = 0; k < plan_->indexed[dim]; ++k) {
        if (std::find(plan_->indexed.begin(), plan_->indexed.end(), k) == plan_->indexed.end()) {
            return false;
        }
    }
    return true;
}

void VariableReader::read_none() {
    if (file_->collective) {
        read_into(std::span<const std::int64_t>(), false, 0, {}, std::span<float>(), true);
    }
}

bool VariableReader::collective() const noexcept {
    return file_->collective;
}

namespace {

int get(int ncid, int varid, const std::size_t* start, const std::size_t* count, float* out) {
    return nc_get_vara_float(ncid, varid, start, count, out);
}
int get(int ncid, int varid, const std::size_t* start, const std::size_t* count, double* out) {
    return nc_get_vara_double(ncid, varid, start, count, out);
}

}  // namespace

template <class T>
std::size_t VariableReader::prepare(std::span<const std::int64_t> position, bool by_step, std::int64_t step, Run run,
                                    std::size_t buffer_size) {
    const std::string& path = file_->path;
    if (by_step) {
        // read_step: the one indexed dim is time (none for a variable without one)
        if (step < 0 || step >= shape_.ntime) {
            throw ArgumentError("netCDF file '" + path + "': step " + std::to_string(step) + " of variable '" +
                                shape_.name + "' is outside [0, " + std::to_string(shape_.ntime) + ")" +
                                (shape_.time_index ? "" : " (it has no time dim)"));
        }
    }
    if (position.size() != plan_->indexed.size()) {
        throw ArgumentError("netCDF file '" + path + "': " + std::to_string(position.size()) +
                            " indices for variable '" + shape_.name + "', whose plan indexes " +
                            std::to_string(plan_->indexed.size()) + " dims");
    }
    for (std::size_t k = 0; k < position.size(); ++k) {
        const std::size_t dim = plan_->indexed[k];
        if (position[k] < 0 || position[k] >= shape_.dim_sizes[dim]) {
            throw ArgumentError("netCDF file '" + path + "': index " + std::to_string(position[k]) + " of dim '" +
                                shape_.dim_names[dim] + "' of variable '" + shape_.name + "' is outside [0, " +
                                std::to_string(shape_.dim_sizes[dim]) + ")");
        }
        plan_->start[dim] = static_cast<std::size_t>(position[k]);
    }
    if (run.length != 1) {
        if (!can_read_run(run.dim) || run.length < 0 ||
            position[run.dim] + run.length > shape_.dim_sizes[plan_->indexed[run.dim]]) {
            throw ArgumentError("netCDF file '" + path + "': a run of " + std::to_string(run.length) +
                                " indices on indexed dim " + std::to_string(run.dim) + " of variable '" + shape_.name +
                                "' that is out of range or not its slowest dim read");
        }
    }
    const std::size_t values = values_per_step_ * static_cast<std::size_t>(std::max<std::int64_t>(run.length, 0));
    if (buffer_size != values) {
        throw ArgumentError("netCDF file '" + path + "': a buffer of " + std::to_string(buffer_size) + " values for " +
                            std::to_string(run.length) + " step(s) of variable '" + shape_.name + "', which has " +
                            std::to_string(values_per_step_) + " per step");
    }
    return values;
}

template <class T>
int VariableReader::transfer(bool nothing, T* out) {
    const std::size_t* start = nothing ? plan_->nothing.data() : plan_->start.data();
    const std::size_t* count = nothing ? plan_->nothing.data() : plan_->count.data();
#if GRIDSHARD_PARALLEL_IO
    if (plan_->pnetcdf_varid >= 0) {
        return file_->pnetcdf.get_all(plan_->pnetcdf_varid, start, count, static_cast<int>(plan_->start.size()), out);
    }
#endif
    return get(file_->handle.ncid(), plan_->varid, start, count, out);
}

template <class T>
void VariableReader::read_into(std::span<const std::int64_t> position, bool by_step, std::int64_t step, Run run,
                               std::span<T> out, bool nothing_asked) {
    const std::string& path = file_->path;
    const auto context = [&] {
        std::string where;
        for (std::size_t k = 0; k < position.size(); ++k) {
            where += (k > 0 ? ", " : "") + shape_.dim_names[plan_->indexed[k]] + " " + std::to_string(position[k]);
        }
        return "reading variable '" + shape_.name + "' at " + (by_step ? "step " + std::to_string(step) : where);
    };
    // A collective read takes every rank into the transfer, whatever went wrong on it: a rank that cannot
    // read transfers nothing and throws after, and the caller agrees on it before the next collective.
    std::exception_ptr deferred;
    std::size_t values = 0;
    const bool direct = plan_->decoding.stored_values_fit<T>();
    std::vector<double>& staging = plan_->staging;
    try {
        values = nothing_asked ? 0 : prepare<T>(position, by_step, step, run, out.size());
        if (values > 0) {
            file_->check_complete(context);
        }
        if (!direct && values > 0 && staging.size() != values) {
            staging = allocate_vector<double>(values, "the staging buffer of variable '" + shape_.name + "'");
        }
    } catch (...) {
        if (!file_->collective) {
            throw;
        }
        deferred = std::current_exception();
        values = 0;
    }
    if (values == 0 && !file_->collective) {
        return;
    }
    // The run reads several indices of one dim in one call (one pass over each HDF5 chunk they share).
    struct RestoreCount {
        std::size_t* count;
        ~RestoreCount() {
            if (count != nullptr) {
                *count = 1;
            }
        }
    } restore{values > 0 && run.length != 1 ? &plan_->count[plan_->indexed[run.dim]] : nullptr};
    if (restore.count != nullptr) {
        *restore.count = static_cast<std::size_t>(run.length);
    }
    const bool nothing = values == 0;
    T unused_value{};
    double unused_staging = 0.0;
    const int status = direct ? transfer<T>(nothing, nothing ? &unused_value : out.data())
                              : transfer<double>(nothing, nothing ? &unused_staging : staging.data());
    if (deferred) {
        std::rethrow_exception(deferred);
    }
    if (status != NC_NOERR) {
        const std::string doing =
            nothing ? "reading nothing of variable '" + shape_.name + "' collectively" : context();
#if GRIDSHARD_PARALLEL_IO
        if (plan_->pnetcdf_varid >= 0) {
            throw_netcdf_failure(status,
                                 "netCDF file '" + path + "': " + doing + ": " + detail::pnetcdf_message(status));
        }
#endif
        detail::fail(path, doing, status);
    }
    if (nothing) {
        return;
    }
    if (direct) {
        plan_->decoding.apply(out);
    } else {
        plan_->decoding.apply(std::span<double>(staging));
        std::transform(staging.begin(), staging.end(), out.begin(), [](double v) { return static_cast<T>(v); });
    }
    // After the read too: netCDF and HDF5 return zeros for bytes past the end of a file cut meanwhile.
    file_->check_complete(context);
}

}  // namespace gridshard::io
