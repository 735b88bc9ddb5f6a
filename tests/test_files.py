"""pipeline/files.py: atomic writes and checksums."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.files import meant_name, sha256_of, temporary_name, write_atomic


def test_write_atomic_leaves_no_half_file(tmp_path):
    target = tmp_path / "out" / "stats.json"
    write_atomic(target, lambda p: p.write_text("old"))

    def crash(p: Path) -> None:
        p.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, crash)
    assert target.read_text() == "old"
    assert [f.name for f in target.parent.iterdir()] == ["stats.json"]


def test_write_atomic_can_reject_what_it_wrote(tmp_path):
    target = tmp_path / "data.bin"

    def write_then_reject(p: Path) -> None:
        p.write_bytes(b"corrupt")
        raise ValueError("checksum mismatch")

    with pytest.raises(ValueError):
        write_atomic(target, write_then_reject)
    assert list(tmp_path.iterdir()) == []


def test_sha256_of_matches_hashlib_across_chunks(tmp_path):
    blob = bytes(range(256)) * 9000  # more than one 1 MiB chunk
    path = tmp_path / "blob"
    path.write_bytes(blob)
    assert sha256_of(path) == hashlib.sha256(blob).hexdigest()


def test_save_torch_writes_the_same_bytes_whatever_the_path(tmp_path):
    """torch.save names its zip archive after the file it writes; saving through a temporary
    file named with the PID made two saves of one graph differ (and every seed stale)."""
    import torch

    from pipeline.files import save_torch

    graph = {"x": torch.eye(3).to_sparse_coo(), "y": torch.arange(3)}
    save_torch(graph, tmp_path / "a" / "graph.pt")
    save_torch(graph, tmp_path / "b" / "other_name.pt")
    assert (tmp_path / "a" / "graph.pt").read_bytes() == (tmp_path / "b" / "other_name.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "a" / "graph.pt")["y"], graph["y"])
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]


def test_a_temporary_name_tells_the_file_it_was_meant_to_become(tmp_path):
    target = tmp_path / "seed_007.pt"
    assert meant_name(temporary_name(target)) == "seed_007.pt"
    assert meant_name(target) is None and meant_name(tmp_path / ".seed_007.pt") is None
    assert meant_name(tmp_path / ".seed_007.pt.tmp") is None  # no writer's pid: not write_atomic's
