"""What --root names, opened (open_root): this machine, a device tree, or a snapshot archive extracted safely
(regular files and folders only, within limits that keep a hostile archive cheap to refuse). tarfile and the
decompressors are imported when an archive is read, so that fit and probe of a tree or this machine load
none of them, nor the device probe's readers."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from edgepilot import untrusted
from edgepilot.device import fs
from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_read, no_temporary_folder

if TYPE_CHECKING:
    import tarfile

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
# A real snapshot holds a few hundred small files (under 1 MiB); these limits are far above that and keep a
# hostile archive (a bomb, a million entries, a 1 GiB header) cheap to refuse.
MAX_ARCHIVE_BYTES = 64 << 20
MAX_ARCHIVE_MEMBERS = 10000
MAX_STREAM_BYTES = MAX_ARCHIVE_BYTES + (16 << 20)  # content plus tar headers
MAX_HEADER_READ = 256 << 10
COPY_CHUNK = 64 << 10
ROOT_FIX = "give a device tree or snapshot you can read (ls -l, chmod)"


def is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


@contextlib.contextmanager
def open_root(path: Path) -> Iterator[Path]:
    """Yield a directory to read: the path itself, or a safe extraction of a snapshot archive."""
    if fs.is_live(path):
        yield fs.LIVE_ROOT
        return
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise UserError(
            f"--root {path}: no such file or directory; give a device tree or a snapshot .tar.gz"
        ) from None
    except OSError as exc:  # in a folder this user may not enter
        raise cannot_read(path, exc, ROOT_FIX, what="--root") from None
    if stat.S_ISDIR(mode):
        if not os.access(path, os.R_OK | os.X_OK):  # read as a tree of absent files, it would replay nothing
            raise cannot_read(path, "permission denied", ROOT_FIX, what="--root")
        yield path
        return
    if not is_archive(path):
        raise UserError(f"--root {path}: not a directory or a .tar.gz snapshot")
    import shutil  # only an archive needs these
    import tempfile

    try:
        tmp = Path(tempfile.mkdtemp(prefix="edgepilot-root-"))
    except OSError:
        raise no_temporary_folder() from None
    try:
        extract_safely(path, tmp)
        entries = [p for p in tmp.iterdir()]
        # `snapshot save` archives the tree at top level; accept a single wrapping directory too.
        if len(entries) == 1 and entries[0].is_dir() and not (tmp / "proc").exists():
            yield entries[0]
        else:
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _GuardedReader(io.RawIOBase):
    """The decompressed archive as tarfile reads it, refusing what no snapshot needs: one read larger than
    MAX_HEADER_READ (tarfile reads a whole pax or GNU long-name header at once, whatever size it claims) or
    more than MAX_STREAM_BYTES in all (a decompression bomb)."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > MAX_HEADER_READ:
            raise _ArchiveTooLarge(f"a header or member of {size} bytes read at once")
        data = self.inner.read(size)
        if self.inner.tell() > MAX_STREAM_BYTES:
            raise _ArchiveTooLarge(f"more than {MAX_STREAM_BYTES >> 20} MiB of data")
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        pos = self.inner.seek(offset, whence)
        if pos > MAX_STREAM_BYTES:
            raise _ArchiveTooLarge(f"more than {MAX_STREAM_BYTES >> 20} MiB of data")
        return pos

    def tell(self) -> int:
        return self.inner.tell()


class _ArchiveTooLarge(Exception):
    pass


def _decompressed(raw: BinaryIO) -> BinaryIO:
    import bz2
    import gzip
    import lzma

    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw, "rb")  # type: ignore[return-value]
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, "rb")  # type: ignore[return-value]
    return raw


def extract_safely(archive: Path, dest: Path) -> None:
    """Extract regular files and directories only; refuse absolute paths, `..`, links and device nodes, and
    archives beyond MAX_ARCHIVE_BYTES of content or MAX_ARCHIVE_MEMBERS entries. One pass, as tar reads."""
    import lzma
    import tarfile
    import zlib

    base = str(dest.resolve())
    try:
        with untrusted.open_regular(archive) as raw:
            if os.fstat(raw.fileno()).st_size > MAX_STREAM_BYTES:
                raise UserError(f"--root {archive}: archive larger than {MAX_STREAM_BYTES >> 20} MiB")
            with _decompressed(raw) as stream, tarfile.open(fileobj=_GuardedReader(stream), mode="r:") as tar:
                total = 0
                for count, m in enumerate(tar, 1):
                    if count > MAX_ARCHIVE_MEMBERS:
                        raise UserError(f"--root {archive}: more than {MAX_ARCHIVE_MEMBERS} archive entries")
                    total += max(m.size, 0)
                    if total > MAX_ARCHIVE_BYTES:
                        raise UserError(
                            f"--root {archive}: archive expands beyond {MAX_ARCHIVE_BYTES >> 20} MiB"
                        )
                    _extract_member(tar, m, dest, base, archive)
    except untrusted.NotRegularFile as exc:
        raise UserError(f"--root {archive}: {exc.kind}, not a regular file") from None
    except PermissionError as exc:
        raise cannot_read(archive, exc, ROOT_FIX, what="--root") from None
    except OSError as exc:
        detail = exc.strerror or str(exc)
        raise UserError(f"--root {archive}: not a readable snapshot archive ({detail[:200]})") from None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, ValueError, RecursionError) as exc:
        raise UserError(f"--root {archive}: not a readable snapshot archive ({str(exc)[:200]})") from None
    except _ArchiveTooLarge as exc:
        raise UserError(f"--root {archive}: not a snapshot archive ({exc})") from None


def _extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, base: str, archive: Path) -> None:
    name = PurePosixPath(m.name)
    if name.is_absolute() or ".." in name.parts or m.name.startswith(("/", "\\")) or "\x00" in m.name:
        raise UserError(f"--root {archive}: unsafe path in archive: {m.name[:200]!r}")
    if not (m.isfile() or m.isdir()):
        raise UserError(f"--root {archive}: archive holds a link or device node: {m.name[:200]!r}")
    target = dest.joinpath(*name.parts)
    if not str(target.resolve()).startswith(base):
        raise UserError(f"--root {archive}: unsafe path in archive: {m.name[:200]!r}")
    if m.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    src = tar.extractfile(m)
    if src is None:
        return
    with src, open(target, "wb") as out:
        while chunk := src.read(COPY_CHUNK):
            out.write(chunk)
    os.chmod(target, 0o644)
