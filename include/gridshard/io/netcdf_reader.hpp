#pragma once
/// @file
/// Reading CF-convention netCDF input: the grid of a file, and hyperslabs of its fields through read
/// plans that are resolved once and fill a caller's buffer each step. Opened with a path alone, no MPI
/// calls: under MPI every rank opens the file itself and reads only its own box. Opened with a
/// communicator, the ranks open it together and every read is collective (parallel_io.hpp).
///
/// @code
///   void read_t2m(const gridshard::Box& box) {                    // box: this rank's box
///       gridshard::io::NetcdfReader truth("truth.nc");            // checks the file holds all its data
///       const gridshard::io::GridInfo& grid = truth.grid();        // lat, lon (file order), time, bounds
///       gridshard::io::VariableReader t2m = truth.reader("t2m", box);   // resolved once
///       std::vector<double> step(t2m.values_per_step());
///       t2m.read_step(3, std::span<double>(step));                 // (channels, rows, cols), NaN where missing
///   }
/// @endcode
///
/// Not thread-safe: the netCDF C library is not. Indices are always in file order; nothing is reordered
/// (latitude may run either way, longitude may start anywhere).
///
/// What is refused (NetcdfError, an ArgumentError): a path that is not a regular file (checked before
/// opening, so a FIFO never blocks); a file that is not netCDF; a file shorter than its header says
/// (classic formats: the data of every variable; netCDF-4: HDF5's end-of-file address), at open and before
/// and after every read, so a file cut short or truncated during a run is an error, never zeros; no
/// latitude or longitude coordinate; a curvilinear grid (2-D latitude or longitude); a variable that is not
/// numeric or whose dims do not end in (lat, lon); contradicting CF attributes.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/io/grid_info.hpp"
#include "gridshard/io/io_mode.hpp"
#include "gridshard/io/netcdf_error.hpp"

namespace gridshard {
class Communicator;
}

namespace gridshard::io {

namespace detail {
struct OpenFile;
}

/// A small numeric variable read whole (a coordinate such as ACE's `init_time(sample)`), as double.
struct WholeVariable {
    std::string name;
    std::vector<std::string> dims;
    std::vector<double> values;  ///< row-major over dims
    std::string units;           ///< empty when absent
    std::string calendar;        ///< empty when absent
};

class VariableReader;

/// An open netCDF file: its grid, its field variables, and read plans for them. Move-only; the plans it
/// makes share the open file, so they stay valid when the reader is gone. No MPI calls when opened with a path
/// alone; opened with a communicator, its opening, its closing and every read of its plans are collective over it.
class NetcdfReader {
  public:
    /// Opens `path` (which must be a regular file), checks that it holds every byte its header declares,
    /// and finds its grid (see the rules of find_grid in the io layer's docs: standard_name, units, axis,
    /// then name). Throws NetcdfError.
    explicit NetcdfReader(const std::string& path);
    /// Opens `path` collectively over `comm` (collective I/O, parallel_io.hpp): every rank checks the file
    /// as above and all agree before it is opened, so every rank raises the same error. Every read of the
    /// plans it makes is then collective over `comm`: the ranks make the same reads, of the same variables,
    /// in the same order (VariableReader::read_none for a rank with nothing to read), and the caller agrees
    /// on a read's failure before the next collective. IoMode::automatic reads netCDF-4 files collectively
    /// and classic ones independently (and every file independently in a build without collective I/O);
    /// IoMode::independent is NetcdfReader(path). Throws ArgumentError for IoMode::collective in a build
    /// without collective I/O.
    NetcdfReader(const std::string& path, const Communicator& comm, IoMode mode = IoMode::collective);
    ~NetcdfReader();
    NetcdfReader(NetcdfReader&&) noexcept;
    NetcdfReader& operator=(NetcdfReader&&) noexcept;
    NetcdfReader(const NetcdfReader&) = delete;
    NetcdfReader& operator=(const NetcdfReader&) = delete;

    [[nodiscard]] const std::string& path() const;
    [[nodiscard]] const GridInfo& grid() const;

    /// The numeric variables, other than coordinates, bounds and cell measures, that variable() accepts
    /// (last two dims lat and lon, time first if present), in file order. Throws NetcdfError for a field
    /// on 2-D (curvilinear) coordinates.
    [[nodiscard]] std::vector<std::string> field_variables() const;

    /// The layout, units and value type of variable `name`. Throws NetcdfError when it is missing, not
    /// numeric, its last two dims are not (lat, lon), it has the time dim anywhere but first, or it lies on
    /// 2-D (curvilinear) coordinates.
    [[nodiscard]] VariableShape variable(const std::string& name) const;

    /// A read plan for `box` (latitude rows and longitude columns, file index order) of variable `name`,
    /// resolved once: dims, types and decoding. Throws as variable() does, and ArgumentError when the box
    /// does not fit the grid.
    [[nodiscard]] VariableReader reader(const std::string& name, const Box& box) const;

