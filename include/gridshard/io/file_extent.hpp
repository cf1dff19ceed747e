#pragma once
/// @file
/// The bytes a netCDF file must hold, computed from its header, so that a file cut short is refused
/// instead of read as zeros (the netCDF and HDF5 libraries return zeros past the end of a file).
/// Pure: it parses bytes it is given, does no I/O and makes no MPI calls.
///
/// - Classic formats (CDF-1, CDF-2 "64-bit offset", CDF-5 "64-bit data"): the header lists every
///   variable's dims, type and start offset, and the number of records, so the end of the last byte of
///   data is known: `begin + size` for fixed-size variables, `begin + (numrecs - 1) * recsize + size`
///   for record variables (recsize: the per-record sizes padded to 4 bytes, unpadded when there is only
///   one record variable, as netCDF lays them out).
/// - netCDF-4 (HDF5): the superblock's end-of-file address (an absolute offset, user block included).

#include <cstdint>
#include <span>
#include <string>

namespace gridshard::io {

struct FileExtent {
    enum class Format { classic, hdf5, unknown };
    Format format = Format::unknown;
    /// The smallest size a complete file of this header has (0 when unknown).
    std::uint64_t required_bytes = 0;
    /// When not 0: the header goes on past the bytes given; call again with the first this many bytes.
    std::uint64_t more_header_bytes = 0;
    /// When not empty: the header is malformed or runs past the end of the file (a one-line reason).
    std::string problem;
};

/// Reads the header in `prefix`, the first bytes of a file of `file_size` bytes. Never reads past
/// `prefix`; returns `more_header_bytes` when it needs more of the file, a `problem` for a malformed or
/// cut header, and Format::unknown for anything that is neither classic netCDF nor HDF5.
[[nodiscard]] FileExtent netcdf_file_extent(std::span<const unsigned char> prefix, std::uint64_t file_size);

}  // namespace gridshard::io
