#include "gridshard/io/dataset_writer.hpp"

#include <algorithm>
#include <cmath>

#include "write_handle.hpp"

namespace gridshard::io {

using detail::check_write;
using detail::put_text;

void write_dataset(AtomicOutput& output, const Dataset& dataset) {
    const std::string& path = output.path();
    const auto dim_index = [&](const std::string& name) {
        for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
            if (dataset.dims[k].name == name) {
                return k;
            }
        }
        throw ArgumentError("dataset '" + path + "': no dim '" + name + "'");
    };
    for (const DatasetDim& d : dataset.dims) {
        if (d.size < 0 || (!d.coordinate.empty() && d.coordinate.size() != static_cast<std::size_t>(d.size))) {
            throw ArgumentError("dataset '" + path + "': dim '" + d.name + "' of size " + std::to_string(d.size) +
                                " has " + std::to_string(d.coordinate.size()) + " coordinate values");
        }
    }
    for (const DatasetVariable& v : dataset.variables) {
        std::int64_t size = 1;
        for (const std::string& dim : v.dims) {
            size *= dataset.dims[dim_index(dim)].size;
        }
        if (v.values.size() != static_cast<std::size_t>(size)) {
            throw ArgumentError("dataset '" + path + "': variable '" + v.name + "' has " +
                                std::to_string(v.values.size()) + " values for its " + std::to_string(size) +
                                " points");
        }
    }

    detail::WriteHandle file(output);
    const int ncid = file.ncid();
    std::vector<int> dim_ids(dataset.dims.size());
    std::vector<int> coordinate_ids(dataset.dims.size(), -1);
    for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
        const DatasetDim& d = dataset.dims[k];
        check_write(nc_def_dim(ncid, d.name.c_str(), static_cast<std::size_t>(d.size), &dim_ids[k]), path,
                    "defining dim '" + d.name + "'");
        if (!d.coordinate.empty()) {
            check_write(nc_def_var(ncid, d.name.c_str(), NC_DOUBLE, 1, &dim_ids[k], &coordinate_ids[k]), path,
                        "defining variable '" + d.name + "'");
            for (const auto& [key, value] : d.attributes) {
                put_text(ncid, coordinate_ids[k], key.c_str(), value, path);
            }
        }
    }
    constexpr double fill_value = 9.96920996838687e+36;
    std::vector<int> var_ids;
    for (const DatasetVariable& v : dataset.variables) {
        std::vector<int> dims;
        for (const std::string& dim : v.dims) {
            dims.push_back(dim_ids[dim_index(dim)]);
        }
        int varid = -1;
        check_write(nc_def_var(ncid, v.name.c_str(), NC_DOUBLE, static_cast<int>(dims.size()), dims.data(), &varid),
                    path, "defining variable '" + v.name + "'");
        check_write(nc_put_att_double(ncid, varid, "_FillValue", NC_DOUBLE, 1, &fill_value), path,
                    "writing attribute '_FillValue' of '" + v.name + "'");
        for (const auto& [key, value] : v.attributes) {
            put_text(ncid, varid, key.c_str(), value, path);
        }
        var_ids.push_back(varid);
    }
    put_text(ncid, NC_GLOBAL, "Conventions", "CF-1.8", path);
    for (const auto& [key, value] : dataset.global_attributes) {
        put_text(ncid, NC_GLOBAL, key.c_str(), value, path);
    }
    check_write(nc_enddef(ncid), path, "ending define mode");
    for (std::size_t k = 0; k < dataset.dims.size(); ++k) {
        if (coordinate_ids[k] >= 0 && dataset.dims[k].size > 0) {
            check_write(nc_put_var_double(ncid, coordinate_ids[k], dataset.dims[k].coordinate.data()), path,
                        "writing '" + dataset.dims[k].name + "'");
        }
    }
    std::vector<double> filled;
    for (std::size_t k = 0; k < dataset.variables.size(); ++k) {
        if (dataset.variables[k].values.empty()) {
            continue;
        }
        filled = dataset.variables[k].values;
        std::replace_if(
            filled.begin(), filled.end(), [](double v) { return std::isnan(v); }, fill_value);
        check_write(nc_put_var_double(ncid, var_ids[k], filled.data()), path,
                    "writing variable '" + dataset.variables[k].name + "'");
    }
    file.close();
}

}  // namespace gridshard::io
