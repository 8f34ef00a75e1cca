"""The layering of design.md, read from the source: imports only point down, no tool imports a sibling tool,
no import cycles, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

import edgepilot

SRC = Path(edgepilot.__file__).resolve().parent
# Lower number = lower layer. Top-level modules (errors, jsonable, datadir) are shared infrastructure.
LAYERS = {
    "errors": 0,
    "jsonable": 0,
    "datadir": 0,
    "untrusted": 0,  # bounded reads of user- and tree-supplied files
    "kept": 0,  # the files edgepilot keeps, read as input: each value checked for type and range
    "sizes": 0,  # the one bounded size and number parser
    "records": 0,  # bounded line readers: chat's stdin, doctor's logs
    "safe_write": 0,  # every file edgepilot writes
    "file_errors": 0,  # one line for a file the permissions refuse
    "defaults": 0,  # the prompt and context every command shares
    "shown": 0,  # names from outside escaped for the terminal
    "words": 0,  # counted nouns: 1 thread, 2 threads
    "digest": 0,  # sha256 of keys and kept files without loading OpenSSL
    "program_path": 0,  # a program on PATH without importing shutil
    "device": 1,
    "gguf": 2,  # what a GGUF file is: header, validation, architecture, the MODEL argument
    "plan": 3,
    "engine": 4,
    "tuned": 5,  # the one settings decision
    "doctor": 6,  # diagnosis: a library the tools use (serve's watchdog, run's failure report)
    "run": 7,
    "bench": 7,
    "serve": 7,
    "chat": 7,  # interactive multi-turn sessions
    "store": 7,  # getting, keeping and shrinking models: pull, list, remove, quantize, compare
    "toolchain": 7,  # compiling llama.cpp's own tools for this device
    "cluster": 7,  # devices pooled over llama.cpp's RPC backend
    "cli": 8,
    "__main__": 9,
    "__init__": 0,
}
TOOLS = {"run", "bench", "serve", "chat", "store", "toolchain", "cluster"}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(("edgepilot", *parts)).removesuffix(".__init__")
        found[name] = path
    return found


def _imports(path: Path, module: str, modules: dict[str, Path], top_level_only: bool = False) -> set[str]:
    """The edgepilot modules this one imports (`from pkg import submodule` counts as the submodule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("edgepilot")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base])
            if base.startswith("edgepilot"):
                out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in out if m in modules}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_point_down_and_tools_do_not_import_each_other():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        mine = _layer(name)
        for target in _imports(path, name, modules):
            theirs = _layer(target)
            if theirs == mine:
                continue
            if LAYERS[theirs] > LAYERS[mine] or (mine in TOOLS and theirs in TOOLS):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycles():
    """No circle through any import: at module level, inside a function or for type checking only."""
    modules = _modules()
    graph = {n: _imports(p, n, modules) - {n} for n, p in modules.items()}
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for n in graph:
        if n not in state:
            visit(n, [n])
    assert not cycles, "\n".join(cycles)


def test_modules_stay_small():
    big = {n: len(p.read_text().splitlines()) for n, p in _modules().items()}
    assert {n: k for n, k in big.items() if k > MAX_LINES} == {}
