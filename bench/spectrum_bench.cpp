// The spherical power spectrum on one rank: spherical_power_spectrum<float> (legendre-gauss, ACE's convention,
// torch-harmonics 0.8.0's truncation) of 721 x 1440 float32 fields (--nlat, --nlon), one field and a batch
// of 16, timed within this one process (OMP_NUM_THREADS sets the threads). The batches alternate within each
// repetition and medians are reported, so slow drifts of the shared machine hit both alike.
//
// --dump PREFIX writes each batch's spectra as raw little-endian doubles, (channels, L), to PREFIX.c1.bin and
// PREFIX.c16.bin, so builds, thread counts and batch sizes can be compared byte for byte (cmp): the first
// channel of the 16 is the very field of the batch of 1.

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_main.hpp"
#include "bench_support.hpp"
#include "gridshard/metrics/spectrum.hpp"

namespace gridshard::bench {
namespace {

struct Options {
    std::string out;
    std::string dump;
    int repetitions = 5;
    std::vector<std::int64_t> batches{1, 16};
    GridShape grid = quarter_degree;
};

void write_doubles(const std::string& path, const std::vector<double>& values) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(double)));
    if (!out) {
        throw std::runtime_error("cannot write " + path);
    }
}

int run(const Options& options) {
    const ProcessMesh alone(Communicator::borrow(MPI_COMM_SELF), {1, 1, 1});
    const ShardedGrid grid(alone, options.grid);
    const SpectrumSpec spec;  // legendre-gauss, torch-harmonics 0.8.0's truncation, ace
    std::vector<std::vector<float>> fields;
    for (const std::int64_t channels : options.batches) {
        fields.push_back(make_fields(options.grid, grid.box(), channels).truth);
    }
    // One untimed call per batch (first touches, FFTW's plan), its spectra dumped when asked.
    for (std::size_t b = 0; b < fields.size(); ++b) {
        const auto spectra = spherical_power_spectrum<float>(grid, {fields[b], options.batches[b]}, spec);
        if (!options.dump.empty()) {
            write_doubles(options.dump + ".c" + std::to_string(options.batches[b]) + ".bin", spectra);
        }
    }
    std::vector<std::vector<double>> samples(fields.size());
    for (int r = 0; r < options.repetitions; ++r) {
        for (std::size_t b = 0; b < fields.size(); ++b) {
            const double t0 = now_s();
            (void)spherical_power_spectrum<float>(grid, {fields[b], options.batches[b]}, spec);
            samples[b].push_back(now_s() - t0);
        }
    }
    nlohmann::ordered_json report = {
        {"shape", {options.grid.nlat, options.grid.nlon}},
        {"repetitions", options.repetitions},
    };
    for (std::size_t b = 0; b < fields.size(); ++b) {
        const std::string key = "t_spectrum_" + std::to_string(options.batches[b]) + "_s";
        std::cout << "channels " << options.batches[b] << ": median " << median(samples[b]) << " s over "
                  << options.repetitions << " repetitions\n";
        report[key] = median(samples[b]);
        report["samples_" + key] = samples[b];
    }
    if (!options.out.empty()) {
        std::ofstream(options.out) << report.dump(2) << "\n";
    }
    return 0;
}

}  // namespace
}  // namespace gridshard::bench

int main(int argc, char** argv) {
    using gridshard::bench::Options;
    return gridshard::bench::bench_main<Options>(
        argc, argv, "spectrum_bench",
        "gridshard spherical power spectrum benchmark: 721 x 1440 float32, batches of 1 and 16 fields",
        [](CLI::App& app, Options& options) {
            app.add_option("--out", options.out, "JSON file to write (none: only the printed medians)");
            app.add_option("--dump", options.dump, "write each batch's spectra as raw doubles to DUMP.c<channels>.bin");
            app.add_option("--repetitions", options.repetitions, "timed repetitions (medians are reported)")
                ->check(CLI::PositiveNumber);
            app.add_option("--batches", options.batches, "the batch sizes (channels) to time")
                ->check(CLI::Range(1, 1000));
            app.add_option("--nlat", options.grid.nlat, "rows of the grid (721)")->check(CLI::Range(2, 100000));
            app.add_option("--nlon", options.grid.nlon, "columns of the grid (1440)")->check(CLI::Range(2, 100000));
        },
        [](const Options& options) { return gridshard::bench::run(options); });
}
