"""`gridshard eval --io collective` (docs/io.md): the inputs read with collective MPI-IO (netCDF-4 through
parallel netCDF, the classic formats through PnetCDF) and the diagnostics written collectively give the same
scores, bit for bit, and the same files, byte for byte, as independent reads on one process, at odd meshes,
uneven data splits and ranks with nothing to read; and the faults of independent reads fail the same way."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import forecast_files as ff  # noqa: E402
import make_files  # noqa: E402
from test_faults import (check_kill_while_writing, full_disk, leftovers, mpi_command, run_and_truncate,  # noqa: E402
                         write_pair)

DIAGNOSTICS = ["mean_diagnostics.nc", "zonal_mean_diagnostics.nc", "time_mean_diagnostics.nc"]
# nccopy's names of the classic formats PnetCDF reads: 64-bit offset (CDF-2) and 64-bit data (CDF-5).
CLASSIC = {"NETCDF3_64BIT_OFFSET": "nc6", "NETCDF3_64BIT_DATA": "cdf5"}


def load(path):
    with open(path) as f:
        return json.load(f)


def in_format(path, fmt):
    """`path` itself for netCDF-4, else a copy in the classic format `fmt` (nccopy)."""
    if fmt == "NETCDF4":
        return path
    copy = path.with_name(path.stem + "_" + CLASSIC[fmt] + ".nc")
    subprocess.run(["nccopy", "-u", "-k", CLASSIC[fmt], str(path), str(copy)], check=True)  # -u: fixed dims
    return copy


def forecast_numbers(document):
    return {"variables": document["variables"],
            "forecast": {k: v for k, v in document["forecast"].items() if k != "data_split"}}


@pytest.fixture(scope="module")
def forecast():
    return ff.Forecast(ics=3, members=4, leads=5, nlat=13, nlon=22)


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_two_field_scores_and_zonal_file_are_the_bits_of_independent_reads(fmt, tmp_path, run, mpirun, meshes):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    make_files.write(truth, 13, 22, 7, seed=1)  # levels, a field without time, a NaN land mask
    make_files.write(pred, 13, 22, 7, seed=2, shift=0.3)
    truth, pred = in_format(truth, fmt), in_format(pred, fmt)
    r = run("eval", "--truth", truth, "--pred", pred, "--json", tmp_path / "one.json", "--zonal",
            tmp_path / "one_zonal.nc", "--quiet")
    assert r.returncode == 0, r.stderr
    want = load(tmp_path / "one.json")["variables"]
    # 7 steps over 2, 3 and 4 data ranks: uneven blocks, so some ranks read nothing in the last round.
    runs = ((1, "1x1x1", "balanced"), (4, "1x2x2", "balanced"), (6, "2x1x3", "div_up"), (3, "3x1x1", "balanced"),
            (4, "4x1x1", "balanced"))
    for ranks, mesh, split in meshes(runs):
        out, zonal = tmp_path / f"{mesh}.json", tmp_path / f"{mesh}_zonal.nc"
        r = mpirun(ranks, "eval", "--truth", truth, "--pred", pred, "--io", "collective", "--mesh", mesh,
                   "--split", split, "--json", out, "--zonal", zonal, "--quiet")
        assert r.returncode == 0, (mesh, r.stderr)
        assert load(out)["variables"] == want, mesh
        assert zonal.read_bytes() == (tmp_path / "one_zonal.nc").read_bytes(), mesh


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_64BIT_DATA"])
def test_forecast_scores_and_diagnostics_are_the_bytes_of_one_process(fmt, forecast, tmp_path, run, mpirun):
    truth, pred = tmp_path / "autoregressive_target.nc", tmp_path / "autoregressive_predictions.nc"
    ff.write_ace(forecast, truth, pred)
    truth, pred = in_format(truth, fmt), in_format(pred, fmt)
    clim = in_format(ff.write_climatology(forecast, tmp_path / "clim.nc", per_lead=True), fmt)
    mask = tmp_path / "mask.nc"
    ff.write_mask(forecast, mask)
    mask = in_format(mask, fmt)
    common = ["--truth", truth, "--pred", pred, "--climatology", clim, "--region", "tropics", "--region",
              f"land:{mask}:land_fraction", "--quiet"]
    one = tmp_path / "one"
    one.mkdir()
    r = run("eval", *common, "--diagnostics", one, "--json", one / "report.json")
    assert r.returncode == 0, r.stderr
    want = forecast_numbers(load(one / "report.json"))
    # Splits over initial conditions (3 over 2: uneven), lead times (5 over 3), members (4 over 5: one data
    # rank holds none), and spatial meshes with one-row shards.
    for ranks, mesh, split, data_split in ((4, "1x2x2", "balanced", "auto"), (4, "2x1x2", "balanced", "auto"),
                                           (3, "1x3x1", "div_up", "auto"), (3, "3x1x1", "balanced", "lead-times"),
                                           (5, "5x1x1", "balanced", "members"), (6, "2x1x3", "div_up", "members")):
        folder = tmp_path / mesh
        folder.mkdir()
        r = mpirun(ranks, "eval", *common, "--io", "collective", "--mesh", mesh, "--split", split,
                   "--data-split", data_split, "--diagnostics", folder, "--json", folder / "report.json")
        assert r.returncode == 0, (mesh, r.stderr)
        assert forecast_numbers(load(folder / "report.json")) == want, mesh
        for name in DIAGNOSTICS:
            assert (folder / name).read_bytes() == (one / name).read_bytes(), (mesh, name)


def test_builtin_forecast_diagnostics_written_collectively_are_the_same_bytes(tmp_path, run, mpirun):
    args = ["--initial-conditions", "3", "--ensemble-size", "4", "--nlat", "19", "--nlon", "36", "--ntime", "4",
            "--quiet"]
    one = tmp_path / "one"
    one.mkdir()
    assert run("eval", *args, "--diagnostics", one).returncode == 0
    for ranks, mesh in ((2, "1x1x2"), (3, "1x3x1"), (4, "2x2x1"), (6, "2x1x3")):
        folder = tmp_path / mesh
        folder.mkdir()
        r = mpirun(ranks, "eval", *args, "--io", "collective", "--mesh", mesh, "--diagnostics", folder)
        assert r.returncode == 0, (mesh, r.stderr)
        for name in DIAGNOSTICS:
            assert (folder / name).read_bytes() == (one / name).read_bytes(), (mesh, name)
        assert sorted(os.listdir(folder)) == sorted(DIAGNOSTICS)  # no temporary left


def test_auto_reads_netcdf4_collectively_and_classic_independently(tmp_path, run, mpirun):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    make_files.write(truth, 13, 22, 7, seed=1)
    make_files.write(pred, 13, 22, 7, seed=2, shift=0.3)
    classic_truth = in_format(truth, "NETCDF3_64BIT_OFFSET")
    r = run("eval", "--truth", truth, "--pred", pred, "--io", "independent", "--json", tmp_path / "one.json",
            "--quiet")
    assert r.returncode == 0, r.stderr
    want = load(tmp_path / "one.json")["variables"]
    # Open MPI names the MPI-IO component it selects for every file opened through MPI-IO.
    verbose = ("--mca", "io_base_verbose", "10")
    for truth_file, opened_by_mpi_io in ((truth, True), (classic_truth, True)):
        for ranks, mesh in ((4, "4x1x1"), (4, "1x2x2")):
            out = tmp_path / f"auto_{mesh}.json"
            r = mpirun(ranks, "eval", "--truth", truth_file, "--pred", pred, "--mesh", mesh, "--json", out,
                       "--quiet", launcher_flags=verbose)  # --io auto, the default
            assert r.returncode == 0, r.stderr
            assert load(out)["variables"] == want, (truth_file.name, mesh)
            assert ("file_select" in r.stderr) == opened_by_mpi_io, r.stderr[-2000:]
    # Both classic: nothing goes through MPI-IO.
    classic_pred = in_format(pred, "NETCDF3_64BIT_OFFSET")
    r = mpirun(4, "eval", "--truth", classic_truth, "--pred", classic_pred, "--mesh", "1x2x2", "--json",
               tmp_path / "classic.json", "--quiet", launcher_flags=verbose)
    assert r.returncode == 0 and "file_select" not in r.stderr, r.stderr[-2000:]
    assert load(tmp_path / "classic.json")["variables"] == want


# ------------------------------------------------------------------------------------------------ faults

@pytest.mark.parametrize("fmt", ["NETCDF3_64BIT_OFFSET", "NETCDF4"])
def test_a_file_cut_short_fails_on_every_rank(fmt, tmp_path, mpirun):
    truth, pred = write_pair(tmp_path, (6, 16, 32), fmt=fmt, seed=3)
    data = truth.read_bytes()
    truth.write_bytes(data[: len(data) // 2])
    r = mpirun(3, "eval", "--truth", truth, "--pred", pred, "--io", "collective", "--mesh", "1x3x1", "--json",
               tmp_path / "out.json", "--quiet")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("gridshard: error") == 1 and "t.nc" in r.stderr, r.stderr  # once, not per rank
    assert leftovers(tmp_path, ["out.json"]) == []
    if fmt != "NETCDF4":
        assert "truncated" in r.stderr, r.stderr


@pytest.mark.parametrize("fmt", ["NETCDF3_64BIT_OFFSET", "NETCDF4"])
def test_a_file_truncated_during_collective_reads_stops_every_rank(fmt, tmp_path, gridshard_bin):
    truth, pred = write_pair(tmp_path, (400, 46, 90), fmt=fmt, seed=5)
    out = tmp_path / "out.json"
    command, env = mpi_command(3, gridshard_bin, "eval", "--truth", truth, "--pred", pred, "--io", "collective",
                               "--mesh", "3x1x1", "--json", out, "--quiet")
    status, stderr = run_and_truncate(command, truth, env=env)
    assert status == 2, stderr
    assert stderr.count("gridshard: error") == 1 and "t.nc" in stderr, stderr
    if fmt != "NETCDF4":
        assert "truncated" in stderr, stderr
    assert leftovers(tmp_path, ["out.json"]) == []


def test_outputs_never_touch_inputs(forecast, tmp_path, mpirun):
    truth, pred = tmp_path / "t.nc", tmp_path / "p.nc"
    ff.write_ace(forecast, truth, pred)
    before = truth.read_bytes()
    folder = tmp_path / "diagnostics"
    folder.mkdir()
    (folder / "time_mean_diagnostics.nc").hardlink_to(truth)  # another name of the truth
    r = mpirun(2, "eval", "--truth", truth, "--pred", pred, "--io", "collective", "--diagnostics", folder,
               "--quiet")
    assert r.returncode == 2 and "is the same file as --truth" in r.stderr, r.stderr
    assert truth.read_bytes() == before


def fill_up(disk, leave):
    """Fills the file system of `disk` until at most `leave` bytes are free."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        os.write(fd, b"x" * max(free - leave, 0))
        while leave == 0:
            os.write(fd, b"x" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)


