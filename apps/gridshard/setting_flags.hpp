#pragma once
// The tool's names for the library's settings: the library's messages name a setting as `name` (setting_name in
// gridshard/core/error.hpp); the tool shows the flag that sets it. No MPI calls.

#include <string>
#include <string_view>

namespace gridshard::cli {

/// `message` with each setting the library names in it (`variables`, `regions`, ...) replaced by the tool's flag
/// for it (--vars, --region, ...). A setting the tool has no flag for keeps its name, backquotes and all.
[[nodiscard]] std::string with_flags(std::string_view message);

}  // namespace gridshard::cli
