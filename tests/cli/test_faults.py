"""Faults a careless operator or a damaged file system produces, each class with generated files.

Every case checks the exit status (2 bad input or arguments, 1 a failure of the system), that the message
is one line naming the problem, that no output or temporary is left behind, and that every input is
byte-identical afterwards (by checksum). Valid but awkward data (valid_range, double precision, units
spelled two ways, times in other units) must instead give the answer float64 numpy gives.
"""
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import netCDF4
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import make_files  # noqa: E402
from make_files import write_grid_file  # noqa: E402

QUIET = ["--quiet"]


def checksums(paths):
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def leftovers(folder, names):
    """Outputs or their temporaries (".NAME.gridshard-tmp-...", before ".NAME.tmp-...") present in `folder`."""
    return [p.name for p in Path(folder).iterdir()
            if any(p.name == n or p.name.startswith("." + n + ".") for n in names)]


def temporaries(folder):
    """The temporaries of outputs in `folder` (hidden files whose name says so)."""
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith(".") and "tmp" in p.name)


def expect_failure(result, needle, *, status=2, folder=None, outputs=(), inputs=None, before=None):
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    message = result.stderr.strip()
    assert message.count("gridshard: error") == 1, message
    assert len(message.splitlines()) == 1, message
    assert needle in message, message
    if folder is not None:
        assert leftovers(folder, [Path(o).name for o in outputs]) == [], os.listdir(folder)
    if inputs is not None:
        assert checksums(inputs) == before


def write_pair(folder, shape, *, fmt="NETCDF3_64BIT_OFFSET", seed=0):
    """Truth and prediction files t.nc and p.nc of random float32 fields of `shape` (time, lat, lon)."""
    rng = np.random.default_rng(seed)
    truth, pred = Path(folder) / "t.nc", Path(folder) / "p.nc"
    write_grid_file(truth, rng.normal(280, 5, shape).astype("f4"), fmt=fmt)
    write_grid_file(pred, rng.normal(280, 5, shape).astype("f4"), fmt=fmt)
    return truth, pred


def mpi_command(ranks, *args):
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    flags = os.environ.get("MPIEXEC_FLAGS", "").split()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return [launcher, "-n", str(ranks), *flags, *map(str, args)], env


def weighted(values, lat):
    """cos-lat weights, normalised over the valid points: numpy's weighted mean of each step (float64)."""
    w = np.broadcast_to(np.cos(np.deg2rad(lat))[None, :, None], values.shape)
    valid = np.isfinite(values)
    return np.array([(np.where(valid[s], values[s], 0) * w[s]).sum() / np.where(valid[s], w[s], 0).sum()
                     for s in range(values.shape[0])])


@pytest.fixture
def pair(tmp_path):
    truth, pred = tmp_path / "truth.nc", tmp_path / "pred.nc"
    make_files.write(truth, 23, 40, 2, seed=1, with_levels=False)
    make_files.write(pred, 23, 40, 2, seed=2, shift=0.2, with_levels=False)
    return truth, pred


# ------------------------------------------------------------ 1. outputs never touch inputs

def test_an_output_naming_an_input_by_any_path_is_refused(tmp_path, run, pair):
    truth, pred = pair
    before = checksums([truth, pred])
    (tmp_path / "sub").mkdir()
    os.symlink(truth, tmp_path / "link.nc")
    os.link(pred, tmp_path / "hard.nc")
    spellings = [
        ("--json", truth), ("--zonal", pred), ("--json", tmp_path / "sub" / ".." / "truth.nc"),
        ("--zonal", tmp_path / "link.nc"), ("--json", tmp_path / "hard.nc"),
    ]
    for option, path in spellings:
        result = run("eval", "--truth", truth, "--pred", pred, option, path, *QUIET)
        expect_failure(result, "is the same file as", inputs=[truth, pred], before=before)
        assert not leftovers(tmp_path, [".truth.nc", ".pred.nc", ".hard.nc"])
    assert os.path.islink(tmp_path / "link.nc") and os.stat(tmp_path / "hard.nc").st_nlink == 2


