#pragma once
// The PnetCDF side of collective I/O (parallel_io.hpp), kept to one translation unit because pnetcdf.h and
// netcdf.h define the same names: a classic-format file opened collectively for reading, and a dataset
// sink that writes one collectively. Internal to the io layer; built only with GRIDSHARD_PARALLEL_IO.
// Every call is collective over the communicator the file was opened with.

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

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

/// A sink that writes a new 64-bit offset file over `comm` (ncmpi_create with netCDF-C's alignment and fill
/// mode, so the bytes are those netCDF-C writes). It never throws: every collective step is followed by one
/// allreduce of the ranks' failures, after which, if any rank failed, every rank stops calling PnetCDF and
/// the destructor aborts the file; failure() holds this rank's first failure after close().
class PnetcdfSink final : public DatasetSink {
  public:
    PnetcdfSink(const std::string& temporary_path, const std::string& path, MPI_Comm comm);
    ~PnetcdfSink() override;
    PnetcdfSink(const PnetcdfSink&) = delete;
    PnetcdfSink& operator=(const PnetcdfSink&) = delete;

    int def_dim(const std::string& name, std::int64_t size) override;
    int def_var(const std::string& name, const std::vector<int>& dims) override;
    void put_text(int varid, const std::string& name, const std::string& value) override;
    void put_double(int varid, const std::string& name, double value) override;
    void end_definitions() override;
    void put(int varid, const std::string& name, std::span<const std::int64_t> start,
             std::span<const std::int64_t> count, const double* values) override;
    /// Closes the file, which syncs it to disk (collective).
    void close();
    /// The first failure ("cannot write 'PATH': DOING: MESSAGE"), empty when none; `system` when it was the
    /// file system's (a full disk) rather than the dataset's (a name PnetCDF refuses).
    [[nodiscard]] const std::string& failure() const noexcept { return failure_; }
    [[nodiscard]] bool system_failure() const noexcept { return system_; }

  private:
    void note(int status, const std::string& doing);
    // Collective: whether no rank has failed so far (one allreduce); false from the first failure on.
    bool carry_on();

    std::string path_;
    MPI_Comm comm_;
    bool stopped_ = false;
    int ncid_ = -1;
    std::string failure_;
    bool system_ = false;
};

}  // namespace gridshard::io::detail
