#pragma once
// Python buffers (numpy arrays, and torch tensors through their zero-copy `.numpy()` view) seen as the
// library's spans. The pure-Python layer hands over C-contiguous arrays; these helpers check that, so a
// mistake there is an error and never a misread.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "gridshard/core/error.hpp"

namespace gridshard::python {

namespace py = pybind11;

/// A shard's extents: `(channels, rows, cols)`.
struct ShardShape {
    std::int64_t channels = 0;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
};

/// The extents of a `(channels, rows, cols)` buffer; ArgumentError naming `name` for any other number of dims.
[[nodiscard]] inline ShardShape shape_of(py::buffer& buffer, const char* name) {
    const py::buffer_info info = buffer.request();
    if (info.ndim != 3) {
        throw ArgumentError(std::string(name) + ": expected (channels, rows, cols), got " + std::to_string(info.ndim) +
                            " dims");
    }
    return {info.shape[0], info.shape[1], info.shape[2]};
}

/// The element type of a buffer, as one of the kinds the bindings dispatch on.
enum class ElementKind { float32, float64, int32, int64, other };

/// The kind of a buffer's elements from its struct-module format ("f", "<d", "l", ...) and item size.
[[nodiscard]] inline ElementKind element_kind(const py::buffer_info& info) {
    std::string_view format = info.format;
    if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) {
        format.remove_prefix(1);  // native or little-endian order: the only ones this machine has
    }
    if (format.size() != 1) {
        return ElementKind::other;
    }
    const char code = format[0];
    if (code == 'f' && info.itemsize == 4) {
        return ElementKind::float32;
    }
    if (code == 'd' && info.itemsize == 8) {
        return ElementKind::float64;
    }
    if ((code == 'i' || code == 'l' || code == 'q') && info.itemsize == 4) {
        return ElementKind::int32;
    }
    if ((code == 'l' || code == 'q') && info.itemsize == 8) {
        return ElementKind::int64;
    }
    return ElementKind::other;
}

template <class T>
[[nodiscard]] constexpr ElementKind kind_of() noexcept {
    if constexpr (std::is_same_v<T, float>) {
        return ElementKind::float32;
    } else if constexpr (std::is_same_v<T, double>) {
        return ElementKind::float64;
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
        return ElementKind::int32;
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        return ElementKind::int64;
    } else {
        return ElementKind::other;
    }
}

/// A C-contiguous buffer of T, read-only or writable.
template <class T>
[[nodiscard]] std::span<T> contiguous_span(py::buffer& buffer, const char* name, bool writable) {
    const py::buffer_info info = buffer.request(writable);
    if (element_kind(info) != kind_of<std::remove_const_t<T>>()) {
        throw ArgumentError(std::string(name) + ": element type '" + info.format + "' is not the expected one");
    }
    py::ssize_t expected_stride = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
        const auto extent = info.shape[static_cast<std::size_t>(d)];
        if (extent > 1 && info.strides[static_cast<std::size_t>(d)] != expected_stride) {
            throw ArgumentError(std::string(name) + ": the buffer is not C-contiguous");
        }
        expected_stride *= extent;
    }
    return {static_cast<T*>(info.ptr), static_cast<std::size_t>(info.size)};
}

[[nodiscard]] inline ElementKind element_kind(py::buffer& buffer) {
    return element_kind(buffer.request());
}

/// Calls `work(T{})` with T the buffer's floating type (float or double); other types are an ArgumentError.
template <class Work>
decltype(auto) with_floating_type(py::buffer& buffer, const char* name, Work&& work) {
    switch (element_kind(buffer)) {
        case ElementKind::float32:
            return work(float{});
        case ElementKind::float64:
            return work(double{});
        default:
            throw ArgumentError(std::string(name) + ": dtype must be float32 or float64");
    }
}

/// Calls `work(T{})` with T float, double, int32 or int64, the buffer's element type.
template <class Work>
decltype(auto) with_reducible_type(py::buffer& buffer, const char* name, Work&& work) {
    switch (element_kind(buffer)) {
        case ElementKind::float32:
            return work(float{});
        case ElementKind::float64:
            return work(double{});
        case ElementKind::int32:
            return work(std::int32_t{});
        case ElementKind::int64:
            return work(std::int64_t{});
        default:
            throw ArgumentError(std::string(name) + ": dtype must be float32, float64, int32 or int64");
    }
}

}  // namespace gridshard::python
