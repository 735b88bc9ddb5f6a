"""Stage `download`: fetch one dataset's raw files into `data/raw/<dataset>/`.

    python -m pipeline.download <dataset>

Why this stage exists: every later stage reads the raw files that PyG would download, but
PyG's own download neither checks checksums nor works offline. Here every file is checked
against `pipeline/checksums.tsv` (size and SHA-256), so a truncated or altered file is
caught at the start instead of surfacing later as a strange number in the results.

Where the files come from:

* If the environment variable `CADNET_MIRROR` names a directory, it is used instead of the
  network. It is laid out like the upstream locations: `$CADNET_MIRROR/planetoid/<file>` and
  `$CADNET_MIRROR/gnn-benchmark/<file>` (on the machines here: `../shared/datasets`).
* Otherwise the files are downloaded from the upstream URLs that PyG's `Planetoid`,
  `Amazon` and `Coauthor` classes use (see `UPSTREAM_URLS`).

Every file is written to a temporary file next to its destination, checked, and only then
renamed into place, so a failure or Ctrl-C never leaves a partial file that looks complete.
"""
from __future__ import annotations

import csv
import http.client
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from pipeline.config import DATASETS, ConfigError, DataError, check_choice, run_main
from pipeline.files import sha256_of, write_atomic

# The table ships inside the package, so it is found whatever the working directory is.
CHECKSUMS_FILE = Path(__file__).with_name("checksums.tsv")
CHECKSUM_COLUMNS = ("dataset", "source", "file", "bytes", "sha256", "upstream_git_blob", "in_this_mirror")

# Outputs go here, relative to the working directory (DVC runs stages from the project root).
RAW_DIR = Path("data") / "raw"

MIRROR_ENV = "CADNET_MIRROR"
MIRROR_EXAMPLE = "/path/to/your/datasets"

# The same locations as torch_geometric's Planetoid.url and Amazon.url / Coauthor.url.
# Kept as constants so this stage does not import torch (seconds of start-up) to read them.
UPSTREAM_URLS = {
    "planetoid": "https://github.com/kimiyoung/planetoid/raw/master/data/",
    "gnn-benchmark": "https://github.com/shchur/gnn-benchmark/raw/master/data/npz/",
}

NETWORK_TIMEOUT_S = 30
CHUNK_BYTES = 1 << 16


