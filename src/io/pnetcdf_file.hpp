#pragma once
// The PnetCDF side of collective I/O (parallel_io.hpp), kept to one translation unit because pnetcdf.h and
// netcdf.h define the same names: a classic-format file opened collectively for reading, and a dataset
// sink that writes one collectively. Internal to the io layer; built only with GRIDSHARD_PARALLEL_IO.
// Every call is collective over the communicator the file was opened with.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset_sink.hpp"

namespace gridshard::io::detail {

/// A classic-format netCDF file opened read-only over `comm` (ncmpi_open, collective data mode), closed
/// collectively by the destructor. Move-only.
class PnetcdfFile {
  public:
    PnetcdfFile() = default;
    /// Collective over `comm`. Throws NetcdfError with PnetCDF's message when it cannot open the file.
    PnetcdfFile(const std::string& path, MPI_Comm comm);
    ~PnetcdfFile();
    PnetcdfFile(PnetcdfFile&& other) noexcept;
    PnetcdfFile& operator=(PnetcdfFile&& other) noexcept;
    PnetcdfFile(const PnetcdfFile&) = delete;
    PnetcdfFile& operator=(const PnetcdfFile&) = delete;

    [[nodiscard]] bool is_open() const noexcept { return ncid_ >= 0; }
    /// The id of variable `name`; throws NetcdfError when PnetCDF does not see it. No MPI calls.
    [[nodiscard]] int varid(const std::string& name) const;
    /// ncmpi_get_vara_{float,double}_all: collective; returns PnetCDF's status (0 on success).
    int get_all(int varid, const std::size_t* start, const std::size_t* count, int ndims, float* out) const;
    int get_all(int varid, const std::size_t* start, const std::size_t* count, int ndims, double* out) const;

  private:
    std::string path_;
    int ncid_ = -1;
};

/// PnetCDF's message for `status`.
[[nodiscard]] std::string pnetcdf_message(int status);

/// What the PnetCDF sinks share: a file of `comm`, and its first failure kept rather than thrown, because
/// every rank must make every collective call. carry_on() agrees after each collective step: once any rank
/// failed, every rank stops calling PnetCDF.
class PnetcdfCollective {
  public:
    PnetcdfCollective(const std::string& path, MPI_Comm comm) : path_(path), comm_(comm) {}
    /// The first failure ("cannot write 'PATH': DOING: MESSAGE"), empty when none; `system` when it was the
    /// file system's (a full disk, a lost write) rather than the dataset's (a name PnetCDF refuses).
    [[nodiscard]] const std::string& failure() const noexcept { return failure_; }
    [[nodiscard]] bool system_failure() const noexcept { return system_; }

  protected:
    void note(int status, const std::string& doing);
    void fail(const std::string& what, bool system);
    // Collective: whether no rank has failed so far (one allreduce); false from the first failure on.
    bool carry_on();

    std::string path_;
    MPI_Comm comm_;
    bool stopped_ = false;
    int ncid_ = -1;

  private:
    std::string failure_;
    bool system_ = false;
};

/// A sink that writes a new 64-bit offset file over `comm` (ncmpi_create with netCDF-C's alignment and fill
/// mode, so the bytes are those netCDF-C writes). Rank 0 first reserves `file_bytes` on disk (posix_fallocate),
/// so that a full disk is met before MPI-IO writes anything. It never throws: every collective step is
/// followed by carry_on(), and if any rank failed the destructor aborts the file; failure() holds this
/// rank's first failure after close().
class PnetcdfSink final : public DatasetSink, public PnetcdfCollective {
  public:
    PnetcdfSink(const std::string& temporary_path, const std::string& path, MPI_Comm comm, std::uint64_t file_bytes);
    ~PnetcdfSink() override;
    PnetcdfSink(const PnetcdfSink&) = delete;
    PnetcdfSink& operator=(const PnetcdfSink&) = delete;

    int def_dim(const std::string& name, std::int64_t size, bool unlimited) override;
    int def_var(const std::string& name, const std::vector<int>& dims) override;
    int def_char_var(const std::string& name, const std::vector<int>& dims) override;
    void put_text(int varid, const std::string& name, const std::string& value) override;
    void put_double(int varid, const std::string& name, double value) override;
    void end_definitions() override;
    void put(int varid, const std::string& name, std::span<const std::int64_t> start,
             std::span<const std::int64_t> count, const double* values) override;
    void put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                   const char* values) override;
    /// Closes the file, which syncs it to disk (collective).
    void close();

  private:
    void reserve(const std::string& temporary_path, std::uint64_t bytes);
};

/// Reads back, collectively over `comm`, the file a PnetcdfSink wrote, driven by the same
/// write_dataset_through() calls: each put becomes a read of the same part, compared bit for bit with the
/// values given. A write lost without an error (a short write, which MPI-IO may count as done) is a
/// failure (system). Never throws; the file is closed by close() or the destructor.
class PnetcdfReadBack final : public DatasetSink, public PnetcdfCollective {
  public:
    PnetcdfReadBack(const std::string& temporary_path, const std::string& path, MPI_Comm comm);
    ~PnetcdfReadBack() override;
    PnetcdfReadBack(const PnetcdfReadBack&) = delete;
    PnetcdfReadBack& operator=(const PnetcdfReadBack&) = delete;

    int def_dim(const std::string& name, std::int64_t size, bool unlimited) override;
    int def_var(const std::string& name, const std::vector<int>& dims) override;
    int def_char_var(const std::string& name, const std::vector<int>& dims) override;
    void put_text(int varid, const std::string& name, const std::string& value) override;
    void put_double(int varid, const std::string& name, double value) override;
    void end_definitions() override;
    void put(int varid, const std::string& name, std::span<const std::int64_t> start,
             std::span<const std::int64_t> count, const double* values) override;
    void put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                   const char* values) override;
    /// Closes the file (collective).
    void close();

  private:
    std::vector<double> read_;
};

}  // namespace gridshard::io::detail
