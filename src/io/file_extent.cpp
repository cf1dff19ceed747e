#include "gridshard/io/file_extent.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace gridshard::io {
namespace {

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();

// Thrown inside the parser: the header needs bytes beyond the prefix.
struct NeedMore {
    std::uint64_t bytes;
};
// Thrown inside the parser: the header is malformed.
struct Malformed {
    std::string why;
};

// A big-endian cursor over the prefix of a file (the classic format's byte order).
class Cursor {
  public:
    Cursor(std::span<const unsigned char> bytes, std::uint64_t file_size) : bytes_(bytes), file_size_(file_size) {}

    [[nodiscard]] std::uint64_t position() const noexcept { return position_; }

    void need(std::uint64_t count) const {
        if (count > max_u64 - position_ || position_ + count > file_size_) {
            throw Malformed{"the header runs past the end of the file (" + std::to_string(file_size_) + " bytes)"};
        }
        if (position_ + count > bytes_.size()) {
            // Ask for twice as much as needed now, to keep the number of calls logarithmic.
            const std::uint64_t wanted = std::max<std::uint64_t>(position_ + count, 2 * bytes_.size());
            throw NeedMore{std::min(wanted, file_size_)};
        }
    }

    std::uint64_t unsigned_big_endian(int width) {
        need(static_cast<std::uint64_t>(width));
        std::uint64_t value = 0;
        for (int k = 0; k < width; ++k) {
            value = (value << 8) | bytes_[position_ + static_cast<std::uint64_t>(k)];
        }
        position_ += static_cast<std::uint64_t>(width);
        return value;
    }

    void skip(std::uint64_t count) {
        need(count);
        position_ += count;
    }

  private:
    std::span<const unsigned char> bytes_;
    std::uint64_t file_size_;
    std::uint64_t position_ = 0;
};

std::uint64_t checked_multiply(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > max_u64 / a) {
        throw Malformed{"variable sizes overflow 64 bits"};
    }
    return a * b;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) {
    if (b > max_u64 - a) {
        throw Malformed{"variable offsets overflow 64 bits"};
    }
    return a + b;
}

std::uint64_t padded4(std::uint64_t n) {
    return checked_add(n, 3) / 4 * 4;
}

// The external size of a classic type, 0 for a type the format does not have.
std::uint64_t type_size(std::uint64_t type, int version) {
    switch (type) {
        case 1:  // NC_BYTE
        case 2:  // NC_CHAR
            return 1;
        case 3:  // NC_SHORT
            return 2;
        case 4:  // NC_INT
        case 5:  // NC_FLOAT
            return 4;
        case 6:  // NC_DOUBLE
            return 8;
        default:
            break;
    }
    if (version == 5) {
        switch (type) {
            case 7:  // NC_UBYTE
                return 1;
            case 8:  // NC_USHORT
                return 2;
            case 9:  // NC_UINT
                return 4;
            case 10:  // NC_INT64
            case 11:  // NC_UINT64
                return 8;
            default:
                break;
        }
    }
    return 0;
}

class ClassicHeader {
  public:
    ClassicHeader(Cursor& cursor, int version) : in_(cursor), version_(version) {}

