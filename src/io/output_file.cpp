#include "gridshard/io/output_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include "file_kind.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard::io {
namespace {

namespace fs = std::filesystem;

std::string in_quotes(const std::string& path) {
    return "'" + path + "'";
}

// A target written directly rather than replaced: a character device (/dev/null) or a FIFO.
bool is_written_through(const struct stat& info) {
    return S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode);
}

// The problem with `path` as a file to write, named after its kind ("is a directory"), or "" when fine; a
// `stream` output may also be a device or FIFO that is written through.
std::string not_regular(const struct stat& info, bool stream = false) {
    if (S_ISREG(info.st_mode) || (stream && is_written_through(info))) {
        return "";
    }
    return S_ISDIR(info.st_mode) ? "is a directory"
                                 : std::string("is not a regular file (") + detail::file_kind(info.st_mode) + ")";
}

// Failures the user can fix by naming another path are argument errors; the others are the system's.
bool is_path_problem(int error) {
    return error == EACCES || error == EPERM || error == EROFS || error == ENOENT || error == ENOTDIR ||
           error == EISDIR || error == ENAMETOOLONG || error == ELOOP || error == ENXIO;  // ENXIO: a FIFO unread
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& doing, int error) {
    const std::string message = "cannot write " + in_quotes(path) + ": " + doing + ": " + std::strerror(error);
    if (is_path_problem(error)) {
        throw ArgumentError(message);
    }
    throw SystemError(message);
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
    while (!bytes.empty()) {
        const ssize_t written = ::write(fd, bytes.data(), bytes.size());
        if (written < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw SystemError("cannot write " + in_quotes(path) + ": " + std::strerror(errno));
        }
        bytes.remove_prefix(static_cast<std::size_t>(written));
    }
}

fs::path folder_of(const fs::path& path) {
    const fs::path parent = path.parent_path();
    return parent.empty() ? fs::path(".") : parent;
}

struct Identity {
    dev_t device = 0;
    ino_t inode = 0;
    bool operator==(const Identity&) const = default;
};

constexpr const char* temporary_marker = ".gridshard-tmp-";
constexpr std::time_t stale_after_s = 24 * 3600;

// The byte a temporary's writer locks while it lives: far past any data, so that no byte-range lock an MPI-IO
// layer takes on the file's data (ROMIO's, for data sieving) ever meets it.
constexpr off_t liveness_lock_offset = off_t{1} << 62;

struct flock liveness_lock() {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = liveness_lock_offset;
    lock.l_len = 1;
    return lock;
}

// Takes the lock that shows other processes this temporary's writer is alive: an open-file-description lock,
// which the kernel drops when the writer ends however it ends, and which closing another descriptor of the file
// (a library's, by path) does not drop. A file system without such locks gets none; the host and process rule
// decides there.
void hold_liveness_lock(int fd) noexcept {
    struct flock lock = liveness_lock();
    (void)::fcntl(fd, F_OFD_SETLK, &lock);
}

// Whether a live process holds the liveness lock of the temporary at `path`.
bool writer_is_alive(const fs::path& path) noexcept {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    struct flock probe = liveness_lock();
    const bool held = ::fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
    ::close(fd);
    return held;
}

// This host's name as temporaries carry it ('/' made '_'), read once.
const std::string& host_name() {
    static const std::string host = [] {
        char name[HOST_NAME_MAX + 1] = {};
        if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') {
            return std::string("localhost");
        }
        std::string text(name);
        for (char& c : text) {
            c = c == '/' ? '_' : c;
        }
        return text;
    }();
    return host;
}

// The digits after the last '-' of text[0, end), or -1; `end` moves to that '-'.
long long trailing_number(const std::string& text, std::size_t& end) {
    const std::size_t dash = text.rfind('-', end == 0 ? 0 : end - 1);
    if (dash == std::string::npos || dash + 1 >= end || end - dash > 18 ||
        text.find_first_not_of("0123456789", dash + 1) < end) {
        return -1;
    }
    const long long value = std::stoll(text.substr(dash + 1, end - dash - 1));
    end = dash;
    return value;
}

