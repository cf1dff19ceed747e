#pragma once
// How a Dataset (dataset_writer.hpp) is written, once for both writers: the checks of its sizes and parts,
// and the definitions and puts, through a sink that is netCDF-C on one rank (dataset_writer.cpp) or PnetCDF
// collectively (parallel_io.cpp). Internal to the io layer.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridshard/io/dataset_writer.hpp"

namespace gridshard::io::detail {

/// The netCDF calls of a dataset write (every variable NC_DOUBLE, but the string coordinates' NC_CHAR). A collective
/// sink is called on every rank in the same order, puts included (count 0 where a rank has nothing), and must not throw
/// mid-way: it keeps its first failure for after the last collective call.
class DatasetSink {
  public:
    virtual ~DatasetSink() = default;
    /// `size` entries; an `unlimited` dim is the record dim and `size` the records written.
    virtual int def_dim(const std::string& name, std::int64_t size, bool unlimited) = 0;
    virtual int def_var(const std::string& name, const std::vector<int>& dims) = 0;
    /// An NC_CHAR variable (a string coordinate).
    virtual int def_char_var(const std::string& name, const std::vector<int>& dims) = 0;
    virtual void put_text(int varid, const std::string& name, const std::string& value) = 0;
    virtual void put_double(int varid, const std::string& name, double value) = 0;
    virtual void end_definitions() = 0;
    virtual void put(int varid, const std::string& name, std::span<const std::int64_t> start,
                     std::span<const std::int64_t> count, const double* values) = 0;
    /// The characters of an NC_CHAR variable from its start: `count` per dim (zeros where a rank writes nothing).
    virtual void put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                           const char* values) = 0;
};

/// The _FillValue of every variable, written where a value is NaN (netCDF's default for double).
inline constexpr double dataset_fill_value = 9.96920996838687e+36;

/// Throws ArgumentError naming `path` for an unknown dim, coordinates that do not number their dim, or values
/// that do not fill their part (the whole variable without one; a part is allowed only when `parts_allowed`)
/// or a part outside its dims.
void check_dataset(const Dataset& dataset, const std::string& path, bool parts_allowed);

/// The bytes of the 64-bit offset file write_dataset_through() writes for `dataset` (header and data, with
/// netCDF-C's 4-byte alignment), counted from the same calls. No I/O.
[[nodiscard]] std::uint64_t classic_file_bytes(const Dataset& dataset);

/// Defines `dataset` through `sink` and writes its data: the coordinates and the variables without a part
/// from this rank's values when `writes_whole` (else with count 0), the variables with one from their part.
void write_dataset_through(DatasetSink& sink, const Dataset& dataset, bool writes_whole);

}  // namespace gridshard::io::detail