def test_two_outputs_naming_one_file_are_refused(tmp_path, run, pair):
    truth, pred = pair
    before = checksums([truth, pred])
    out = tmp_path / "out.json"
    out.write_text("previous\n")
    os.symlink(out, tmp_path / "alias.json")
    for first, second in [(out, tmp_path / "alias.json"), (tmp_path / "new.nc", tmp_path / "." / "new.nc")]:
        result = run("eval", "--truth", truth, "--pred", pred, "--json", first, "--zonal", second, *QUIET)
        expect_failure(result, "is the same file as", inputs=[truth, pred], before=before)
    assert out.read_text() == "previous\n" and not (tmp_path / "new.nc").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_netcdf_output_naming_a_device_is_refused_and_the_device_kept(tmp_path, run):
    device = tmp_path / "null_copy"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
    result = run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--zonal", device, *QUIET)
    expect_failure(result, "is not a regular file (a character device)")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["null_copy"]


def test_json_to_a_character_device_or_a_fifo_is_written_through(tmp_path, run, mpirun, gridshard_bin):
    # /dev/null discards the report; the device is neither refused nor replaced, and nothing is left beside it.
    for r in (run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", "/dev/null", *QUIET),
              mpirun(2, "eval", "--initial-conditions", 2, "--ensemble-size", 2, "--nlat", 10, "--nlon", 12,
                     "--ntime", 2, "--io", "collective", "--json", "/dev/null", *QUIET),
              mpirun(2, "eval", "--initial-conditions", 2, "--ensemble-size", 2, "--nlat", 10, "--nlon", 12,
                     "--ntime", 2, "--io", "independent", "--json", "/dev/null", *QUIET)):
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]
    # A FIFO with a reader gets the report; without one the run fails at once rather than waiting.
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    r = run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", fifo, *QUIET)
    assert r.returncode == 0, r.stderr
    assert json.loads(reader.communicate(timeout=30)[0])["ntime"] == 1
    expect_failure(run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", fifo, *QUIET, timeout=30),
                   "no process reads it")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["report.fifo"]
    # The shell's process substitution: /dev/fd/N, a link to a pipe.
    piped = tmp_path / "piped.json"
    r = subprocess.run(["bash", "-c", '"$0" eval --nlat 10 --nlon 12 --ntime 1 --quiet --json >(cat > "$1"); wait $!',
                        gridshard_bin, str(piped)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(piped.read_text())["ntime"] == 1


def test_an_output_that_is_a_directory_or_in_no_folder_is_refused(tmp_path, run):
    (tmp_path / "folder.json").mkdir()
    expect_failure(run("eval", "--nlat", 10, "--nlon", 12, "--json", tmp_path / "folder.json", *QUIET),
                   "is a directory", folder=tmp_path, outputs=["x"])
    expect_failure(run("eval", "--nlat", 10, "--nlon", 12, "--zonal", tmp_path / "none" / "z.nc", *QUIET),
                   "does not exist")
    assert os.listdir(tmp_path) == ["folder.json"]


def test_a_symlinked_output_is_written_through_and_kept_a_link(tmp_path, run):
    target = tmp_path / "real.json"
    target.write_text("old")
    os.symlink(target, tmp_path / "link.json")
    result = run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", tmp_path / "link.json", *QUIET)
    assert result.returncode == 0, result.stderr
    assert os.path.islink(tmp_path / "link.json")
    assert json.loads(target.read_text())["ntime"] == 1
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
@contextlib.contextmanager
def full_disk(tmp_path):
    """A 64 KiB tmpfs at tmp_path/disk for the body of the `with` (the test is skipped where none can be mounted)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)])


def test_a_full_disk_is_a_system_failure_and_leaves_the_old_output(tmp_path, run):
    with full_disk(tmp_path) as disk:
        old = disk / "z.nc"
        old.write_bytes(b"old output")
        result = run("eval", "--nlat", 361, "--nlon", 24, "--ntime", 8, "--zonal", old, *QUIET)  # ~140 KB
        expect_failure(result, "No space left on device", status=1, folder=disk, outputs=[])
        assert old.read_bytes() == b"old output"
        assert os.listdir(disk) == ["z.nc"]


# ------------------------------------------------------------ 2. truncated or damaged data

FORMATS = ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA", "NETCDF4"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fraction", [0.5, 0.99])
def test_a_file_cut_short_is_refused(tmp_path, run, fmt, fraction):
    truth, pred = write_pair(tmp_path, (6, 16, 32), fmt=fmt, seed=3)
    cut = tmp_path / "cut.nc"
    data = truth.read_bytes()
    cut.write_bytes(data[: int(len(data) * fraction)])
    before = checksums([cut, pred])
    out = tmp_path / "out.json"
    result = run("eval", "--truth", cut, "--pred", pred, "--json", out, *QUIET)
    expect_failure(result, "cut.nc", folder=tmp_path, outputs=["out.json"], inputs=[cut, pred], before=before)
    assert "truncated" in result.stderr or fmt == "NETCDF4", result.stderr


def run_and_truncate(command, victim, env=None, delay=0.0):
    """Starts `command`, waits until some process of it holds `victim` open, lets it run `delay` seconds
    more (into its reads), stops it, truncates `victim` to half, lets it go on and returns
    (returncode, stderr). Wherever the cut lands, the run must fail."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    victim = str(Path(victim).resolve())
    deadline = time.monotonic() + 60

    def holders():
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") == victim for fd in os.listdir(f"/proc/{pid}/fd")):
                    found.append(int(pid))
            except OSError:
                continue
        return found

    stopped = []
    while time.monotonic() < deadline and process.poll() is None:
        pids = holders()
        if pids:
            time.sleep(delay)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            stopped = pids
            break
        time.sleep(0.0005)
    assert stopped, "the run never opened " + victim
    size = os.path.getsize(victim)
    os.truncate(victim, size // 2)
    for pid in stopped:
        os.kill(pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


@pytest.mark.parametrize("fmt", ["NETCDF3_64BIT_OFFSET", "NETCDF4"])
def test_a_file_truncated_during_the_run_is_an_error(tmp_path, gridshard_bin, fmt):
    truth, pred = write_pair(tmp_path, (1000, 46, 90), fmt=fmt, seed=4)
    out = tmp_path / "out.json"
    # 20 ms after the file is opened the run is reading steps (it reads for ~0.3 s on an idle machine; a
    # loaded one is slower, so the cut lands earlier, never after the last read).
    status, stderr = run_and_truncate([gridshard_bin, "eval", "--truth", truth, "--pred", pred, "--json", out,
                                       *QUIET], truth, delay=0.02)
    assert status == 2, stderr
    assert stderr.count("gridshard: error") == 1 and "t.nc" in stderr, stderr
    if fmt != "NETCDF4":
        assert "truncated" in stderr, stderr
    assert leftovers(tmp_path, ["out.json"]) == []


def test_a_file_truncated_under_mpi_stops_every_rank(tmp_path, gridshard_bin):
    truth, pred = write_pair(tmp_path, (400, 46, 90), seed=5)
    out = tmp_path / "out.json"
    command, env = mpi_command(2, gridshard_bin, "eval", "--truth", truth, "--pred", pred, "--mesh", "1x2x1",
                               "--json", out, *QUIET)
    status, stderr = run_and_truncate(command, truth, env=env)
    assert status == 2, stderr
    assert stderr.count("gridshard: error") == 1 and "truncated" in stderr, stderr
    assert leftovers(tmp_path, ["out.json"]) == []


def test_a_rank_killed_mid_run_ends_every_rank_and_writes_nothing(tmp_path, gridshard_bin):
    truth, pred = write_pair(tmp_path, (200, 91, 180), seed=6)
    before = checksums([truth, pred])
    out = tmp_path / "out.json"
    command, env = mpi_command(2, gridshard_bin, "eval", "--truth", truth, "--pred", pred, "--mesh", "1x1x2",
                               "--json", out, *QUIET)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    marker = str(out)

    def ranks():
        found = []
        for pid in os.listdir("/proc"):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline and cmdline[0].endswith(b"gridshard") and marker.encode() in cmdline:
                found.append(int(pid))
        return found

    deadline = time.monotonic() + 60
    while len(ranks()) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    victims = ranks()
    assert len(victims) == 2, "the ranks never started"
    time.sleep(0.2)
    os.kill(victims[-1], signal.SIGKILL)
    killed = time.monotonic()
    process.communicate(timeout=60)
    while ranks() and time.monotonic() - killed < 10:
        time.sleep(0.05)
    assert ranks() == [], "ranks outlived the killed one by more than 10 s"
    assert time.monotonic() - killed < 10
    assert process.returncode != 0
    assert leftovers(tmp_path, ["out.json"]) == []
    assert checksums([truth, pred]) == before


def rank_pids(marker):
    """{world rank: pid} of the gridshard processes with `marker` among their arguments."""
    found = {}
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not (cmdline and cmdline[0].endswith(b"gridshard") and marker.encode() in cmdline):
                continue
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ranks = [int(e.split(b"=", 1)[1]) for e in environ if e.startswith(b"OMPI_COMM_WORLD_RANK=")]
        found[ranks[0] if ranks else 0] = int(pid)
    return found


def holds_open(pid, needle, suffix=True):
    """Whether process `pid` has a file open whose path contains `needle` (without `suffix`: whose name has no
    dot after it, so not the lock test Open MPI makes beside a file it opens)."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(needle in link and (suffix or "." not in link.split(needle, 1)[1]) for link in links)


def holds_temporary(pid, folder):
    """Whether process `pid` holds open a temporary of an output in `folder`: a named one, or an unnamed one (an
    O_TMPFILE file, which /proc shows as "FOLDER/#INODE (deleted)")."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    inside = [link[len(str(folder)) + 1:] for link in links if link.startswith(str(folder) + "/")]
    return any("gridshard-tmp-" in name or (name.startswith("#") and name.endswith(" (deleted)")) for name in inside)


def kill_while_writing(command, env, folder, ranks, victim, writing):
    """Starts `command` (`ranks` ranks with `folder` among their arguments), waits until `writing(pids)` says
    the outputs are being written, stops every rank, SIGKILLs world rank `victim` and returns the launcher's
    (returncode, stderr) once it has ended the job (Open MPI sends SIGCONT, SIGTERM, then SIGKILL), or None when the
    run ended before it was seen writing (on a loaded machine the poll can miss the window)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    pids = {}
    while len(pids) < ranks and time.monotonic() < deadline and process.poll() is None:
        pids = rank_pids(str(folder))
        time.sleep(0.01)
    assert len(pids) == ranks, "the ranks never started"
    stopped = False
    while time.monotonic() < deadline and process.poll() is None:
        if writing(pids):
            for pid in pids.values():
                os.kill(pid, signal.SIGSTOP)
            stopped = True
            break
        time.sleep(0.0002)
    if not stopped:  # the writes were too quick to be caught: the caller runs it again
        process.communicate(timeout=120)
        return None
    os.kill(pids[victim], signal.SIGKILL)  # the others stay stopped: the launcher wakes and ends them
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def forecast_args(folder, io):
    return ["eval", "--initial-conditions", 2, "--ensemble-size", 2, "--nlat", 91, "--nlon", 180, "--ntime", 3,
            "--mesh", "1x1x2", "--io", io, "--diagnostics", folder, "--json", folder / "report.json", *QUIET]


FORECAST_OUTPUTS = ["mean_diagnostics.nc", "zonal_mean_diagnostics.nc", "time_mean_diagnostics.nc", "report.json"]


def check_kill_while_writing(tmp_path, gridshard_bin, io, victim):
    """A rank killed while the outputs are written: the previous outputs stay (or, from a rank 0 that writes alone
    and outlives the other, are complete), and no temporary survives. The rank killed (not ended by the launcher)
    cannot remove its own: with --io collective the others, which know every shared temporary, remove them when the
    launcher ends them; with --io independent rank 0's temporaries are unnamed, and go with it however it ends."""
    folder = tmp_path / "out"
    folder.mkdir()
    command, env = mpi_command(2, gridshard_bin, *forecast_args(folder, io))
    if io == "collective":  # every rank has the time-mean file open: every temporary is known to every rank
        def writing(pids):
            return holds_open(pids[1], ".time_mean_diagnostics.nc.gridshard-tmp-", suffix=False)
    else:
        def writing(pids):
            return holds_temporary(pids[0], folder)
    for _ in range(8):  # until a run is caught writing; each try starts from the old outputs
        for name in FORECAST_OUTPUTS:
            (folder / name).write_text("old " + name)
        caught = kill_while_writing(command, env, folder, 2, victim, writing)
        if caught is not None:
            break
    assert caught is not None, "eight runs ended before any was seen writing its outputs"
    status, stderr = caught
    assert status != 0, stderr
    for name in FORECAST_OUTPUTS:
        # As they were; only a rank 0 that writes alone and is not the one killed may finish them first.
        data = (folder / name).read_bytes()
        assert data == b"old " + name.encode() or (io == "independent" and victim != 0), (name, data[:20])
        assert data == b"old " + name.encode() or data[:3] in (b"CDF", b'{"g'), (name, data[:20])
    assert temporaries(folder) == [], temporaries(folder)
    assert sorted(os.listdir(folder)) == sorted(FORECAST_OUTPUTS)


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_while_writing_leaves_no_temporary(tmp_path, gridshard_bin, victim):
    check_kill_while_writing(tmp_path, gridshard_bin, "independent", victim)


def test_a_run_ended_by_a_signal_removes_its_temporaries(tmp_path, gridshard_bin):
    folder = tmp_path / "out"
    folder.mkdir()
    args = ["eval", "--initial-conditions", 2, "--ensemble-size", 2, "--nlat", 181, "--nlon", 360, "--ntime", 3,
            "--diagnostics", folder, *QUIET]
    process = subprocess.Popen([gridshard_bin, *map(str, args)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not holds_temporary(process.pid, folder) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.0002)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGTERM  # ended by the signal, as without a handler
    assert os.listdir(folder) == []


def test_a_later_run_removes_only_dead_processes_temporaries(tmp_path, run):
    out = tmp_path / "out.json"
    host = os.uname().nodename
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [f".out.json.gridshard-tmp-{host}-{dead.pid}-0", f".out.json.gridshard-tmp-{host}-{dead.pid}-3"]
    live = [f".out.json.gridshard-tmp-{host}-{os.getpid()}-0",  # a process alive on this host
            f".out.json.gridshard-tmp-elsewhere-{dead.pid}-0",  # another host's, recent
            f".other.json.gridshard-tmp-{host}-{dead.pid}-0"]  # another target's
    for name in stale + live:
        (tmp_path / name).write_text("")
    old = tmp_path / ".out.json.gridshard-tmp-elsewhere-1-0"  # another host's, untouched for two days
    old.write_text("")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    stale.append(old.name)
    # Named for a dead process of this host, and for one untouched for two days, but each held by a live writer
    # (a container sharing this host's name): its liveness lock, one byte at 2^62, keeps it.
    locked = [f".out.json.gridshard-tmp-{host}-{dead.pid}-7", ".out.json.gridshard-tmp-elsewhere-1-7"]
    holders = []
    for name in locked:
        holder = open(tmp_path / name, "w")
        fcntl.fcntl(holder, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 1 << 62, 1, 0))
        holders.append(holder)
    os.utime(tmp_path / locked[1], (time.time() - 2 * 86400,) * 2)
    r = run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", out, *QUIET)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(live + locked + ["out.json"])
    for holder in holders:  # the writers end: the next run removes what they left
        holder.close()
    r = run("eval", "--nlat", 10, "--nlon", 12, "--ntime", 1, "--json", out, *QUIET)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(live + ["out.json"])


# ------------------------------------------------------------ 3. CF decoding

def test_values_outside_the_valid_range_are_missing(tmp_path, run):
    rng = np.random.default_rng(7)
    t = rng.normal(280, 5, (3, 18, 36))
    p = t + rng.normal(0.5, 1, t.shape)
    for a in (t, p):
        a[:, 2:5, 3:9] = -999.0  # outside the valid range, and no _FillValue says so
    cases = [{"valid_range": np.array([150.0, 350.0], "f4")},
             {"valid_min": np.float32(150.0)},
             {"valid_min": np.float32(150.0), "valid_max": np.float32(350.0)}]
    for attributes in cases:
        lat = write_grid_file(tmp_path / "t.nc", t.astype("f4"), attributes=attributes)
        write_grid_file(tmp_path / "p.nc", p.astype("f4"), attributes=attributes)
        out = tmp_path / "out.json"
        result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", out, *QUIET)
        assert result.returncode == 0, result.stderr
        scores = json.loads(out.read_text())["variables"]["v"]["per_time"]
        masked_t = np.where(t.astype("f4") < 150, np.nan, t.astype("f4").astype("f8"))
        masked_p = np.where(p.astype("f4") < 150, np.nan, p.astype("f4").astype("f8"))
        np.testing.assert_allclose(scores["mean_truth"], weighted(masked_t, lat), rtol=1e-12)
        np.testing.assert_allclose(scores["bias"], weighted(masked_p - masked_t, lat), rtol=1e-10)


def test_valid_range_applies_to_packed_values_before_unpacking(tmp_path, run):
    rng = np.random.default_rng(8)
    packed = rng.integers(-2000, 2000, (2, 12, 24)).astype("i2")
    packed[:, 0, :5] = 30000  # outside valid_range in the packed type
    attributes = {"scale_factor": 0.01, "add_offset": 280.0, "valid_range": np.array([-3000, 3000], "i2")}
    lat = write_grid_file(tmp_path / "t.nc", packed, dtype="i2", attributes=attributes)
    write_grid_file(tmp_path / "p.nc", packed, dtype="i2", attributes=attributes)
    out = tmp_path / "out.json"
    result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", out, *QUIET)
    assert result.returncode == 0, result.stderr
    unpacked = np.where(packed > 3000, np.nan, packed * 0.01 + 280.0)
    mean = json.loads(out.read_text())["variables"]["v"]["per_time"]["mean_truth"]
    np.testing.assert_allclose(mean, weighted(unpacked, lat), rtol=1e-13)


def test_a_curvilinear_grid_with_index_axes_is_refused(tmp_path, run):
    for path in [tmp_path / "t.nc", tmp_path / "p.nc"]:
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", 2)
            ds.createDimension("y", 40)
            ds.createDimension("x", 50)
            y = ds.createVariable("y", "f8", ("y",))
            y.axis = "Y"
            y[:] = np.arange(40)
            x = ds.createVariable("x", "f8", ("x",))
            x.axis = "X"
            x[:] = np.arange(50)
            la = ds.createVariable("lat2d", "f8", ("y", "x"))
            la.standard_name, la.units = "latitude", "degrees_north"
            la[:] = np.linspace(20, 60, 40)[:, None] + np.zeros(50)
            lo = ds.createVariable("lon2d", "f8", ("y", "x"))
            lo.standard_name, lo.units = "longitude", "degrees_east"
            lo[:] = np.linspace(-30, 30, 50)[None, :] + np.zeros((40, 1))
            v = ds.createVariable("v", "f4", ("time", "y", "x"))
            v.coordinates = "lat2d lon2d"
            v[:] = 1.0
    before = checksums([tmp_path / "t.nc", tmp_path / "p.nc"])
    result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", *QUIET)
    expect_failure(result, "curvilinear", inputs=[tmp_path / "t.nc", tmp_path / "p.nc"], before=before)
    assert "lat2d" in result.stderr


def test_different_units_are_refused_and_equal_ones_in_other_spelling_accepted(tmp_path, run):
    values = np.random.default_rng(9).normal(5, 1, (2, 10, 20))
    write_grid_file(tmp_path / "t.nc", values, units="K")
    write_grid_file(tmp_path / "p.nc", values, units="degC")
    inputs = [tmp_path / "t.nc", tmp_path / "p.nc"]
    before = checksums(inputs)
    result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", tmp_path / "o.json",
                 *QUIET)
    expect_failure(result, "units 'K'", folder=tmp_path, outputs=["o.json"], inputs=inputs, before=before)
    assert "'degC'" in result.stderr
    write_grid_file(tmp_path / "t.nc", values, units="m/s")
    write_grid_file(tmp_path / "p.nc", values, units="m s-1")
    assert run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", *QUIET).returncode == 0


def test_times_are_compared_after_converting_their_units(tmp_path, run):
    values = np.random.default_rng(10).normal(5, 1, (3, 10, 20))
    t, p = tmp_path / "t.nc", tmp_path / "p.nc"
    write_grid_file(t, values, time_units="hours since 2000-01-01", times=[0, 6, 12])
    write_grid_file(p, values, time_units="days since 2000-01-01", times=[0, 0.25, 0.5])
    assert run("eval", "--truth", t, "--pred", p, *QUIET).returncode == 0
    write_grid_file(p, values, time_units="days since 2000-01-01", times=[0, 0.25, 0.75])
    before = checksums([t, p])
    expect_failure(run("eval", "--truth", t, "--pred", p, "--zonal", tmp_path / "z.nc", *QUIET),
                   "times differ at step 2", folder=tmp_path, outputs=["z.nc"], inputs=[t, p], before=before)
    assert run("eval", "--truth", t, "--pred", p, "--allow-time-mismatch", *QUIET).returncode == 0
    write_grid_file(p, values, time_units="hours since 2000-01-01", times=[0, 6, 12], calendar="noleap")
    expect_failure(run("eval", "--truth", t, "--pred", p, *QUIET), "calendars differ")


# ------------------------------------------------------------ 4. native precision

def test_double_precision_is_kept(tmp_path, run):
    rng = np.random.default_rng(11)
    truth = 1e5 + rng.normal(0, 10, (2, 16, 32))
    pred = truth + 1e-4 * (1 + rng.random(truth.shape))  # differences far below float32's resolution at 1e5
    lat = write_grid_file(tmp_path / "t.nc", truth, dtype="f8")
    write_grid_file(tmp_path / "p.nc", pred, dtype="f8")
    out = tmp_path / "out.json"
    result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", out, *QUIET)
    assert result.returncode == 0, result.stderr
    scores = json.loads(out.read_text())["variables"]["v"]["per_time"]
    np.testing.assert_allclose(scores["bias"], weighted(pred - truth, lat), rtol=1e-9)
    np.testing.assert_allclose(scores["rmse"], np.sqrt(weighted((pred - truth) ** 2, lat)), rtol=1e-9)
    np.testing.assert_allclose(scores["mean_pred"], weighted(pred, lat), rtol=1e-15)


def test_packed_shorts_with_a_double_scale_unpack_to_double(tmp_path, run):
    rng = np.random.default_rng(12)
    packed = rng.integers(-30000, 30000, (2, 12, 24)).astype("i2")
    attributes = {"scale_factor": np.float64(1e-3), "add_offset": np.float64(1e5)}
    lat = write_grid_file(tmp_path / "t.nc", packed, dtype="i2", attributes=attributes)
    write_grid_file(tmp_path / "p.nc", (packed + 1).astype("i2"), dtype="i2", attributes=attributes)
    out = tmp_path / "out.json"
    assert run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", out,
               *QUIET).returncode == 0
    bias = json.loads(out.read_text())["variables"]["v"]["per_time"]["bias"]
    t = packed * 1e-3 + 1e5
    p = (packed + 1) * 1e-3 + 1e5
    np.testing.assert_allclose(bias, weighted(p - t, lat), rtol=1e-9)


# ------------------------------------------------------------ 5. arguments and memory bounded

@pytest.mark.parametrize("args,needle", [
    (["--nlat", "99999999999999999999"], "--nlat"),
    (["--ntime", "-1"], "--ntime"),
    (["--nlon", "12abc"], "12abc"),
    (["--nlat", "200000", "--nlon", "200000", "--ntime", "4"], "not enough memory"),
    (["--vars", ","], "empty name"),
    (["--vars", "h,,t850"], "empty name"),
    (["--vars", "h,h"], "twice"),
])
def test_bad_counts_lists_and_sizes_are_refused_up_front(tmp_path, run, args, needle):
    out = tmp_path / "out.json"
    expect_failure(run("eval", *args, "--json", out, *QUIET), needle, folder=tmp_path, outputs=["out.json"])


def test_declared_dims_beyond_the_data_are_refused(tmp_path, run):
    """netCDF-4 may declare dims far larger than the data it holds: their product must not wrap."""
    path = tmp_path / "huge.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        for name, size in [("a", 6), ("b", 27), ("c", 341010727049393363), ("lat", 3), ("lon", 4)]:
            ds.createDimension(name, size)
        ds.createVariable("lat", "f8", ("lat",)).units = "degrees_north"
        ds.createVariable("lon", "f8", ("lon",)).units = "degrees_east"
        ds["lat"][:] = [-60, 0, 60]
        ds["lon"][:] = [0, 90, 180, 270]
        ds.createVariable("v", "f4", ("a", "b", "c", "lat", "lon"), chunksizes=(1, 1, 1, 3, 4))
    before = checksums([path])
    expect_failure(run("eval", "--truth", path, "--pred", path, "--vars", "v", *QUIET), "overflows 64 bits",
                   inputs=[path], before=before)


def test_fields_without_a_time_dim_are_left_out_or_refused_when_named(tmp_path, run):
    values = np.random.default_rng(13).normal(5, 1, (3, 10, 20))
    for name in ["t.nc", "p.nc"]:
        write_grid_file(tmp_path / name, values)
        with netCDF4.Dataset(tmp_path / name, "a") as ds:
            ds.createVariable("lsm", "f4", ("lat", "lon"))[:] = 1.0
    out = tmp_path / "out.json"
    result = run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--json", out, *QUIET)
    assert result.returncode == 0, result.stderr
    assert list(json.loads(out.read_text())["variables"]) == ["v"]
    expect_failure(run("eval", "--truth", tmp_path / "t.nc", "--pred", tmp_path / "p.nc", "--vars", "v,lsm", *QUIET),
                   "'lsm'")


def test_decompose_refuses_an_overflowing_count(run):
    expect_failure(run("decompose", "--nlat", "18446744073709551617", "--nlon", 4), "--nlat")


def test_a_fifo_input_is_refused_at_once(tmp_path, run, pair):
    _, pred = pair
    fifo = tmp_path / "truth.fifo"
    os.mkfifo(fifo)
    before = checksums([pred])
    start = time.monotonic()
    result = run("eval", "--truth", fifo, "--pred", pred, "--json", tmp_path / "o.json", *QUIET, timeout=30)
    expect_failure(result, "is not a regular file (a FIFO)", folder=tmp_path, outputs=["o.json"], inputs=[pred],
                   before=before)
    assert time.monotonic() - start < 10


# ------------------------------------------------------------ 6. one voice under MPI

def test_argument_errors_are_printed_once_under_mpi(tmp_path, mpirun):
    for args, needle in [(["eval", "--nlat", "x"], "--nlat"), (["eval", "--vars", "h,h", *QUIET], "twice"),
                         (["decompose", "--nlat", 3, "--nlon", 4, "--mesh", "1x4x1"], "nlat=3")]:
        result = mpirun(3, *args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("gridshard: error") == 1, result.stderr
        assert needle in result.stderr