// Removes the temporaries of `target` (".NAME.gridshard-tmp-HOST-PID-N[.SUFFIX]") that no live run can own. One
// whose liveness lock is held is kept, whatever its name says (a container may share this host's name and not its
// processes). Of the others, those of this host whose process is gone, and any not modified for a day (another
// host's process cannot be asked, and a file system without locks cannot tell). A temporary of a live process of
// this host is kept, whatever its age.
void remove_stale_temporaries(const fs::path& target, const std::string& host) {
    const std::string prefix = "." + target.filename().string() + temporary_marker;
    const fs::path folder = folder_of(target);
    DIR* listing = ::opendir(folder.c_str());
    if (listing == nullptr) {
        return;  // creating the temporary reports the folder's problem
    }
    const std::time_t now = std::time(nullptr);
    while (const dirent* entry = ::readdir(listing)) {
        const std::string name = entry->d_name;
        if (name.compare(0, prefix.size(), prefix) != 0) {
            continue;
        }
        // HOST-PID-N, or HOST-PID-N.SUFFIX: a file the MPI-IO layer made beside the temporary (Open MPI's
        // lock test, NAME.locktest.RANK, lives while a rank opens the file).
        std::string owner = name.substr(prefix.size());
        if (const std::size_t last_dash = owner.rfind('-'); last_dash != std::string::npos) {
            owner = owner.substr(0, owner.find('.', last_dash));
        }
        std::size_t end = owner.size();
        const bool numbered = trailing_number(owner, end) >= 0;
        const long long pid = numbered ? trailing_number(owner, end) : -1;
        const fs::path path = folder / name;
        struct stat info {};
        if (pid <= 0 || ::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
            continue;
        }
        if (writer_is_alive(path)) {
            continue;
        }
        const bool here = owner.substr(0, end) == host;
        const bool gone = here && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
        const bool alive_here = here && !gone;
        if (gone || (!alive_here && now - info.st_mtime > stale_after_s)) {
            (void)::unlink(path.c_str());
        }
    }
    ::closedir(listing);
}

}  // namespace

void check_output_paths(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
    std::vector<std::pair<Identity, const NamedPath*>> seen;
    for (const NamedPath& input : inputs) {
        struct stat info {};
        if (!input.path.empty() && ::stat(input.path.c_str(), &info) == 0) {
            seen.push_back({{info.st_dev, info.st_ino}, &input});
        }
    }
    std::vector<std::pair<std::string, const NamedPath*>> planned;  // outputs that do not exist yet
    for (const NamedPath& output : outputs) {
        if (output.path.empty()) {
            continue;
        }
        const std::string named = output.option + " " + in_quotes(output.path);
        struct stat link {};
        if (::lstat(output.path.c_str(), &link) == 0) {
            struct stat info {};
            if (::stat(output.path.c_str(), &info) != 0) {
                throw ArgumentError(named + " is a dangling symbolic link");
            }
            if (const std::string problem = not_regular(info, output.stream); !problem.empty()) {
                throw ArgumentError(named + " " + problem);
            }
            const Identity identity{info.st_dev, info.st_ino};
            for (const auto& [other, whose] : seen) {
                if (other == identity) {
                    throw ArgumentError(named + " is the same file as " + whose->option + " " + in_quotes(whose->path) +
                                        "; an output never overwrites an input or another output");
                }
            }
            seen.push_back({identity, &output});
            continue;
        }
        if (errno != ENOENT) {
            throw ArgumentError(named + ": " + std::strerror(errno));
        }
        const fs::path folder = folder_of(output.path);
        struct stat info {};
        if (::stat(folder.c_str(), &info) != 0) {
            throw ArgumentError(named + ": folder " + in_quotes(folder.string()) + " does not exist");
        }
        if (!S_ISDIR(info.st_mode)) {
            throw ArgumentError(named + ": " + in_quotes(folder.string()) + " is not a folder");
        }
        std::error_code ignored;
        const std::string canonical = fs::weakly_canonical(output.path, ignored).string();
        for (const auto& [other, whose] : planned) {
            if (other == canonical) {
                throw ArgumentError(named + " is the same file as " + whose->option + " " + in_quotes(whose->path) +
                                    "; an output never overwrites another output");
            }
        }
        planned.emplace_back(canonical, &output);
    }
}

