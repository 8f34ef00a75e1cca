"""llama-cpp-python, imported so that it also loads on Android's Python.

`import llama_cpp` loads libllama at once through `llama_cpp._ctypes_extensions.load_shared_library`, which
in llama-cpp-python 0.3.36 knows linux, freebsd, darwin, win32 and emscripten and raises
`RuntimeError("Unsupported platform")` for anything else: also for `"android"`, what Python 3.13+ reports
on Android (PEP 738; Termux's Python). Android's libraries are ELF `lib*.so` files as on Linux. So on
Android that loader module is executed from the package's own file and registered under its own name before
the package is imported, with its `load_shared_library` falling back to loading `lib{name}.so` where the
original gives up. Nothing else changes: `sys.platform` stays `"android"` for everyone else in the process,
and elsewhere this is a plain `import llama_cpp`.

    from edgepilot.engine.llama_binding import llama_cpp   # imported on first use (PEP 562 __getattr__)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ctypes

    import llama_cpp  # noqa: F401 - what `from edgepilot.engine.llama_binding import llama_cpp` gives

LOADER = "llama_cpp._ctypes_extensions"
# What libllama / libmtmd link against, loaded first from the same folder (as the loader's emscripten branch
# does), so that their DT_NEEDED entries resolve to these copies whatever the dynamic linker's search path.
DEPENDENCIES = {
    "llama": ("ggml-base", "ggml-cpu", "ggml"),
    "mtmd": ("ggml-base", "ggml-cpu", "ggml", "llama"),
}

LoadLibrary = Callable[[str, Path], "ctypes.CDLL"]  # ctypes is imported when a library is opened


def android_loader(original: LoadLibrary) -> LoadLibrary:
    """The loader's `load_shared_library`, falling back to Linux's file name where it refuses the platform."""

    def load_shared_library(lib_base_name: str, base_path: Path) -> ctypes.CDLL:
        try:
            return original(lib_base_name, base_path)
        except RuntimeError as exc:
            if str(exc) != "Unsupported platform":
                raise
        base_path = Path(base_path)
        for dependency in DEPENDENCIES.get(lib_base_name, ()):
            path = base_path / f"lib{dependency}.so"
            if path.exists():
                _open(path)
        path = base_path / f"lib{lib_base_name}.so"
        if not path.exists():
            raise FileNotFoundError(f"Shared library with base name '{lib_base_name}' not found")
        return _open(path)

    load_shared_library.android_fallback = True  # type: ignore[attr-defined]
    return load_shared_library


def _open(path: Path) -> ctypes.CDLL:
    import ctypes

    try:
        return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise RuntimeError(f"Failed to load shared library '{path}': {exc}") from exc


def _register_android_loader() -> None:
    """The loader module, patched, in sys.modules: also after an earlier `import llama_cpp` failed half-way
    (leaving the unpatched module behind)."""
    module = sys.modules.get(LOADER) or _loader_from_file()
    if module is None:
        return  # not installed, or another layout than 0.3.x: the import below says what is wrong
    if not getattr(module.load_shared_library, "android_fallback", False):
        module.load_shared_library = android_loader(module.load_shared_library)
    sys.modules[LOADER] = module


def _loader_from_file() -> ModuleType | None:
    spec = importlib.util.find_spec("llama_cpp")  # where the package is, without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    files = [Path(d) / "_ctypes_extensions.py" for d in spec.submodule_search_locations]
    file = next((f for f in files if f.is_file()), None)
    loader_spec = importlib.util.spec_from_file_location(LOADER, file) if file else None
    if loader_spec is None or loader_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return module


def _built_library_dir() -> Path | None:
    """A llama-cpp-python built without its library (`CMAKE_ARGS=-DLLAMA_BUILD=OFF`: nothing compiled at
    install) loads the libllama `edgepilot build` made from the same vendored llama.cpp: one compile serves
    both engines. That folder, when it applies (a user's LLAMA_CPP_LIB_PATH wins)."""
    if os.environ.get("LLAMA_CPP_LIB_PATH"):
        return None
    own = library_dir()
    if own is None or (Path(own) / "libllama.so").exists():
        return None
    from edgepilot.engine.native_tools import tools_dir

    built = tools_dir("native") / "bin"
    return built if (built / "libllama.so").exists() else None


def _use_built_library() -> None:
    """LLAMA_CPP_LIB_PATH, llama-cpp-python's own override, names edgepilot build's folder when it applies."""
    built = _built_library_dir()
    if built is not None:
        os.environ["LLAMA_CPP_LIB_PATH"] = str(built)


def load() -> ModuleType:
    """`llama_cpp`, imported (raises what the import raises: ImportError, RuntimeError, OSError)."""
    if sys.platform == "android":
        _register_android_loader()
    _use_built_library()
    module = importlib.import_module("llama_cpp")
    if LOADER in sys.modules and not hasattr(module, "_ctypes_extensions"):
        module._ctypes_extensions = sys.modules[LOADER]  # what a normal import would have set
    globals()["llama_cpp"] = module
    return module


def binding_available() -> tuple[bool, str]:
    """(True, "") when the in-process engine loads; else (False, why, to follow "llama-cpp-python "):
    "is not installed" or "failed to load (REASON)", one line."""
    try:
        load()
    except ModuleNotFoundError as exc:
        if exc.name == "llama_cpp":
            return False, "is not installed"
        return False, f"failed to load ({_one_line(exc)})"
    except AttributeError as exc:  # ctypes: the libllama found lacks a function this binding declares
        return False, f"failed to load: its libllama is another llama.cpp than its own ({_one_line(exc)})"
    except (ImportError, RuntimeError, OSError) as exc:
        return False, f"failed to load ({_one_line(exc)})"
    return True, ""


def library_names(base: str = "llama") -> tuple[str, ...] | None:
    """The file names llama-cpp-python's loader tries for lib`base` on this platform (Android: the fallback's,
    as on Linux); None where only loading can tell (emscripten, a platform it does not know)."""
    from edgepilot.device.system import linux_kernel

    if linux_kernel() or sys.platform.startswith("freebsd"):
        return (f"lib{base}.so",)
    if sys.platform == "darwin":
        return (f"lib{base}.so", f"lib{base}.dylib")
    if sys.platform == "win32":
        return (f"{base}.dll", f"lib{base}.dll")
    return None


def find_library() -> tuple[Path | None, str] | None:
    """The libllama file `load` would load, found without loading it (start-up: importing llama_cpp loads
    the library and numpy, ~0.2 s here, 3-5x that on a phone). (path, "") or (None, why, to follow
    "llama-cpp-python "); None when only loading can tell. A file that is there can still fail to load
    (another llama.cpp's, a missing dependency): `binding_available` says that."""
    own = library_dir()
    if own is None:
        return None, "is not installed"
    names = library_names()
    if names is None:
        return None
    folder = _built_library_dir() or Path(own)
    found = next((folder / n for n in names if (folder / n).is_file()), None)
    if found is not None:
        return found, ""
    where = "LLAMA_CPP_LIB_PATH" if os.environ.get("LLAMA_CPP_LIB_PATH") else "its lib folder"
    return None, f"has no {names[0]} in {where} ({folder})"


def loaded_library() -> str | None:
    """The libllama file the imported binding loaded (None before `load`)."""
    module = sys.modules.get("llama_cpp.llama_cpp")
    lib = getattr(module, "_lib", None)
    return getattr(lib, "_name", None)


def library_dir() -> str | None:
    """Where libllama is loaded from (LLAMA_CPP_LIB_PATH, as llama-cpp-python reads it, or its lib/ folder);
    None when llama-cpp-python is not installed. Does not import it."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    return os.environ.get("LLAMA_CPP_LIB_PATH") or str(package / "lib")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def __getattr__(name: str) -> Any:
    if name == "llama_cpp":
        return load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