# A full disk at every stage of the writes: no room at all (the headers), room for a header but not the
# data, room for part of the maps; written collectively and from rank 0.
@pytest.mark.parametrize("io", ["collective", "independent"])
@pytest.mark.parametrize("leave", [0, 4096, None])
def test_a_full_disk_leaves_the_old_diagnostics(tmp_path, mpirun, io, leave):
    with full_disk(tmp_path) as disk:
        old = DIAGNOSTICS + ["report.json"]
        for name in old:
            (disk / name).write_bytes(b"old " + name.encode())
        if leave is not None:
            fill_up(disk, leave)
        # The maps alone are 2 x 3 variables x 91 x 180 doubles, about 790 KB.
        r = mpirun(4, "eval", "--initial-conditions", "2", "--ensemble-size", "2", "--nlat", "91", "--nlon", "180",
                   "--ntime", "3", "--io", io, "--mesh", "1x2x2", "--diagnostics", disk, "--json",
                   disk / "report.json", "--quiet")
        assert r.returncode == 1, r.stderr
        # gridshard's message, once, and none of the MPI-IO layer's (mpirun adds its own note of the status).
        assert r.stderr.count("gridshard: error") == 1, r.stderr
        assert not any(word in r.stderr for word in ("fbtl", "mca_", "vulcan", "ompio", "MPI_File")), r.stderr
        assert "diagnostics.nc" in r.stderr and "No space left on device" in r.stderr, r.stderr
        assert sorted(n for n in os.listdir(disk) if n != "filler") == sorted(old)
        for name in old:
            assert (disk / name).read_bytes() == b"old " + name.encode()


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_while_writing_collectively_leaves_no_temporary(tmp_path, gridshard_bin, victim):
    check_kill_while_writing(tmp_path, gridshard_bin, "collective", victim)