AtomicOutput::AtomicOutput(const std::string& path, TemporaryKind kind) : path_(path), target_(path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && is_written_through(info)) {
        // A device or a FIFO (through a link too: /dev/fd/N of a pipe) is written, not replaced; a FIFO
        // without a reader fails at once, never waits.
        direct_ = true;
        fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd_ < 0) {
            fail_errno(path, errno == ENXIO ? "no process reads it" : "opening it", errno);
        }
        (void)::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
        return;
    }
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        std::error_code error;
        target_ = fs::canonical(path, error).string();  // write the file the link points to; keep the link
        if (error) {
            throw ArgumentError("cannot write " + in_quotes(path) + ": it is a dangling symbolic link");
        }
    }
    if (::stat(target_.c_str(), &info) == 0) {
        if (const std::string problem = not_regular(info); !problem.empty()) {
            throw ArgumentError("cannot write " + in_quotes(path) + ": it " + problem);
        }
    }
    remove_stale_temporaries(target_, host_name());
    try {
        if (kind == TemporaryKind::shared || !create_unnamed()) {
            create_named();
        }
    } catch (...) {
        close_descriptor();  // no destructor runs for an object whose constructor throws
        throw;
    }
}

bool AtomicOutput::create_unnamed() {
#ifdef O_TMPFILE
    const int fd = ::open(folder_of(target_).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) {
        return false;  // no unnamed files on this file system (or the folder's problem, which create_named reports)
    }
    std::string by_path = "/proc/self/fd/" + std::to_string(fd);
    if (::access(by_path.c_str(), W_OK) != 0) {  // no /proc: a library could not write it by path
        ::close(fd);
        return false;
    }
    hold_liveness_lock(fd);
    fd_ = fd;
    temporary_ = std::move(by_path);
    unnamed_ = true;
    return true;
#else
    return false;
#endif
}

