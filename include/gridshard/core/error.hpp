#pragma once
/// @file
/// The error types every layer of gridshard throws. No MPI calls.

#include <stdexcept>
#include <string>
#include <string_view>

namespace gridshard {

/// A caller's setting as the library's messages name it: its name in the library's interface in backquotes,
/// e.g. "`regions`" for EvaluationPlan::regions. Front ends show their own name for it (the tool its flag,
/// `--region`; apps/gridshard/setting_flags.cpp), so a library message never names a flag of one front end.
[[nodiscard]] inline std::string setting_name(std::string_view name) {
    return "`" + std::string(name) + "`";
}

/// Base of every error gridshard throws.
class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A caller's argument or input is invalid (a bad option, a file that cannot have been read right, a
/// request larger than the machine): the message names the argument and the values it had. Raised alike
/// on every rank when every rank can see the condition (docs/design.md, error contract). The tool exits
/// with status 2.
class ArgumentError : public Error {
  public:
    using Error::Error;
};

/// The system failed while doing something valid: a full disk, an I/O error, memory exhausted at run
/// time. The tool exits with status 1.
class SystemError : public Error {
  public:
    using Error::Error;
};

/// An MPI call returned an error code; the message carries MPI's own error string. The tool exits with
/// status 1.
class MpiError : public Error {
  public:
    MpiError(const std::string& what, int error_code) : Error(what), error_code_(error_code) {}
    /// The MPI error code that was returned.
    [[nodiscard]] int error_code() const noexcept { return error_code_; }

  private:
    int error_code_;
};

}  // namespace gridshard
