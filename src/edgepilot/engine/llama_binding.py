"""llama-cpp-python, imported once (placeholder until the Android-aware loader lands)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def binding_available() -> tuple[bool, str]:
    if importlib.util.find_spec("llama_cpp") is None:
        return False, "is not installed"
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError, RuntimeError) as exc:
        return False, f"failed to load ({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"
    return True, ""


def library_dir() -> str | None:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))) / "lib")
