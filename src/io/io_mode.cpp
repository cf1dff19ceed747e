#include "gridshard/io/io_mode.hpp"

#include <string>

#include "gridshard/core/error.hpp"

namespace gridshard::io {

std::string_view to_string(IoMode mode) noexcept {
    return mode == IoMode::collective ? "collective" : mode == IoMode::automatic ? "auto" : "independent";
}

IoMode parse_io_mode(std::string_view text, std::string_view setting) {
    if (text == "independent") {
        return IoMode::independent;
    }
    if (text == "auto") {
        return IoMode::automatic;
    }
    if (text == "collective") {
        if (!collective_io_available()) {
            throw ArgumentError(std::string(setting) +
                                " collective: " + std::string(collective_io_unavailable_reason()));
        }
        return IoMode::collective;
    }
    throw ArgumentError(std::string(setting) + ": '" + std::string(text) + "' is not auto, independent or collective");
}

bool collective_io_available() noexcept {
#if GRIDSHARD_PARALLEL_IO
    return true;
#else
    return false;
#endif
}

std::string_view collective_io_unavailable_reason() noexcept {
    return "collective I/O is unavailable in this build (it needs libnetcdf-mpi-dev and libpnetcdf-dev built for its "
           "MPI; docs/io.md)";
}

}  // namespace gridshard::io