@pytest.mark.skipif(os.geteuid() != 0, reason="a private mount namespace needs root")
def test_a_rank_that_sees_another_output_folder_is_refused(tmp_path, gridshard_bin):
    """Rank 1 sees a folder of its own at the output path (a node-local /tmp; here a tmpfs in a mount namespace of
    its own): its part would go to a file rank 0 never renames, or MPI-IO would wait for it. Refused on every rank in
    one line before anything is written; the earlier outputs stay as they were."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "mean_diagnostics.nc").write_text("old")
    args = ["eval", "--initial-conditions", 2, "--ensemble-size", 2, "--nlat", 19, "--nlon", 36, "--ntime", 3,
            "--mesh", "1x1x2", "--io", "collective", "--diagnostics", folder, "--quiet"]
    command, env = mpi_command(1, gridshard_bin, *args)
    own = " ".join(["exec", gridshard_bin, *map(str, args)])
    command += [":", "-n", "1", "unshare", "-m", "--propagation", "private", "sh", "-c",
                f"mount -t tmpfs tmpfs {folder} && {own}"]
    r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    if "unshare" in r.stderr and "gridshard: error" not in r.stderr:
        pytest.skip("no mount namespaces here: " + r.stderr[-200:])
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("gridshard: error") == 1, r.stderr
    assert "rank 1 does not see the temporary" in r.stderr and "shared file system" in r.stderr, r.stderr
    assert sorted(os.listdir(folder)) == ["mean_diagnostics.nc"]
    assert (folder / "mean_diagnostics.nc").read_text() == "old"


def test_an_unknown_io_mode_is_refused(run):
    r = run("eval", "--io", "parallel", "--quiet")
    assert r.returncode == 2 and "--io" in r.stderr and "parallel" in r.stderr, r.stderr
