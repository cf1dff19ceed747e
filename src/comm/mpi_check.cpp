#include "gridshard/comm/mpi_check.hpp"

#include <string>

#include "gridshard/core/error.hpp"

namespace gridshard::detail {

void check_mpi(int return_code, std::string_view call) {
    if (return_code == MPI_SUCCESS) {
        return;
    }
    char message[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    if (MPI_Error_string(return_code, message, &length) != MPI_SUCCESS) {
        length = 0;
    }
    throw MpiError(std::string(call) + " failed: " + std::string(message, static_cast<std::size_t>(length)),
                   return_code);
}

}  // namespace gridshard::detail
