#pragma once
// Option parsing shared by the subcommands: whole numbers that are checked instead of saturated, and name
// lists without empty or repeated names. Errors are CLI11 parse errors (exit status 2) naming the option.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gridshard::cli {

/// Registers `name` (e.g. "--nlat") as a whole number in [min, max] stored in `target`. Text that is not a
/// decimal whole number, or one outside the range (including one that overflows 64 bits), is a parse error
/// naming the option, the text and the range.
CLI::Option* add_count_option(CLI::App& app, const std::string& name, std::int64_t& target, std::int64_t min,
                              std::int64_t max, const std::string& description);

/// Registers `name` (e.g. "--split") as a choice parsed once by `parse` (one of the library's parsers,
/// such as parse_split_rule) into `target`; the ArgumentError of a bad value becomes a parse error naming
/// the option and the value. `target`'s initial value is the default.
template <class Enum, class Parse, class Print>
CLI::Option* add_choice_option(CLI::App& app, const std::string& name, Enum& target, Parse parse, Print print,
                               const std::string& description) {
    CLI::Option* option = app.add_option_function<std::string>(
        name,
        [&target, name, parse](const std::string& text) {
            try {
                target = parse(text);
            } catch (const std::exception& error) {
                throw CLI::ValidationError(name, error.what());
            }
        },
        description);
    option->default_str(std::string(print(target)));
    return option;
}

/// The names of a comma-separated list such as `--vars t2m,sst`; an empty name or one given twice is an
/// ArgumentError naming `option` and the text. An empty text is an empty list.
[[nodiscard]] std::vector<std::string> parse_name_list(const std::string& option, const std::string& text);

/// The numbers of a comma-separated list such as `--quantiles 0.5,0.99`; an empty text, an empty item or one that is
/// not a whole decimal number is an ArgumentError naming `option` and the text.
[[nodiscard]] std::vector<double> parse_number_list(const std::string& option, const std::string& text);

/// NAME and VALUE of `text` "NAME=VALUE" (such as `--near-zero-fraction-per-variable-eps PRATEsfc=1e-6`): a name
/// that is not empty and a whole decimal number; anything else is a parse error naming `option` and the text.
[[nodiscard]] std::pair<std::string, double> parse_named_number(const std::string& option, const std::string& text);

}  // namespace gridshard::cli
