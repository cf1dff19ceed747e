#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "gridshard/core/error.hpp"

namespace gridshard::cli {

CLI::Option* add_count_option(CLI::App& app, const std::string& name, std::int64_t& target, std::int64_t min,
                              std::int64_t max, const std::string& description) {
    const std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
    CLI::Option* option = app.add_option_function<std::string>(
        name,
        [&target, name, min, max, range](const std::string& text) {
            std::int64_t value = 0;
            const char* first = text.data();
            const char* last = text.data() + text.size();
            const auto [end, error] = std::from_chars(first, last, value);
            if (error != std::errc() || end != last || value < min || value > max) {
                throw CLI::ValidationError(name, "'" + text + "' is not " + range);
            }
            target = value;
        },
        description + " (" + range + ")");
    option->default_str(std::to_string(target));
    return option;
}

std::vector<std::string> parse_name_list(const std::string& option, const std::string& text) {
    std::vector<std::string> names;
    if (text.empty()) {
        return names;
    }
    std::stringstream stream(text);
    std::string name;
    while (std::getline(stream, name, ',')) {
        if (name.empty()) {
            throw ArgumentError(option + " '" + text + "' has an empty name");
        }
        if (std::find(names.begin(), names.end(), name) != names.end()) {
            throw ArgumentError(option + " '" + text + "' names '" + name + "' twice");
        }
        names.push_back(name);
    }
    if (text.back() == ',') {
        throw ArgumentError(option + " '" + text + "' has an empty name");
    }
    return names;
}

std::vector<double> parse_number_list(const std::string& option, const std::string& text) {
    std::vector<double> numbers;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const char* first = text.data() + at;
        const char* last = text.data() + comma;
        double value = 0.0;
        const auto [end, error] = std::from_chars(first, last, value);
        if (first == last || error != std::errc() || end != last) {
            throw ArgumentError(option + " '" + text + "': '" + std::string(first, last) + "' is not a number");
        }
        numbers.push_back(value);
        at = comma + 1;
    }
    return numbers;
}

std::pair<std::string, double> parse_named_number(const std::string& option, const std::string& text) {
    const std::size_t equals = text.find('=');
    double value = 0.0;
    if (equals != std::string::npos && equals > 0) {
        const char* first = text.data() + equals + 1;
        const char* last = text.data() + text.size();
        const auto [end, error] = std::from_chars(first, last, value);
        if (error == std::errc() && end == last && first != last) {
            return {text.substr(0, equals), value};
        }
    }
    throw CLI::ValidationError(option, "'" + text + "' is not NAME=NUMBER");
}

}  // namespace gridshard::cli
