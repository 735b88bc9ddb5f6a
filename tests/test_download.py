"""Tests for the download stage (pipeline/download.py).

Every test runs in a temporary directory (monkeypatch.chdir), so nothing is written into the
repository. The real mirror `../shared/datasets` is only read; fake mirrors are built in
tmp_path. The network is never used: urlopen is replaced wherever the network path runs.
"""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REAL_MIRROR, needs_real_mirror
from pipeline import download
from pipeline.config import DATASETS, ConfigError, DataError

PROJECT_ROOT = Path(__file__).resolve().parents[1]

needs_mirror = needs_real_mirror("planetoid", "ind.cora.x")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh working directory with no mirror configured."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    return tmp_path


@pytest.fixture
def cora_rows():
    return download.files_for("cora")


def make_fake_mirror(root: Path, rows: list[dict], alter: dict | None = None) -> Path:
    """A mirror holding `rows` from the real mirror; `alter` maps file name -> new bytes."""
    alter = alter or {}
    (root / "planetoid").mkdir(parents=True)
    for row in rows:
        data = alter.get(row["file"], (REAL_MIRROR / row["source"] / row["file"]).read_bytes())
        (root / row["source"] / row["file"]).write_bytes(data)
    return root


def leftovers(directory: Path) -> list[str]:
    """Temp files (hidden .<name>... files) left in a directory."""
    if not directory.exists():
        return []
    return [p.name for p in directory.iterdir() if p.name.startswith(".")]


def test_table_lists_every_dataset():
    rows = download.read_checksums()
    assert {row["dataset"] for row in rows} == set(DATASETS)
    assert all(isinstance(row["bytes"], int) and len(row["sha256"]) == 64 for row in rows)


@needs_mirror
def test_cora_from_real_mirror(workdir, monkeypatch, cora_rows):
    monkeypatch.setenv(download.MIRROR_ENV, str(REAL_MIRROR))
    download.main(["cora"])
    out = workdir / "data" / "raw" / "cora"
    assert sorted(p.name for p in out.iterdir()) == sorted(row["file"] for row in cora_rows)
    assert len(cora_rows) == 8
    for row in cora_rows:
        assert download.sha256_of(out / row["file"]) == row["sha256"]
        assert (out / row["file"]).stat().st_mode & 0o044  # readable beyond the owner
    assert leftovers(out) == []


@needs_mirror
def test_second_run_keeps_good_files(workdir, monkeypatch, cora_rows):
    monkeypatch.setenv(download.MIRROR_ENV, str(REAL_MIRROR))
    download.main(["cora"])
    out = workdir / "data" / "raw" / "cora"
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}

    def must_not_copy(*args, **kwargs):
        raise AssertionError("an intact file was fetched again")

    monkeypatch.setattr(download, "copy_stream", must_not_copy)
    download.main(["cora"])
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


@needs_mirror
def test_bad_existing_file_is_replaced(workdir, monkeypatch, cora_rows):
    monkeypatch.setenv(download.MIRROR_ENV, str(REAL_MIRROR))
    out = workdir / "data" / "raw" / "cora"
    out.mkdir(parents=True)
    (out / "ind.cora.y").write_bytes(b"stale")
    download.main(["cora"])
    assert download.sha256_of(out / "ind.cora.y") == cora_rows[1]["sha256"]


@needs_mirror
def test_checksum_mismatch(workdir, monkeypatch, cora_rows):
    original = (REAL_MIRROR / "planetoid" / "ind.cora.x").read_bytes()
    altered = bytes([original[0] ^ 0xFF]) + original[1:]  # same size, different content
    mirror = make_fake_mirror(workdir / "mirror", cora_rows, {"ind.cora.x": altered})
    monkeypatch.setenv(download.MIRROR_ENV, str(mirror))

    with pytest.raises(DataError) as info:
        download.main(["cora"])
    message = str(info.value)
    assert "ind.cora.x" in message
    assert cora_rows[0]["sha256"] in message
    assert hashlib.sha256(altered).hexdigest() in message
    assert "\n" not in message
    out = workdir / "data" / "raw" / "cora"
    assert not (out / "ind.cora.x").exists()
    assert leftovers(out) == []


