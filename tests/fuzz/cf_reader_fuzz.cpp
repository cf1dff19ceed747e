// libFuzzer target for the CF reader: any bytes, as a netCDF file, through everything the reader does with
// a file it is given (the header's extent, the grid, every field's layout and decoding, a read of every
// step of every field). It must end in a clean gridshard::Error or a result, never a crash, a hang or an
// allocation beyond the file's size. Built by `make fuzz` with clang's -fsanitize=fuzzer,address,undefined.
//
// netCDF-4 (HDF5) inputs are skipped unless GRIDSHARD_FUZZ_HDF5=1. With them, the fuzzer finds within
// minutes a file on which Debian's libhdf5 1.10.8 loops forever inside netCDF-C's first inquiry of a
// variable (H5DSget_num_scales -> H5HG_read; tests/fuzz/known/hdf5_heap_loop.nc), which no caller can
// avoid, and netCDF-C and HDF5 leak on malformed files (suppressed by tests/fuzz/lsan.supp). The bounded
// run of `make test` must not fail on them; a longer `GRIDSHARD_FUZZ_HDF5=1 make fuzz` explores them.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/netcdf_reader.hpp"

namespace {

bool looks_like_hdf5(const std::uint8_t* data, std::size_t size) {
    static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (std::size_t at = 0; at + 8 <= size; at = at == 0 ? 512 : 2 * at) {
        if (std::memcmp(data + at, signature, 8) == 0) {
            return true;
        }
    }
    return false;
}

const std::string& scratch_path() {
    static const std::string path = [] {
        const char* folder = std::getenv("TMPDIR");
        return std::string(folder != nullptr ? folder : "/tmp") + "/gridshard_fuzz_input." +
               std::to_string(::getpid()) + ".nc";
    }();
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)gridshard::io::netcdf_file_extent({data, size}, size);
    static const bool hdf5 = std::getenv("GRIDSHARD_FUZZ_HDF5") != nullptr;
    if (!hdf5 && looks_like_hdf5(data, size)) {
        return 0;
    }
    {
        std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    try {
        const gridshard::io::NetcdfReader reader(scratch_path());
        const gridshard::io::GridInfo& grid = reader.grid();
        const gridshard::Box box{{0, grid.shape().nlat}, {0, grid.shape().nlon}};
        for (const std::string& name : reader.field_variables()) {
            gridshard::io::VariableReader plan = reader.reader(name, box);
            if (plan.values_per_step() > (std::size_t{1} << 20) || plan.shape().ntime > 64) {
                continue;  // the file holds them (its extent was checked), but the fuzzer's time is better spent
            }
            std::vector<double> values(plan.values_per_step());
            std::vector<float> narrow(plan.values_per_step());
            for (std::int64_t step = 0; step < plan.shape().ntime; ++step) {
                plan.read_step(step, std::span<double>(values));
                plan.read_step(step, std::span<float>(narrow));
            }
        }
    } catch (const gridshard::Error&) {
        // A refused file: what the reader must do with bad input.
    }
    return 0;
}
