#pragma once
// The names of an enumeration's values, as a table of (name, value) pairs: the one parser and printer of every
// option named in text (the halo's pole rules, the spectrum's grids, conventions, modes, truncations and zonal
// weightings). Internal; no MPI.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "gridshard/core/error.hpp"

namespace gridshard::detail {

template <class Enum, std::size_t N>
using NameTable = std::array<std::pair<std::string_view, Enum>, N>;

/// The value named `text`; throws ArgumentError `what="text" is not one of <the names>` otherwise.
template <class Enum, std::size_t N>
Enum parse_name(std::string_view text, const NameTable<Enum, N>& names, const char* what) {
    std::string known;
    for (const auto& [name, value] : names) {
        if (text == name) {
            return value;
        }
        known += (known.empty() ? "" : ", ") + std::string(name);
    }
    throw ArgumentError(std::string(what) + "=\"" + std::string(text) + "\" is not one of " + known);
}

/// The name of `value`, or "unknown".
template <class Enum, std::size_t N>
std::string_view name_of(Enum value, const NameTable<Enum, N>& names) noexcept {
    for (const auto& [name, v] : names) {
        if (v == value) {
            return name;
        }
    }
    return "unknown";
}

}  // namespace gridshard::detail
