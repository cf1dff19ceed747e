#include "gridshard/io/dataset_writer.hpp"

#include <algorithm>
#include <cmath>

#include "dataset_sink.hpp"
#include "write_handle.hpp"

namespace gridshard::io {

namespace detail {
namespace {

std::size_t dim_index(const Dataset& dataset, const std::string& name, const std::string& path) {
    for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
        if (dataset.dims[k].name == name) {
            return k;
        }
    }
    throw ArgumentError("dataset '" + path + "': no dim '" + name + "'");
}

std::string part_text(const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& count) {
    std::string text;
    for (std::size_t k = 0; k < start.size(); ++k) {
        text += (k > 0 ? ", " : "") + std::to_string(start[k]) + "+" + std::to_string(count[k]);
    }
    return "(" + text + ")";
}

}  // namespace

void check_dataset(const Dataset& dataset, const std::string& path, bool parts_allowed) {
    for (const DatasetDim& d : dataset.dims) {
        if (d.size < 0 || (!d.coordinate.empty() && d.coordinate.size() != static_cast<std::size_t>(d.size)) ||
            (!d.labels.empty() && (d.labels.size() != static_cast<std::size_t>(d.size) || !d.coordinate.empty()))) {
            throw ArgumentError("dataset '" + path + "': dim '" + d.name + "' of size " + std::to_string(d.size) +
                                " has " + std::to_string(d.coordinate.size()) + " coordinate values and " +
                                std::to_string(d.labels.size()) + " labels");
        }
    }
    for (const DatasetVariable& v : dataset.variables) {
        const bool with_part = !v.start.empty() || !v.count.empty();
        if (with_part && !parts_allowed) {
            throw ArgumentError("dataset '" + path + "': variable '" + v.name +
                                "' has a part, which only a collective write takes");
        }
        if (with_part && (v.start.size() != v.dims.size() || v.count.size() != v.dims.size())) {
            throw ArgumentError("dataset '" + path + "': variable '" + v.name + "' has a part of " +
                                std::to_string(v.start.size()) + " starts and " + std::to_string(v.count.size()) +
                                " counts for its " + std::to_string(v.dims.size()) + " dims");
        }
        std::int64_t size = 1;
        for (std::size_t k = 0; k < v.dims.size(); ++k) {
            const std::int64_t extent = dataset.dims[dim_index(dataset, v.dims[k], path)].size;
            if (with_part && (v.start[k] < 0 || v.count[k] < 0 || v.start[k] > extent - v.count[k])) {
                throw ArgumentError("dataset '" + path + "': variable '" + v.name + "' has the part " +
                                    part_text(v.start, v.count) + ", outside its dim '" + v.dims[k] + "' of " +
                                    std::to_string(extent));
            }
            size *= with_part ? v.count[k] : extent;
        }
        if (v.values.size() != static_cast<std::size_t>(size)) {
            throw ArgumentError("dataset '" + path + "': variable '" + v.name + "' has " +
                                std::to_string(v.values.size()) + " values for its " + std::to_string(size) +
                                " points" + (with_part ? " " + part_text(v.start, v.count) : ""));
        }
    }
}

void write_dataset_through(DatasetSink& sink, const Dataset& dataset, bool writes_whole) {
    std::vector<int> dim_ids(dataset.dims.size());
    std::vector<int> coordinate_ids(dataset.dims.size(), -1);
    std::vector<std::size_t> label_widths(dataset.dims.size(), 0);
    for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
        const DatasetDim& d = dataset.dims[k];
        dim_ids[k] = sink.def_dim(d.name, d.size, d.unlimited);
        if (!d.coordinate.empty()) {
            coordinate_ids[k] = sink.def_var(d.name, {dim_ids[k]});
        } else if (!d.labels.empty()) {
            for (const std::string& label : d.labels) {
                label_widths[k] = std::max(label_widths[k], std::max<std::size_t>(label.size(), 1));
            }
            const std::string width = "string" + std::to_string(label_widths[k]);
            const int characters = sink.def_dim(width, static_cast<std::int64_t>(label_widths[k]), false);
            coordinate_ids[k] = sink.def_char_var(d.name, {dim_ids[k], characters});
            sink.put_text(coordinate_ids[k], "_Encoding", "utf-8");
        }
        for (const auto& [key, value] : d.attributes) {
            if (coordinate_ids[k] >= 0) {
                sink.put_text(coordinate_ids[k], key, value);
            }
        }
    }
    std::vector<int> var_ids;
    for (const DatasetVariable& v : dataset.variables) {
        std::vector<int> dims;
        for (const std::string& dim : v.dims) {
            dims.push_back(dim_ids[dim_index(dataset, dim, v.name)]);
        }
        var_ids.push_back(sink.def_var(v.name, dims));
        if (v.fill) {
            sink.put_double(var_ids.back(), "_FillValue", dataset_fill_value);
        }
        for (const auto& [key, value] : v.attributes) {
            sink.put_text(var_ids.back(), key, value);
        }
    }
    sink.put_text(NC_GLOBAL, "Conventions", "CF-1.8");
    for (const auto& [key, value] : dataset.global_attributes) {
        sink.put_text(NC_GLOBAL, key, value);
    }
    sink.end_definitions();