    std::uint64_t required_bytes() {
        in_.skip(4);  // magic
        const std::uint64_t numrecs = in_.unsigned_big_endian(version_ == 5 ? 8 : 4);
        const bool streaming = numrecs == (version_ == 5 ? max_u64 : 0xFFFFFFFFull);
        read_dims();
        read_attributes();  // global attributes
        std::uint64_t end = in_.position();
        struct RecordVariable {
            std::uint64_t begin;
            std::uint64_t size;
        };
        std::vector<RecordVariable> records;
        const std::uint64_t nvars = list_length(0x0B, "variable");
        for (std::uint64_t v = 0; v < nvars; ++v) {
            skip_name();
            const std::uint64_t ndims = count();
            guard_count(ndims, version_ == 5 ? 8 : 4);
            std::uint64_t size = 1;
            bool record = false;
            for (std::uint64_t d = 0; d < ndims; ++d) {
                const std::uint64_t dimid = count();
                if (dimid >= dims_.size()) {
                    throw Malformed{"variable " + std::to_string(v) + " names dimension " + std::to_string(dimid) +
                                    " of " + std::to_string(dims_.size())};
                }
                if (dims_[dimid] == 0) {  // the record dimension
                    if (d != 0) {
                        throw Malformed{"variable " + std::to_string(v) + " has the record dimension other than first"};
                    }
                    record = true;
                } else {
                    size = checked_multiply(size, dims_[dimid]);
                }
            }
            read_attributes();
            const std::uint64_t type = in_.unsigned_big_endian(4);
            const std::uint64_t element = type_size(type, version_);
            if (element == 0) {
                throw Malformed{"variable " + std::to_string(v) + " has unknown type " + std::to_string(type)};
            }
            size = checked_multiply(size, element);
            in_.skip(version_ == 5 ? 8 : 4);  // vsize: recomputed here, as it cannot hold sizes over 4 GiB
            const std::uint64_t begin = in_.unsigned_big_endian(version_ == 1 ? 4 : 8);
            if (record) {
                records.push_back({begin, size});
            } else {
                end = std::max(end, checked_add(begin, size));
            }
        }
        end = std::max(end, in_.position());
        if (!records.empty() && !streaming && numrecs > 0) {
            std::uint64_t recsize = 0;
            for (const RecordVariable& r : records) {
                recsize = checked_add(recsize, records.size() == 1 ? r.size : padded4(r.size));
            }
            for (const RecordVariable& r : records) {
                end = std::max(end, checked_add(checked_add(r.begin, checked_multiply(numrecs - 1, recsize)), r.size));
            }
        }
        return end;
    }

  private:
    std::uint64_t count() { return in_.unsigned_big_endian(version_ == 5 ? 8 : 4); }

    // Every element of a list takes at least `min_bytes`: a count the file cannot hold is malformed, so the
    // loops below stay bounded by the file's size.
    void guard_count(std::uint64_t n, std::uint64_t min_bytes) const {
        in_.need(0);
        if (n > max_u64 / min_bytes) {
            throw Malformed{"a list of " + std::to_string(n) + " elements"};
        }
        in_.need(n * min_bytes);
    }

    // A list header: the tag and the element count; ABSENT (two zeros) is an empty list.
    std::uint64_t list_length(std::uint64_t tag, const char* what) {
        const std::uint64_t found = in_.unsigned_big_endian(4);
        const std::uint64_t n = count();
        if (found == 0 && n == 0) {
            return 0;
        }
        if (found != tag) {
            throw Malformed{std::string("expected the ") + what + " list tag, found " + std::to_string(found)};
        }
        return n;
    }

    // Names longer than netCDF's NC_MAX_NAME are refused here: netCDF-C accepts them at open and then
    // copies them into callers' NC_MAX_NAME + 1 buffers (found by the fuzz target).
    void skip_name() {
        const std::uint64_t length = count();
        if (length > max_name_bytes) {
            throw Malformed{"a name of " + std::to_string(length) + " bytes, more than netCDF's limit of " +
                            std::to_string(max_name_bytes)};
        }
        in_.skip(padded4(length));
    }

    static constexpr std::uint64_t max_name_bytes = 256;  // NC_MAX_NAME

    void read_dims() {
        const std::uint64_t n = list_length(0x0A, "dimension");
        guard_count(n, version_ == 5 ? 16 : 8);
        dims_.reserve(static_cast<std::size_t>(n));
        for (std::uint64_t d = 0; d < n; ++d) {
            skip_name();
            dims_.push_back(count());
        }
    }

    void read_attributes() {
        const std::uint64_t n = list_length(0x0C, "attribute");
        guard_count(n, version_ == 5 ? 20 : 12);
        for (std::uint64_t a = 0; a < n; ++a) {
            skip_name();
            const std::uint64_t type = in_.unsigned_big_endian(4);
            const std::uint64_t element = type_size(type, version_);
            if (element == 0) {
                throw Malformed{"attribute " + std::to_string(a) + " has unknown type " + std::to_string(type)};
            }
            const std::uint64_t values = count();
            in_.skip(padded4(checked_multiply(values, element)));
        }
    }

    Cursor& in_;
    int version_;
    std::vector<std::uint64_t> dims_;
};

constexpr std::array<unsigned char, 8> hdf5_signature = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

