#pragma once
/// @file
/// The one place where MPI return codes become exceptions, and the element-type to MPI_Datatype map.

#include <mpi.h>

#include <cstdint>
#include <string_view>

namespace gridshard::detail {

/// Throws MpiError carrying MPI's own message when `return_code` is not MPI_SUCCESS.
/// Every MPI call of gridshard goes through here, except those that must not throw: in destructors (MPI_Finalized,
/// MPI_Comm_free, MPI_Info_free) and where a failed call is itself agreed or ends the job (the agreements' own
/// allreduce, MPI_Abort). No MPI communication.
void check_mpi(int return_code, std::string_view call);

/// The MPI datatype of an element type gridshard communicates.
template <class T>
[[nodiscard]] MPI_Datatype mpi_datatype() noexcept;

template <>
inline MPI_Datatype mpi_datatype<float>() noexcept {
    return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_datatype<double>() noexcept {
    return MPI_DOUBLE;
}
template <>
inline MPI_Datatype mpi_datatype<std::int32_t>() noexcept {
    return MPI_INT32_T;
}
template <>
inline MPI_Datatype mpi_datatype<std::int64_t>() noexcept {
    return MPI_INT64_T;
}
template <>
inline MPI_Datatype mpi_datatype<std::uint32_t>() noexcept {
    return MPI_UINT32_T;
}
template <>
inline MPI_Datatype mpi_datatype<std::uint64_t>() noexcept {
    return MPI_UINT64_T;
}

}  // namespace gridshard::detail

/// Calls an MPI function and checks its return code, naming the function in the error.
#define GRIDSHARD_MPI(call_name, ...) ::gridshard::detail::check_mpi(call_name(__VA_ARGS__), #call_name)