@needs_mirror
def test_truncated_file(workdir, monkeypatch, cora_rows):
    original = (REAL_MIRROR / "planetoid" / "ind.cora.tx").read_bytes()
    half = original[: len(original) // 2]
    mirror = make_fake_mirror(workdir / "mirror", cora_rows, {"ind.cora.tx": half})
    monkeypatch.setenv(download.MIRROR_ENV, str(mirror))

    with pytest.raises(DataError) as info:
        download.main(["cora"])
    message = str(info.value)
    assert "ind.cora.tx" in message and str(len(half)) in message and str(len(original)) in message
    out = workdir / "data" / "raw" / "cora"
    assert not (out / "ind.cora.tx").exists()
    assert leftovers(out) == []


@needs_mirror
def test_interrupted_copy_leaves_nothing(workdir, monkeypatch, cora_rows):
    monkeypatch.setenv(download.MIRROR_ENV, str(REAL_MIRROR))
    written = []

    def interrupted(src, dst, progress=None):
        dst.write(src.read(1000))
        dst.flush()
        written.extend(leftovers(workdir / "data" / "raw" / "cora"))
        raise KeyboardInterrupt

    monkeypatch.setattr(download, "copy_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        download.main(["cora"])
    assert written, "the temp file should have existed during the copy"
    out = workdir / "data" / "raw" / "cora"
    assert list(out.iterdir()) == []


def test_file_missing_from_mirror(workdir, monkeypatch):
    mirror = workdir / "mirror"
    (mirror / "planetoid").mkdir(parents=True)
    monkeypatch.setenv(download.MIRROR_ENV, str(mirror))
    with pytest.raises(DataError, match=r"ind\.cora\.\w+: not in the mirror .*planetoid"):
        download.main(["cora"])
    assert leftovers(workdir / "data" / "raw" / "cora") == []


def test_mirror_directory_missing(workdir, monkeypatch):
    missing = workdir / "no-such-mirror"
    monkeypatch.setenv(download.MIRROR_ENV, str(missing))
    with pytest.raises(DataError) as info:
        download.main(["cora"])
    assert download.MIRROR_ENV in str(info.value) and str(missing) in str(info.value)


def test_relative_mirror_path_is_refused_with_the_absolute_form(workdir, monkeypatch):
    (workdir / "mirror" / "planetoid").mkdir(parents=True)  # exists relative to the cwd, still refused
    monkeypatch.setenv(download.MIRROR_ENV, "mirror")
    with pytest.raises(DataError) as info:
        download.main(["cora"])
    message = str(info.value)
    assert "CADNET_MIRROR=mirror" in message and "absolute path" in message and "realpath mirror" in message
    assert "\n" not in message
    assert leftovers(workdir / "data" / "raw" / "cora") == []


def test_no_mirror_no_network(workdir, monkeypatch):
    def offline(url, timeout=None):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(DataError) as info:
        download.main(["cora"])
    message = str(info.value)
    assert download.MIRROR_ENV in message
    assert download.UPSTREAM_URLS["planetoid"] + "ind.cora.x" in message
    assert "\n" not in message
    assert leftovers(workdir / "data" / "raw" / "cora") == []


def test_unknown_dataset(workdir):
    with pytest.raises(ConfigError) as info:
        download.main(["nosuch"])
    assert all(name in str(info.value) for name in DATASETS)


def test_unknown_dataset_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    env.pop(download.MIRROR_ENV, None)
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.download", "nosuch"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "cora" in lines[0]
    assert not (tmp_path / "data").exists()


@pytest.fixture
def tiny_table(workdir, monkeypatch):
    """Swap the checksum table for one listing a single small gnn-benchmark file for `photo`."""
    payload = b"tiny npz stand-in " * 10_000  # ~180 kB: several chunks
    table = workdir / "checksums.tsv"
    table.write_text(
        "\t".join(download.CHECKSUM_COLUMNS) + "\n"
        + "\t".join(["photo", "gnn-benchmark", "tiny.npz", str(len(payload)),
                     hashlib.sha256(payload).hexdigest(), "0" * 40, "no"]) + "\n"
    )
    monkeypatch.setattr(download, "CHECKSUMS_FILE", table)
    return payload


def test_network_download(workdir, monkeypatch, tiny_table):
    requested = []

    def fake_urlopen(url, timeout=None):
        requested.append(url)
        return io.BytesIO(tiny_table)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    download.main(["photo"])
    assert requested == [download.UPSTREAM_URLS["gnn-benchmark"] + "tiny.npz"]
    out = workdir / "data" / "raw" / "photo"
    assert (out / "tiny.npz").read_bytes() == tiny_table
    assert leftovers(out) == []


def test_connection_dropped_mid_download(workdir, monkeypatch, tiny_table):
    class Dropping(io.BytesIO):
        def read(self, size=-1):
            if self.tell() > 0:
                raise ConnectionResetError("connection reset by peer")
            return super().read(size)

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: Dropping(tiny_table))
    with pytest.raises(DataError, match=r"cannot download .*tiny\.npz.*CADNET_MIRROR"):
        download.main(["photo"])
    assert list((workdir / "data" / "raw" / "photo").iterdir()) == []


@needs_mirror
def test_unreadable_mirror_file_is_one_line_naming_it(workdir, monkeypatch, cora_rows):
    """A mirror file this user may not read (chmod 000 for a non-root user): one line naming
    the file, no traceback and no partial file. Simulated, since root reads any file."""
    monkeypatch.setenv(download.MIRROR_ENV, str(REAL_MIRROR))
    real_open = Path.open

    def denied(self, *args, **kwargs):
        if self.name == "ind.cora.y":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(DataError) as info:
        download.main(["cora"])
    message = str(info.value)
    assert "\n" not in message and "ind.cora.y" in message and "Permission denied" in message
    assert leftovers(workdir / "data" / "raw" / "cora") == []
