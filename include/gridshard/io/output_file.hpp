#pragma once
/// @file
/// Outputs that never touch inputs: the checks every output path passes before any work, and the one
/// atomic writer every output goes through (a temporary beside the target, fsync, rename). No MPI calls.
///
/// A temporary is an unnamed file in the target's folder (Linux's O_TMPFILE, written by path through
/// `/proc/self/fd/N`), which the kernel removes when its writer ends, however it ends (SIGKILL included); it is
/// named only for the instant between linking it beside the target and renaming it over the target. Where the
/// file system has no unnamed files, and for a temporary other processes must open (a collective write), it is
/// named `.NAME.gridshard-tmp-HOST-PID-N` beside NAME. A process ended by a signal (SIGTERM, SIGINT, SIGHUP,
/// SIGQUIT, SIGXCPU: how mpirun, srun and a user end a job) removes the named temporaries it knows of
/// (RemovedOnSignal); one killed outright (SIGKILL) cannot, and the next AtomicOutput of the same target removes
/// them. Every temporary's writer holds an open-file-description lock on it (one byte far past its end) while it
/// lives, which the kernel drops when the writer ends: a temporary whose lock is held is never removed, whatever
/// its host name says (containers that share one, ranks of other nodes on a shared file system); one without a
/// held lock is removed when it is of this host and its process is gone, or untouched for a day.
///
/// @code
///   void save(const std::string& truth, const std::string& pred, const std::string& json, const std::string& text) {
///       gridshard::io::check_output_paths({{"--truth", truth}, {"--pred", pred}}, {{"--json", json}});
///       gridshard::io::AtomicOutput out(json);   // creates a temporary beside the target
///       out.write(text);                         // or write the file at out.temporary_path() with a library
///       out.commit();                            // fsync, rename over the target, fsync the folder
///   }
/// @endcode

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gridshard::io {

/// A path the user named, with the option that named it (for messages), e.g. {"--json", "out.json"}.
struct NamedPath {
    std::string option;
    std::string path;
    /// An output written as a stream of bytes (a report), which may also be a character device or a FIFO
    /// (`--json /dev/null`): written through, never replaced. A netCDF output must be a regular file.
    bool stream = false;
};

/// Refuses, with ArgumentError naming the options and paths, an output that:
/// - is the same file as an input, by device and inode (so another spelling, a symlink or a hard link
///   is caught), or the same file as another output;
/// - exists and is not a regular file (a directory, a device, a FIFO, a socket; a stream output may be a
///   character device or a FIFO), or is a dangling symbolic link;
/// - lies in a folder that does not exist.
/// Inputs that do not exist are skipped here (the reader refuses them, and anything but a regular file).
/// Empty paths are skipped. No MPI calls.
void check_output_paths(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

/// A file removed if a signal ends the process (the signals above) while this object lives; the handler is
/// async-signal-safe (a fixed table of paths, then the signal's previous action: a program's own handler is
/// called, the default one ends the process as it would have). Move-only; no MPI calls.
class RemovedOnSignal {
  public:
    RemovedOnSignal() = default;
    /// Registers `path` (nothing for an empty one).
    explicit RemovedOnSignal(const std::string& path);
    ~RemovedOnSignal();
    RemovedOnSignal(RemovedOnSignal&& other) noexcept;
    RemovedOnSignal& operator=(RemovedOnSignal&& other) noexcept;
    RemovedOnSignal(const RemovedOnSignal&) = delete;
    RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;

    /// Forgets the path: a signal no longer removes it.
    void release() noexcept;

  private:
    int slot_ = -1;
};

/// Whether a temporary may be unnamed (private to this process) or must have a name other processes open.
enum class TemporaryKind {
    /// Unnamed where the file system allows (it cannot outlive the process), named otherwise.
    unnamed_if_possible,
    /// Named: other processes (the ranks of a collective write) open it by its path.
    shared,
};

/// An output under construction: a new temporary file in the target's folder (the folder of the file a
/// symlink target points to, so the link is kept), removed by the destructor, or by a signal that ends the
/// process, unless commit() has renamed it over the target. A target that is a character device or a FIFO
/// (`/dev/null`) is written directly instead, the bytes kept until publish(); a FIFO must have a reader.
/// Creating it fails with ArgumentError when the folder is missing or not writable, or the target is a
/// directory; writing and committing fail with SystemError when the system does (a full disk, an I/O error).
/// Move-only; no MPI calls.
class AtomicOutput {
  public:
    explicit AtomicOutput(const std::string& path, TemporaryKind kind = TemporaryKind::unnamed_if_possible);
    ~AtomicOutput();
    AtomicOutput(AtomicOutput&& other) noexcept;
    AtomicOutput& operator=(AtomicOutput&&) = delete;
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    /// The path the user gave.
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    /// The temporary file, for a library that writes by path (netCDF); it exists, empty, from construction. For an
    /// unnamed temporary `/proc/self/fd/N`, which only this process can open. Empty for a target written directly.
    [[nodiscard]] const std::string& temporary_path() const noexcept { return temporary_; }
    /// Whether the temporary is unnamed (nothing of it is left in the folder if the process dies).
    [[nodiscard]] bool unnamed() const noexcept { return unnamed_; }
    /// Whether the target is a device or a FIFO, written directly (no temporary, no rename).
    [[nodiscard]] bool writes_directly() const noexcept { return direct_; }

    /// Appends `bytes` to the temporary file.
    void write(std::string_view bytes);

    /// Gives the temporary the target's permissions (when it exists; else those the umask leaves of 0666) and
    /// flushes it to disk (fsync): after this only the rename is left (for an unnamed temporary its link first).
    void flush();

    /// Renames the flushed temporary over the target (an unnamed one is first linked beside it) and syncs the
    /// folder (a direct target: writes the bytes).
    void publish();

    /// flush(), then publish().
    void commit();

  private:
    void close_descriptor() noexcept;
    void create_named();
    bool create_unnamed();

    std::string path_;
    std::string target_;
    std::string temporary_;
    RemovedOnSignal removed_on_signal_;
    int fd_ = -1;
    bool direct_ = false;
    bool unnamed_ = false;
    std::string direct_bytes_;  // what write() gave a direct target, written by publish()
    bool committed_ = false;
};

/// Writes several outputs as one: every temporary is written and flushed to disk first, then all are
/// renamed, so a failure in writing or flushing any leaves every target as it was. Each entry is a path
/// and a function that fills an AtomicOutput. No MPI calls.
struct OutputJob {
    std::string path;
    std::function<void(AtomicOutput&)> fill;
};
void write_outputs_atomically(const std::vector<OutputJob>& jobs);

}  // namespace gridshard::io