    const std::int64_t zero[NC_MAX_VAR_DIMS] = {};
    for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
        if (label_widths[k] > 0) {
            std::string characters;  // the labels, each padded with NUL to the width
            for (const std::string& label : dataset.dims[k].labels) {
                characters += label + std::string(label_widths[k] - label.size(), '\0');
            }
            const std::int64_t count[] = {writes_whole ? dataset.dims[k].size : 0,
                                          writes_whole ? static_cast<std::int64_t>(label_widths[k]) : 0};
            sink.put_chars(coordinate_ids[k], dataset.dims[k].name, count, characters.data());
        } else if (coordinate_ids[k] >= 0) {
            const std::int64_t count = writes_whole ? dataset.dims[k].size : 0;
            sink.put(coordinate_ids[k], dataset.dims[k].name, std::span<const std::int64_t>(zero, 1),
                     std::span<const std::int64_t>(&count, 1), dataset.dims[k].coordinate.data());
        }
    }
    std::vector<double> filled;
    for (std::size_t k = 0; k < dataset.variables.size(); ++k) {
        const DatasetVariable& v = dataset.variables[k];
        const bool with_part = !v.start.empty();
        std::vector<std::int64_t> count(v.dims.size(), 0);
        if (with_part) {
            count = v.count;
        } else if (writes_whole) {
            for (std::size_t d = 0; d < v.dims.size(); ++d) {
                count[d] = dataset.dims[dim_index(dataset, v.dims[d], v.name)].size;
            }
        }
        const bool mine = with_part || writes_whole;
        filled.assign(mine ? v.values.begin() : v.values.end(), v.values.end());
        if (v.fill) {
            std::replace_if(
                filled.begin(), filled.end(), [](double x) { return std::isnan(x); }, dataset_fill_value);
        }
        sink.put(
            var_ids[k], v.name,
            with_part ? std::span<const std::int64_t>(v.start) : std::span<const std::int64_t>(zero, v.dims.size()),
            count, filled.data());
    }
}

namespace {

// Counts the file a sequence of definitions gives, by the classic format's layout (netCDF's file format
// specification): magic and record count, then the dim, global attribute and variable lists, each 8 bytes of
// tag and count (or of ABSENT), names and values padded to 4 bytes; a variable's header ends with its type,
// size and 8-byte begin (64-bit offset). The data follow, each variable's padded to 4 bytes (doubles: whole).
class ClassicFileSize final : public DatasetSink {
  public:
    int def_dim(const std::string& name, std::int64_t size, bool /*unlimited*/) override {
        // A record dim's variables take `size` records of their other dims' values: the same bytes (every
        // variable is double, so no record needs padding).
        bytes_ += name_bytes(name) + 4;
        dim_sizes_.push_back(static_cast<std::uint64_t>(size));
        return static_cast<int>(dim_sizes_.size()) - 1;
    }
    int def_var(const std::string& name, const std::vector<int>& dims) override {
        bytes_ += name_bytes(name) + 4 + 4 * dims.size() + 8 + 4 + 4 + 8 + values(dims) * sizeof(double);
        return variables_++;
    }
    int def_char_var(const std::string& name, const std::vector<int>& dims) override {
        bytes_ += name_bytes(name) + 4 + 4 * dims.size() + 8 + 4 + 4 + 8 + padded(values(dims));
        return variables_++;
    }
    void put_text(int /*varid*/, const std::string& name, const std::string& value) override {
        attribute(name, value.size());
    }
    void put_double(int /*varid*/, const std::string& name, double /*value*/) override {
        attribute(name, sizeof(double));
    }
    void end_definitions() override {}
    void put(int /*varid*/, const std::string& /*name*/, std::span<const std::int64_t> /*start*/,
             std::span<const std::int64_t> /*count*/, const double* /*values*/) override {}
    void put_chars(int /*varid*/, const std::string& /*name*/, std::span<const std::int64_t> /*count*/,
                   const char* /*values*/) override {}

