// libFuzzer target for the CF reader: any bytes, as a netCDF file, through everything the reader does with
// a file it is given (the header's extent, the grid, every field's layout and decoding, a read of every
// step of every field). It must end in a clean gridshard::Error or a result, never a crash, a hang or an
// allocation beyond the file's size. Built by `make fuzz` with clang's -fsanitize=fuzzer,address,undefined;
// netCDF-C's and HDF5's own leaks on malformed netCDF-4 files are suppressed (tests/fuzz/lsan.supp).

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gridshard/core/error.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/netcdf_reader.hpp"

namespace {

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
