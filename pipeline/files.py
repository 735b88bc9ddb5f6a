"""File helpers every stage shares: atomic writes and checksums."""
from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path
from typing import Callable

CHUNK_BYTES = 1 << 20
TEMPORARY = re.compile(r"\.(.+)\.\d+\.tmp")  # temporary_name's pattern


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, then rename it into place.

    An interrupted or failed write (Ctrl-C included) leaves no half file: the old ``path``, if
    any, stays as it was, and the temporary file is removed. ``write`` may also raise after
    writing, e.g. when a checksum does not match, to reject what it wrote.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:
        if err.filename in (None, str(tmp)):  # the message should name the file meant, not its temporary
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_csv_atomic(path: Path, table, **to_csv) -> None:
    """A pandas table as CSV, whole or not at all (a full disk leaves no row cut in half)."""
    write_atomic(path, lambda tmp: table.to_csv(tmp, **to_csv))


def temporary_name(path: Path) -> Path:
    """Where :func:`write_atomic` writes ``path`` before renaming it: hidden, and named by the
    writing process, so that two processes writing the same file never share one."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def meant_name(path: Path) -> str | None:
    """The file name a temporary file of :func:`write_atomic` was meant to become, or None
    where ``path`` is not one."""
    match = TEMPORARY.fullmatch(path.name)
    return match.group(1) if match else None


def sha256_of(path: Path | str) -> str:
    """SHA-256 of a file, read in chunks so large files need little memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save_torch(obj, path: Path) -> None:
    """``torch.save`` that writes the same bytes for the same object, atomically.

    ``torch.save`` to a file names the zip archive inside after that file, so saving through a
    temporary file (whose name carries the writer's PID) made two saves of the same graph
    differ byte for byte, and every seed fingerprinted with the graph's SHA-256 went stale.
    Saved to memory first, the archive always has the same name.
    """
    import torch  # here, so that the torch-free stages can import this module

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_atomic(path, lambda tmp: tmp.write_bytes(buffer.getvalue()))


def read_record(path: Path) -> dict | None:
    """The dict :func:`save_torch` wrote at ``path`` (a seed's record), or None where it cannot
    be read or is no dict: as good as missing."""
    import torch  # here, as in save_torch

    try:
        record = torch.load(path, weights_only=False)
    except Exception:
        return None
    return record if isinstance(record, dict) else None
