// The library's atomic writer (io/output_file.hpp) for the Python layer's files (the ACE drop-in's diagnostics, the
// plots): an unnamed temporary beside the target that a Python library writes by path, flushed and renamed over the
// target only when complete, in the umask's mode. So every file gridshard writes follows one set of rules. No MPI.

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "bindings.hpp"
#include "gridshard/io/output_file.hpp"

namespace gridshard::python {

namespace py = pybind11;

void bind_outputs(py::module_& m) {
    py::class_<io::AtomicOutput>(m, "AtomicOutput",
                                 "An output under construction (io::AtomicOutput): a temporary beside `path` that "
                                 "a library writes by `temporary_path`, removed unless published. No MPI calls.")
        .def(py::init([](const std::string& path) { return std::make_unique<io::AtomicOutput>(path); }),
             py::arg("path"),
             "Creates the temporary (ArgumentError for a missing or unwritable folder or a target that is a "
             "folder).")
        .def_property_readonly("temporary_path", &io::AtomicOutput::temporary_path,
                               "The path a library writes the file by (/proc/self/fd/N for an unnamed one).")
        .def_property_readonly("unnamed", &io::AtomicOutput::unnamed)
        .def("flush", &io::AtomicOutput::flush,
             "Gives the file its mode (the target's, else 0666 less the umask) and flushes it to disk (SystemFailure "
             "when the system cannot: a full disk).")
        .def("publish", &io::AtomicOutput::publish, "Renames the flushed file over the target.");
}

}  // namespace gridshard::python
