"""`gridshard decompose`, run as a user would: the JSON contract, the table, and exit status 2 on bad input."""
import json

import pytest


def split_sizes(n, parts, rule):
    """The docs/design.md §2 rules, written independently of the C++ code."""
    if rule == "balanced":
        q, r = divmod(n, parts)
        return [q + 1 if k < r else q for k in range(parts)]
    up = -(-n // parts)
    chunk = up if n - up * (parts - 1) > 0 else n // parts
    return [chunk] * (parts - 1) + [n - chunk * (parts - 1)]


def starts(sizes):
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return out


@pytest.mark.parametrize(
    "nlat,nlon,mesh,split",
    [
        (721, 1440, "1x2x2", "balanced"),
        (721, 1440, "1x4x1", "div_up"),
        (9, 4, "2x4x1", "div_up"),
        (3, 7, "1x4x2", "div_up"),
        (15, 10, "3x2x3", "balanced"),
        (1, 1, "1x1x1", "balanced"),
    ],
)
def test_json_matches_the_split_rules(run, nlat, nlon, mesh, split):
    result = run("decompose", "--nlat", nlat, "--nlon", nlon, "--mesh", mesh, "--split", split, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    d, h, w = map(int, mesh.split("x"))
    assert list(report)[:4] == ["mesh", "split", "grid", "ranks"]
    assert report["mesh"] == {"data": d, "lat": h, "lon": w}
    assert report["split"] == split
    assert report["grid"] == {"nlat": nlat, "nlon": nlon}
    lat_starts = starts(split_sizes(nlat, h, split))
    lon_starts = starts(split_sizes(nlon, w, split))
    assert len(report["ranks"]) == d * h * w
    covered = [[0] * nlon for _ in range(nlat)]
    for r, entry in enumerate(report["ranks"]):
        dd, i, j = r // (h * w), (r % (h * w)) // w, r % w
        assert entry["rank"] == r
        assert entry["coords"] == [dd, i, j]
        assert entry["lat"] == [lat_starts[i], lat_starts[i + 1]]
        assert entry["lon"] == [lon_starts[j], lon_starts[j + 1]]
        assert entry["shape"] == [lat_starts[i + 1] - lat_starts[i], lon_starts[j + 1] - lon_starts[j]]
        neighbours = entry["neighbours"]
        assert neighbours["lat_prev"] == (r - w if i > 0 else None)
        assert neighbours["lat_next"] == (r + w if i < h - 1 else None)
        assert neighbours["lon_prev"] == (r - 1 if j > 0 else None)
        assert neighbours["lon_next"] == (r + 1 if j < w - 1 else None)
        rows, cols = entry["shape"]
        halo_cells = sum(
            [cols if i > 0 else 0, cols if i < h - 1 else 0, rows if j > 0 else 0, rows if j < w - 1 else 0]
        )
        assert entry["halo_bytes_per_channel"] == 4 * halo_cells
        assert entry["gather_bytes_per_channel"] == 4 * rows * cols * (h * w - 1)
        if dd == 0:
            for a in range(*entry["lat"]):
                for b in range(*entry["lon"]):
                    covered[a][b] += 1
    assert all(c == 1 for row in covered for c in row)


def test_periodic_longitude_wraps_neighbours(run):
    result = run("decompose", "--nlat", 8, "--nlon", 9, "--mesh", "1x2x3", "--periodic-lon", "--json")
    report = json.loads(result.stdout)
    assert report["ranks"][0]["neighbours"]["lon_prev"] == 2
    assert report["ranks"][5]["neighbours"]["lon_next"] == 3
    assert report["ranks"][5]["neighbours"]["lat_next"] is None


def test_table_names_every_rank(run):
    result = run("decompose", "--nlat", 721, "--nlon", 1440, "--mesh", "1x2x2")
    assert result.returncode == 0, result.stderr
    assert "mesh 1x2x2" in result.stdout
    for rank_line in ("[0,0,0]", "[0,0,1]", "[0,1,0]", "[0,1,1]"):
        assert rank_line in result.stdout
    assert "[361,721)" in result.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--nlat", 10, "--nlon", 10, "--mesh", "1x2"], "1x2"),
        (["--nlat", 10, "--nlon", 10, "--mesh", "0x2x2"], "0x2x2"),
        (["--nlat", 10, "--nlon", 10, "--mesh", "axbxc"], "axbxc"),
        (["--nlat", 3, "--nlon", 10, "--mesh", "1x4x1"], "nlat=3"),
        (["--nlat", 10, "--nlon", 10, "--split", "even"], "even"),
        (["--nlat", 10, "--nlon", 10, "--frobnicate"], "frobnicate"),
        (["--nlat", "ten", "--nlon", 10], "ten"),
        (["--nlat", 0, "--nlon", 10], "nlat=0"),
        (["--nlon", 10], "nlat"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(run, args, needle):
    result = run("decompose", *args)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("gridshard: error:"), message
    assert needle in message, message
    assert result.stdout == ""


def test_unknown_subcommand_exits_2(run):
    result = run("frobnicate")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