    /// A read plan for `box` of variable `name` that picks one index of each of `indexed_dims` per read
    /// (read_at), and reads every other dim whole as channels, in file order. reader(name, box) is this with
    /// the time dim. Throws as reader() does, and NetcdfError for a dim the variable lacks before its grid
    /// dims, or one named twice.
    [[nodiscard]] VariableReader reader(const std::string& name, const Box& box,
                                        const std::vector<std::string>& indexed_dims) const;

    /// Numeric variable `name` read whole, or nothing when the file has no such variable. Throws NetcdfError
    /// when it is not numeric, or cannot be read. Meant for coordinates: the values are held in memory.
    [[nodiscard]] std::optional<WholeVariable> whole_variable(const std::string& name) const;

    /// Convenience: steps [steps.begin, steps.end) of `box`, (steps, channels, rows, cols), through a plan.
    template <class T>
    [[nodiscard]] std::vector<T> read(const std::string& name, const Range& steps, const Box& box) const;

    /// Throws NetcdfError when the file is now shorter than its header needs (it shrank since it was
    /// opened); `context` ("reading variable 't2m' at step 3") goes into the message.
    void check_complete(const std::string& context) const;

  private:
    std::shared_ptr<detail::OpenFile> file_;
};

/// A plan to read one variable's box step by step: everything about the variable is resolved when the
/// plan is made, and each read fills the caller's buffer with no allocation (a variable whose stored
/// integers do not fit the buffer's type goes through one staging buffer that the plan owns). One plan
/// serves one thread. No MPI calls, unless the file was opened collectively: then every read is collective
/// over its communicator, and a rank that fails takes part in the transfer with nothing before it throws.
class VariableReader {
  public:
    [[nodiscard]] const VariableShape& shape() const noexcept { return shape_; }
    /// The type values come out in without rounding (see ValueType).
    [[nodiscard]] ValueType value_type() const noexcept { return shape_.value_type; }
    /// The values of one read: the dims not indexed (channels) x box rows x box cols.
    [[nodiscard]] std::size_t values_per_step() const noexcept { return values_per_step_; }

    /// Reads step `step` (0 for a variable without a time dim) into `out` (values_per_step() values,
    /// (channels, rows, cols)), decoded (see the CF decoding rules), NaN where missing or invalid. A
    /// float `out` for a double variable rounds; a double `out` is exact for every variable. Throws
    /// ArgumentError for a step out of range or a buffer of the wrong size, NetcdfError when netCDF fails
    /// or the file is shorter than it must be, before or after the read.
    void read_step(std::int64_t step, std::span<float> out);
    void read_step(std::int64_t step, std::span<double> out);

    /// Reads the values at index `position[k]` of the plan's k-th indexed dim (see NetcdfReader::reader)
    /// into `out`, as read_step does. Throws ArgumentError for a wrong number of indices or one out of range.
    void read_at(std::span<const std::int64_t> position, std::span<float> out);
    void read_at(std::span<const std::int64_t> position, std::span<double> out);

    /// `length` consecutive indices of the plan's indexed dim number `dim`, from position[dim] on.
    struct Run {
        std::size_t dim = 0;
        std::int64_t length = 1;
    };
    /// Whether a run can be read along indexed dim `dim`: every dim before it in the file is indexed, so the
    /// run is the slowest dim of what is read.
    [[nodiscard]] bool can_read_run(std::size_t dim) const noexcept;
    /// read_at for a run of indices in one netCDF call (one pass over each HDF5 chunk they share, where
    /// separate reads would decompress or fetch a chunk once per index): `out` holds run.length x
    /// values_per_step() values, the run slowest. Throws ArgumentError for a run out of range or one that
    /// can_read_run refuses.
    void read_run(std::span<const std::int64_t> position, Run run, std::span<float> out);
    void read_run(std::span<const std::int64_t> position, Run run, std::span<double> out);

    /// A collective read of nothing, for a rank whose share holds nothing this time while the others read
    /// (a file opened collectively); nothing at all for a file opened independently.
    void read_none();
    /// Whether reads are collective (the file was opened with a communicator). No MPI calls.
    [[nodiscard]] bool collective() const noexcept;

    ~VariableReader();
    VariableReader(VariableReader&&) noexcept;
    VariableReader& operator=(VariableReader&&) noexcept;

  private:
    friend class NetcdfReader;
    struct Plan;
    VariableReader(std::shared_ptr<detail::OpenFile> file, std::unique_ptr<Plan> plan, VariableShape shape,
                   std::size_t values_per_step);
    // `nothing`: read_none's collective read of nothing.
    template <class T>
    void read_into(std::span<const std::int64_t> position, bool by_step, std::int64_t step, Run run, std::span<T> out,
                   bool nothing = false);
    // Checks a read's arguments and sets the plan's start; returns the values it reads.
    template <class T>
    std::size_t prepare(std::span<const std::int64_t> position, bool by_step, std::int64_t step, Run run,
                        std::size_t buffer_size);
    // One netCDF or PnetCDF call: the plan's hyperslab, or nothing (collective reads); returns its status.
    template <class T>
    int transfer(bool nothing, T* out);

    std::shared_ptr<detail::OpenFile> file_;
    std::unique_ptr<Plan> plan_;
    VariableShape shape_;
    std::size_t values_per_step_ = 0;
};

}  // namespace gridshard::io