namespace {

// Gives a file a new temporary name beside `target` (".NAME.gridshard-tmp-HOST-PID-N"): `make(name)` creates it
// under that name, returning false with errno set when it cannot; a name taken (a dead process's, PID being this
// process's own) moves on to the next. The name is registered for removal on a signal before it exists, so that no
// signal finds it unregistered. Returns the name and its registration; fails as fail_errno does, naming `doing`.
template <class Make>
std::pair<std::string, RemovedOnSignal> named_temporary(const std::string& path, const fs::path& target,
                                                        const char* doing, Make make) {
    static std::atomic<unsigned> counter{0};
    const std::string& host = host_name();
    for (int attempt = 0;; ++attempt) {
        std::string name = (folder_of(target) / ("." + target.filename().string() + temporary_marker + host + "-" +
                                                 std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                               .string();
        RemovedOnSignal registered(name);
        if (make(name)) {
            return {std::move(name), std::move(registered)};
        }
        if (errno != EEXIST || attempt == 100) {
            fail_errno(path, std::string(doing) + " in folder " + in_quotes(folder_of(target).string()), errno);
        }
    }
}

}  // namespace

void AtomicOutput::create_named() {
    // Where unnamed files exist, the file is made and locked first and then named: no instant in which it has a
    // name and no liveness lock.
    const bool locked_first = create_unnamed();
    const std::string unnamed = temporary_;
    auto [name, registered] =
        named_temporary(path_, fs::path(target_), "cannot create a file", [&](const std::string& candidate) {
            if (locked_first) {
                return ::linkat(AT_FDCWD, unnamed.c_str(), AT_FDCWD, candidate.c_str(), AT_SYMLINK_FOLLOW) == 0;
            }
            fd_ = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            return fd_ >= 0;
        });
    if (!locked_first) {
        hold_liveness_lock(fd_);
    }
    temporary_ = std::move(name);
    removed_on_signal_ = std::move(registered);
    unnamed_ = false;
}

AtomicOutput::~AtomicOutput() {
    if (!committed_ && !temporary_.empty() && !unnamed_) {
        ::unlink(temporary_.c_str());  // before the descriptor (and its liveness lock) goes
    }
    close_descriptor();  // an unnamed temporary goes with its last descriptor
}

AtomicOutput::AtomicOutput(AtomicOutput&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temporary_(std::exchange(other.temporary_, {})),
      removed_on_signal_(std::move(other.removed_on_signal_)),
      fd_(std::exchange(other.fd_, -1)),
      direct_(other.direct_),
      unnamed_(other.unnamed_),
      direct_bytes_(std::move(other.direct_bytes_)),
      committed_(other.committed_) {}

void AtomicOutput::close_descriptor() noexcept {
    if (fd_ >= 0) {
        ::close(std::exchange(fd_, -1));
    }
}

void AtomicOutput::write(std::string_view bytes) {
    if (direct_) {
        direct_bytes_.append(bytes);  // written by publish(), once every output of the run is complete
        return;
    }
    write_all(fd_, bytes, path_);
}

void AtomicOutput::flush() {
    if (direct_) {
        return;  // nothing is written before publish()
    }
    // The replacement keeps the old file's permissions, given only now: a read-only target must not make
    // the temporary unwritable to a library that writes it by path.
    struct stat info {};
    if (::stat(target_.c_str(), &info) == 0) {
        (void)::fchmod(fd_, info.st_mode & 07777);
    }
    // fsync flushes the file whichever descriptor wrote it (this one, or a library's by path). The descriptor stays
    // open until publish(): it holds the liveness lock, and an unnamed temporary's very existence.
    if (::fsync(fd_) != 0) {
        throw SystemError("cannot write " + in_quotes(path_) + ": flushing to disk: " + std::strerror(errno));
    }
}

void AtomicOutput::commit() {
    flush();
    publish();
}

void AtomicOutput::publish() {
    if (direct_) {
        write_all(fd_, direct_bytes_, path_);
        committed_ = true;
        close_descriptor();
        return;
    }
    if (unnamed_) {
        // Named only now, for the rename: linked beside the target (still locked), then renamed over it.
        auto [name, registered] =
            named_temporary(path_, fs::path(target_), "linking the temporary file", [&](const std::string& candidate) {
                return ::linkat(AT_FDCWD, temporary_.c_str(), AT_FDCWD, candidate.c_str(), AT_SYMLINK_FOLLOW) == 0;
            });
        temporary_ = std::move(name);
        removed_on_signal_ = std::move(registered);
        unnamed_ = false;  // from here on a named temporary: removed by the destructor unless renamed
    }
    if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
        fail_errno(path_, "renaming the temporary file into place", errno);
    }
    committed_ = true;
    removed_on_signal_.release();
    close_descriptor();
    const int folder = ::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder >= 0) {
        (void)::fsync(folder);  // makes the rename durable; file systems that cannot are no failure
        ::close(folder);
    }
}

void write_outputs_atomically(const std::vector<OutputJob>& jobs) {
    std::vector<AtomicOutput> outputs;
    outputs.reserve(jobs.size());
    for (const OutputJob& job : jobs) {
        outputs.emplace_back(job.path);
        job.fill(outputs.back());
    }
    for (AtomicOutput& output : outputs) {
        output.flush();
    }
    for (AtomicOutput& output : outputs) {
        output.publish();
    }
}

}  // namespace gridshard::io
