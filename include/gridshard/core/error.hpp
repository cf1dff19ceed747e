#pragma once
/// @file
/// The error types every layer of gridshard throws. No MPI calls.

#include <stdexcept>
#include <string>

namespace gridshard {

/// Base of every error gridshard throws.
class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A caller's argument is invalid: the message names the argument and the values it had.
/// Raised alike on every rank when every rank can see the condition (see DESIGN §6).
class ArgumentError : public Error {
  public:
    using Error::Error;
};

/// An MPI call returned an error code; the message carries MPI's own error string.
class MpiError : public Error {
  public:
    MpiError(const std::string& what, int error_code) : Error(what), error_code_(error_code) {}
    /// The MPI error code that was returned.
    [[nodiscard]] int error_code() const noexcept { return error_code_; }

  private:
    int error_code_;
};

}  // namespace gridshard