std::uint64_t little_endian(std::span<const unsigned char> bytes, std::uint64_t at, int width) {
    std::uint64_t value = 0;
    for (int k = width - 1; k >= 0; --k) {
        value = (value << 8) | bytes[at + static_cast<std::uint64_t>(k)];
    }
    return value;
}

// The superblock at `at` (its signature already matched): its end-of-file address.
FileExtent hdf5_extent(std::span<const unsigned char> prefix, std::uint64_t file_size, std::uint64_t at) {
    FileExtent result;
    result.format = FileExtent::Format::hdf5;
    const auto need = [&](std::uint64_t bytes) {
        if (at + bytes > file_size) {
            result.problem = "the HDF5 superblock runs past the end of the file";
            return false;
        }
        if (at + bytes > prefix.size()) {
            result.more_header_bytes = at + bytes;
            return false;
        }
        return true;
    };
    if (!need(9)) {
        return result;
    }
    const unsigned version = prefix[at + 8];
    std::uint64_t offsets_at = 0;  // where "size of offsets" is
    std::uint64_t base_at = 0;     // where the base address is
    std::uint64_t eof_index = 0;   // the end-of-file address is the eof_index-th address after the base
    if (version == 0 || version == 1) {
        offsets_at = at + 13;
        base_at = at + (version == 0 ? 24 : 28);
        eof_index = 2;
    } else if (version == 2 || version == 3) {
        offsets_at = at + 9;
        base_at = at + 12;
        eof_index = 2;
    } else {
        result.format = FileExtent::Format::unknown;  // a newer superblock: no check rather than a wrong one
        return result;
    }
    if (!need(offsets_at - at + 1)) {
        return result;
    }
    const int width = prefix[offsets_at];
    if (width != 2 && width != 4 && width != 8) {
        result.problem = "the HDF5 superblock gives " + std::to_string(width) + "-byte addresses";
        return result;
    }
    const std::uint64_t w = static_cast<std::uint64_t>(width);
    if (!need(base_at - at + (eof_index + 1) * w)) {
        return result;
    }
    const std::uint64_t eof = little_endian(prefix, base_at + eof_index * w, width);
    const std::uint64_t undefined = width == 8 ? max_u64 : (std::uint64_t{1} << (8 * w)) - 1;
    if (eof == undefined) {
        result.format = FileExtent::Format::unknown;
        return result;
    }
    // The end-of-file address is absolute (HDF5 compares it with the file's size, base address included),
    // unlike the other addresses, which are relative to the base (the user block's end).
    result.required_bytes = eof;
    return result;
}

}  // namespace

FileExtent netcdf_file_extent(std::span<const unsigned char> prefix, std::uint64_t file_size) {
    prefix = prefix.first(static_cast<std::size_t>(std::min<std::uint64_t>(prefix.size(), file_size)));
    FileExtent result;
    if (prefix.size() < 4 && file_size >= 4) {
        result.more_header_bytes = std::min<std::uint64_t>(file_size, 4096);
        return result;
    }
    if (prefix.size() >= 4 && prefix[0] == 'C' && prefix[1] == 'D' && prefix[2] == 'F' &&
        (prefix[3] == 1 || prefix[3] == 2 || prefix[3] == 5)) {
        result.format = FileExtent::Format::classic;
        Cursor cursor(prefix, file_size);
        try {
            result.required_bytes = ClassicHeader(cursor, prefix[3]).required_bytes();
        } catch (const NeedMore& more) {
            result.more_header_bytes = more.bytes;
        } catch (const Malformed& malformed) {
            result.problem = "malformed classic netCDF header: " + malformed.why;
        }
        return result;
    }
    // HDF5 looks for its superblock at 0, 512, 1024, 2048, ... (after a user block).
    for (std::uint64_t at = 0; at + hdf5_signature.size() <= file_size; at = at == 0 ? 512 : 2 * at) {
        if (at + hdf5_signature.size() > prefix.size()) {
            result.more_header_bytes = std::min(file_size, std::max<std::uint64_t>(at + 4096, 2 * prefix.size()));
            return result;
        }
        if (std::memcmp(prefix.data() + at, hdf5_signature.data(), hdf5_signature.size()) == 0) {
            return hdf5_extent(prefix, file_size, at);
        }
        if (at >= (std::uint64_t{1} << 26)) {  // user blocks beyond 64 MiB: not looked for
            break;
        }
    }
    return result;
}

}  // namespace gridshard::io
