#pragma once
/// @file
/// Collective parallel I/O (docs/io.md): the ranks of a communicator open a netCDF file together and move
/// their hyperslabs in collective MPI-IO calls, as parallel file systems want, instead of each rank opening
/// the file on its own.
///
/// - Reading: `NetcdfReader(path, comm)` (netcdf_reader.hpp). netCDF-4/HDF5 files go through parallel netCDF
///   (nc_open_par, every field variable NC_COLLECTIVE), the classic formats through PnetCDF
///   (ncmpi_get_vara_*_all), whose metadata still comes from netCDF-C: the same CF rules in both modes.
/// - Writing: write_dataset_collectively() through PnetCDF, with netCDF-C's alignment, so the file is the
///   same bytes as write_dataset() writes on one rank; write_outputs_atomically(jobs, comm) makes several
///   outputs appear together or not at all.
///
/// Who communicates: everything here is collective over the communicator it is given, and every rank must
/// make the same calls in the same order (a rank with nothing to read calls VariableReader::read_none()).
/// Failures are agreed before they are raised, so every rank raises the same error and none is left
/// waiting. A build without the parallel libraries has all of this, and says so: collective_io_available()
/// is false and the calls throw ArgumentError.

#include <functional>
#include <string>
#include <vector>

#include "gridshard/comm/communicator.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/io_mode.hpp"
#include "gridshard/io/output_file.hpp"

namespace gridshard::io {

/// Writes `dataset` into `temporary_path` (an AtomicOutput's temporary on rank 0, its path broadcast) as
/// netCDF 64-bit offset, collectively over `comm`: the same header and the same bytes as write_dataset(). Each
/// variable with a part (DatasetVariable::start and count) is written by every rank from its own values; a
/// variable without one, and every coordinate, by rank 0 from its values (the other ranks' are not read).
/// `path` names the output in messages. Throws on every rank: ArgumentError for a part or size that does
/// not fit, SystemError when the file system fails.
void write_dataset_collectively(const std::string& temporary_path, const std::string& path, const Dataset& dataset,
                                const Communicator& comm);

/// One output of write_outputs_atomically(jobs, comm): filled by rank 0 alone (`fill`), or by every rank
/// together from the temporary's path (`fill_collectively`, e.g. write_dataset_collectively).
struct CollectiveOutputJob {
    std::string path;
    std::function<void(AtomicOutput&)> fill{};
    std::function<void(const std::string& temporary_path)> fill_collectively{};
};

/// write_outputs_atomically over `comm`: rank 0 creates every temporary, the jobs fill them in order, rank 0
/// flushes them all to disk and only then renames them, so a failure anywhere leaves every target as it
/// was. Collective over `comm`; the failures of any rank are raised on every rank.
void write_outputs_atomically(const std::vector<CollectiveOutputJob>& jobs, const Communicator& comm);

}  // namespace gridshard::io
