"""`edgepilot quantize` and `compare --plot` as an ordinary user (issue #30): an output folder it may not
write (given with --out, or the source's own folder), one it may not enter, a source it may not reach, and
another user's file in a shared folder. Each is refused before any quantizing, in one line naming the path
and what to do, with nothing written; with both engines (llama.cpp in this process, and llama-quantize).

The user's engines: a copy of the built programs and libllama it can read (permkit.tools_for_user).
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from permkit import one_refusal, read_only_folder, seal, tools_for_user, tree

from userkit import is_root

ENGINES = ["inprocess", "tools"]


def _quantize(user, source: Path, *args: str, engine: str):
    env = {"EDGEPILOT_TOOLS_DIR": str(tools_for_user())}
    return user.run("quantize", str(source), "--to", "Q8_0", "--engine", engine, *args, env=env)


def _own_copy(user, smollm_path: Path) -> Path:
    source = user.home / "smol.gguf"
    shutil.copyfile(smollm_path, source)
    return user.give(source)


def _progress(stderr: str) -> bool:
    """The quantizer started (its progress lines: the F16 reference first, then each type)."""
    return "F16 reference" in stderr or "[1/" in stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_next_to_a_source_in_a_read_only_folder(ordinary_user, open_tmp, smollm_path, engine):
    folder = read_only_folder(open_tmp / "models", ("smol.gguf", smollm_path.read_bytes()))
    ordinary_user.refuses_write(folder)
    before = tree(folder)
    done = _quantize(ordinary_user, folder / "smol.gguf", engine=engine)
    line = one_refusal(done, folder, "--out")
    assert f"cannot write the quantized model in {folder}: permission denied; " in line
    assert not _progress(done.stderr)
    assert tree(folder) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_out_folder_the_user_cannot_write(ordinary_user, open_tmp, smollm_path, engine):
    out = read_only_folder(open_tmp / "out")
    ordinary_user.refuses_write(out)
    done = _quantize(ordinary_user, _own_copy(ordinary_user, smollm_path), "--out", str(out), engine=engine)
    line = one_refusal(done, f"in {out}: permission denied; ", "choose a folder you can write with --out")
    assert line.startswith("edgepilot: error: cannot write the quantized model in ")
    assert tree(out) == {}
    assert sorted(p.name for p in ordinary_user.home.iterdir()) == ["smol.gguf"]


@pytest.mark.parametrize("engine", ENGINES)
def test_out_in_a_folder_the_user_cannot_enter(ordinary_user, open_tmp, smollm_path, engine):
    """Before: a PermissionError traceback (--out's is_dir)."""
    sealed = seal(open_tmp / "sealed")
    ordinary_user.refuses_read(sealed)
    out = sealed / "variants"
    done = _quantize(ordinary_user, _own_copy(ordinary_user, smollm_path), "--out", str(out), engine=engine)
    one_refusal(done, f"cannot write the quantized model in {sealed}: permission denied; ", "--out")
    assert tree(sealed) == {}


def test_a_source_in_a_folder_the_user_cannot_enter(ordinary_user, open_tmp, smollm_path):
    """Before: a PermissionError traceback (the MODEL argument's exists(), in every command taking one)."""
    sealed = open_tmp / "sealed"
    sealed.mkdir()
    shutil.copyfile(smollm_path, sealed / "smol.gguf")
    seal(sealed)
    ordinary_user.refuses_read(sealed / "smol.gguf")
    done = _quantize(ordinary_user, sealed / "smol.gguf", "--out", str(ordinary_user.home), engine="tools")
    line = one_refusal(done, sealed / "smol.gguf")
    assert f"permission denied in {sealed}: that folder is not open to you" in line
    assert list(ordinary_user.home.iterdir()) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_another_users_output_in_a_shared_folder_is_refused_before_quantizing(
    ordinary_user, open_tmp, smollm_path, engine
):
    """A folder like /tmp (sticky bit): the user may create files in it but not replace another user's.
    Before: the F16 reference and the variant were made, then the variant's rename was refused, leaving
    the reference behind and a line that called the folder "not writable"."""
    if not is_root():
        pytest.skip("needs a second user: the test's own user would own the file it may not replace")
    shared = open_tmp / "shared"
    shared.mkdir()
    (shared / "smol-Q8_0.gguf").write_bytes(b"another user's file")
    (shared / "smol-Q8_0.gguf").chmod(0o644)
    shared.chmod(0o1777)
    assert shared.stat().st_mode & stat.S_ISVTX
    replace = (
        "import os,sys\nnew=sys.argv[1]+'.x'\nopen(new,'w').close()\ntry: os.replace(new,sys.argv[1])\n"
        "except PermissionError: os.remove(new); sys.exit(13)"
    )
    assert ordinary_user.python(replace, str(shared / "smol-Q8_0.gguf")).returncode == 13  # a real refusal
    source = _own_copy(ordinary_user, smollm_path)
    done = _quantize(ordinary_user, source, "--out", str(shared), "--force", engine=engine)
    line = one_refusal(done, shared / "smol-Q8_0.gguf", "--out")
    assert "another user's file" in line
    assert not _progress(done.stderr)
    assert tree(shared) == {"smol-Q8_0.gguf": b"another user's file"}


def test_compare_plot_in_a_folder_the_user_cannot_write(ordinary_user, open_tmp, smollm_path):
    """Refused before minutes of measuring, naming the folder and the flag."""
    folder = read_only_folder(open_tmp / "plots")
    ordinary_user.refuses_write(folder)
    plot = folder / "variants.png"
    source = _own_copy(ordinary_user, smollm_path)
    done = ordinary_user.run("compare", str(source), "--plot", str(plot))
    one_refusal(done, f"cannot write the plot in {folder}: permission denied; ", "--plot")
    assert tree(folder) == {}
