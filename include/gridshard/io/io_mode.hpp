#pragma once
/// @file
/// How the ranks reach their hyperslabs of a netCDF file (parallel_io.hpp), and whether this build can do it
/// collectively. No MPI calls.

#include <string_view>

namespace gridshard::io {

/// Each rank opening the file itself, all together in collective MPI-IO, or (automatic) collectively for
/// netCDF-4/HDF5 files and independently for classic ones.
enum class IoMode { independent, collective, automatic };

/// "independent", "collective" or "auto".
[[nodiscard]] std::string_view to_string(IoMode mode) noexcept;
/// "independent", "collective" or "auto"; throws ArgumentError naming `setting` and the text otherwise, and
/// for "collective" in a build without collective I/O.
[[nodiscard]] IoMode parse_io_mode(std::string_view text, std::string_view setting = "io_mode");

/// Whether this build has collective I/O (parallel netCDF and PnetCDF for the build's MPI).
[[nodiscard]] bool collective_io_available() noexcept;
/// Why a build without collective I/O has none, for messages.
[[nodiscard]] std::string_view collective_io_unavailable_reason() noexcept;

}  // namespace gridshard::io