def read_checksums(path: Path | str | None = None) -> list[dict]:
    """Read the checksum table: one dict per raw file, with `bytes` as an int.

    `path` defaults to `CHECKSUMS_FILE` (looked up at call time, so tests can swap the table).
    """
    path = Path(path) if path is not None else CHECKSUMS_FILE
    if not path.is_file():
        raise DataError(f"{path}: checksum table not found")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        missing = [c for c in CHECKSUM_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if row["source"] not in UPSTREAM_URLS:
                raise DataError(
                    f"{path}:{line_no}: unknown source {row['source']!r}; "
                    f"allowed values: {', '.join(UPSTREAM_URLS)}"
                )
            try:
                row["bytes"] = int(row["bytes"])
            except ValueError:
                raise DataError(f"{path}:{line_no}: bytes is not an integer: {row['bytes']!r}") from None
            rows.append(row)
    return rows


def files_for(dataset: str, rows: list[dict] | None = None) -> list[dict]:
    """The checksum rows of one dataset; a name outside `config.DATASETS` is a ConfigError."""
    check_choice("dataset", dataset, DATASETS)
    rows = read_checksums() if rows is None else rows
    mine = [row for row in rows if row["dataset"] == dataset]
    if not mine:
        raise DataError(f"{dataset}: no files listed in {CHECKSUMS_FILE.name}")
    return mine


def mirror_from_env() -> Path | None:
    """The mirror directory named by CADNET_MIRROR, or None when the variable is unset or empty.

    A set variable that points nowhere is an error rather than a silent fall-back to the
    network: the user asked for the mirror, and machines without internet would otherwise
    fail later with a less helpful message. The path must be absolute: DVC runs the stage from
    the repository root, not from the directory where the user typed the export, so a relative
    path would silently mean another folder.
    """
    value = os.environ.get(MIRROR_ENV, "").strip()
    if not value:
        return None
    if not Path(value).expanduser().is_absolute():
        raise DataError(f"{MIRROR_ENV}={value}: give an absolute path (DVC runs stages from the repository root, "
                        f'not from your shell\'s directory), e.g. export {MIRROR_ENV}="$(realpath {value})"')
    mirror = Path(os.path.abspath(Path(value).expanduser()))  # ".." folded
    if not mirror.is_dir():
        raise DataError(f"{MIRROR_ENV}={value}: mirror directory {mirror} does not exist")
    return mirror


def is_intact(path: Path, row: dict) -> bool:
    """Whether `path` exists with the size and SHA-256 the table expects."""
    return path.is_file() and path.stat().st_size == row["bytes"] and sha256_of(path) == row["sha256"]


def verify(path: Path, row: dict, origin: str) -> None:
    """Raise DataError unless `path` matches the table's size and SHA-256 for `row`.

    `origin` (a URL or a mirror path) goes into the message so the user knows which copy is bad.
    """
    size = path.stat().st_size
    actual = sha256_of(path)
    if size == row["bytes"] and actual == row["sha256"]:
        return
    size_note = ""
    if size != row["bytes"]:
        size_note = f"expected {row['bytes']} bytes, got {size} (truncated or incomplete?); "
    raise DataError(
        f"{row['file']}: checksum mismatch for the copy from {origin}: {size_note}"
        f"expected SHA-256 {row['sha256']}, got {actual}"
    )


def copy_stream(src: BinaryIO, dst: BinaryIO, progress: tqdm | None = None) -> int:
    """Copy `src` to `dst` chunk by chunk, advancing `progress`; returns the bytes copied."""
    copied = 0
    while chunk := src.read(CHUNK_BYTES):
        dst.write(chunk)
        copied += len(chunk)
        if progress is not None:
            progress.update(len(chunk))
    return copied


def fetch(row: dict, dest_dir: Path, mirror: Path | None) -> Path:
    """Make `dest_dir/<file>` a verified copy of one table row; returns its path.

    A file already there with the right size and SHA-256 is kept as is. Otherwise the file
    is copied from `mirror` (when given) or downloaded, into a temporary file that is
    verified and then renamed into place. On any failure, Ctrl-C included, the temporary
    file is removed, and so is a stale bad copy that was about to be replaced.
    """
    dest = Path(dest_dir) / row["file"]
    if dest.exists():
        if is_intact(dest, row):
            print(f"{row['file']}: already present and verified, kept")
            return dest
        print(f"{row['file']}: present but does not match {CHECKSUMS_FILE.name}, fetching again")
        dest.unlink()

    def fill(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            origin = str(_copy_from_mirror(row, mirror, handle)) if mirror is not None else _download(row, handle)
        verify(tmp, row, origin)

    write_atomic(dest, fill)
    return dest


def _copy_from_mirror(row: dict, mirror: Path, dst: BinaryIO) -> Path:
    """Copy one file from the mirror into the open temp file; returns the source path."""
    src_dir = mirror / row["source"]
    src = src_dir / row["file"]
    if not src.is_file():
        raise DataError(
            f"{row['file']}: not in the mirror {src_dir} ({MIRROR_ENV}={os.environ.get(MIRROR_ENV)}); "
            f"unset {MIRROR_ENV} to download it from {UPSTREAM_URLS[row['source']]}"
        )
    try:
        with src.open("rb") as handle:
            copy_stream(handle, dst)
    except OSError as err:  # unreadable for this user, a disk error: say which file
        raise DataError(f"{src}: cannot read it from the mirror ({err.strerror or err}); "
                        f"check its permissions or point {MIRROR_ENV} at a readable copy") from None
    print(f"{row['file']}: copied from {src}")
    return src


def _download(row: dict, dst: BinaryIO) -> str:
    """Download one file into the open temp file with a progress bar; returns the URL.

    Network trouble (no route, timeout, HTTP error, connection dropped mid-file) becomes one
    DataError line that names the URL and points to CADNET_MIRROR, the offline way out.
    """
    url = UPSTREAM_URLS[row["source"]] + row["file"]
    try:
        with urllib.request.urlopen(url, timeout=NETWORK_TIMEOUT_S) as response:
            with tqdm(total=row["bytes"], unit="B", unit_scale=True, unit_divisor=1024,
                      desc=row["file"], file=sys.stderr) as progress:
                copy_stream(response, dst, progress)
    except (OSError, http.client.HTTPException) as err:  # urllib.error.URLError is an OSError
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        reason = " ".join(str(reason).split()) or type(err).__name__
        raise DataError(
            f"cannot download {url}: {reason}; without internet, set {MIRROR_ENV} to a local "
            f"mirror directory (e.g. {MIRROR_ENV}={MIRROR_EXAMPLE})"
        ) from None
    return url


def main(argv: list[str]) -> None:
    """Fetch and verify every raw file of the dataset named by argv[0]."""
    if len(argv) != 1:
        raise ConfigError(
            f"usage: python -m pipeline.download <dataset>; allowed datasets: {', '.join(DATASETS)}"
        )
    dataset = argv[0]
    rows = files_for(dataset)
    mirror = mirror_from_env()
    dest_dir = RAW_DIR / dataset
    for row in rows:
        fetch(row, dest_dir, mirror)
    print(f"{dataset}: {len(rows)} file(s) verified in {dest_dir}")


if __name__ == "__main__":
    run_main(main)