    [[nodiscard]] std::uint64_t bytes() const noexcept { return 4 + 4 + 3 * 8 + bytes_; }

  private:
    static std::uint64_t padded(std::uint64_t n) { return (n + 3) / 4 * 4; }
    static std::uint64_t name_bytes(const std::string& name) { return 4 + padded(name.size()); }
    [[nodiscard]] std::uint64_t values(const std::vector<int>& dims) const {
        std::uint64_t n = 1;
        for (const int d : dims) {
            n *= dim_sizes_[static_cast<std::size_t>(d)];
        }
        return n;
    }
    void attribute(const std::string& name, std::uint64_t value_bytes) {
        bytes_ += name_bytes(name) + 4 + 4 + padded(value_bytes);
    }

    std::vector<std::uint64_t> dim_sizes_;
    std::uint64_t bytes_ = 0;
    int variables_ = 0;
};

// netCDF-C into one rank's file: every failure thrown at once.
class NetcdfSink final : public DatasetSink {
  public:
    explicit NetcdfSink(const AtomicOutput& output) : file_(output), path_(output.path()) {}

    int def_dim(const std::string& name, std::int64_t size, bool unlimited) override {
        int id = -1;
        check_write(
            nc_def_dim(file_.ncid(), name.c_str(), unlimited ? NC_UNLIMITED : static_cast<std::size_t>(size), &id),
            path_, "defining dim '" + name + "'");
        return id;
    }
    int def_var(const std::string& name, const std::vector<int>& dims) override {
        int id = -1;
        check_write(nc_def_var(file_.ncid(), name.c_str(), NC_DOUBLE, static_cast<int>(dims.size()), dims.data(), &id),
                    path_, "defining variable '" + name + "'");
        return id;
    }
    int def_char_var(const std::string& name, const std::vector<int>& dims) override {
        int id = -1;
        check_write(nc_def_var(file_.ncid(), name.c_str(), NC_CHAR, static_cast<int>(dims.size()), dims.data(), &id),
                    path_, "defining variable '" + name + "'");
        return id;
    }
    void put_text(int varid, const std::string& name, const std::string& value) override {
        detail::put_text(file_.ncid(), varid, name.c_str(), value, path_);
    }
    void put_double(int varid, const std::string& name, double value) override {
        check_write(nc_put_att_double(file_.ncid(), varid, name.c_str(), NC_DOUBLE, 1, &value), path_,
                    "writing attribute '" + name + "'");
    }
    void end_definitions() override { check_write(nc_enddef(file_.ncid()), path_, "ending define mode"); }
    void put(int varid, const std::string& name, std::span<const std::int64_t> start,
             std::span<const std::int64_t> count, const double* values) override {
        if (std::find(count.begin(), count.end(), 0) != count.end() && !count.empty()) {
            return;  // nothing to write (an empty dim)
        }
        std::vector<std::size_t> s(start.begin(), start.end());
        std::vector<std::size_t> c(count.begin(), count.end());
        check_write(nc_put_vara_double(file_.ncid(), varid, s.data(), c.data(), values), path_,
                    "writing variable '" + name + "'");
    }
    void put_chars(int varid, const std::string& name, std::span<const std::int64_t> count,
                   const char* values) override {
        const std::vector<std::size_t> s(count.size(), 0);
        const std::vector<std::size_t> c(count.begin(), count.end());
        check_write(nc_put_vara_text(file_.ncid(), varid, s.data(), c.data(), values), path_,
                    "writing variable '" + name + "'");
    }
    void close() { file_.close(); }

  private:
    WriteHandle file_;
    std::string path_;
};

}  // namespace

std::uint64_t classic_file_bytes(const Dataset& dataset) {
    ClassicFileSize size;
    write_dataset_through(size, dataset, true);
    return size.bytes();
}

}  // namespace detail

void write_dataset(AtomicOutput& output, const Dataset& dataset) {
    detail::check_dataset(dataset, output.path(), false);
    detail::NetcdfSink sink(output);
    detail::write_dataset_through(sink, dataset, true);
    sink.close();
}

}  // namespace gridshard::io
