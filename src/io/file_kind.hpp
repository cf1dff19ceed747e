#pragma once
// How the io layer names what a path is when it is not a regular file. Internal; no MPI calls.

#include <sys/stat.h>

namespace gridshard::io::detail {

/// "a directory", "a FIFO", "a socket", "a character device", "a block device", or "not a regular file".
[[nodiscard]] inline const char* file_kind(mode_t mode) noexcept {
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "not a regular file";
}

}  // namespace gridshard::io::detail
