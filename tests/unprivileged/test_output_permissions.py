"""Files an ordinary user names or edgepilot keeps outside the data folder: bench's and tune's --plot, the
bundled model assembled into XDG_CACHE_HOME, and the backstop in cli/app.py for a refusal no module
foresaw. Each refusal is real for the user (refuses_write first); the answer is one `edgepilot: error:` line
naming the path and what to do, exit 2, before anything is measured and with nothing half-written.
"""

from __future__ import annotations

import json
import os

import pytest
from datakit import NO_WRITE, one_error_line, readable_model, refusing, reopen_refused  # noqa: F401

from edgepilot.gguf.resolve import BUNDLED_NAME

# No llama.cpp for the user: a command that got past its check of --plot fails on that instead, which
# shows the refusal comes before anything is measured.
NO_ENGINE = {"EDGEPILOT_TOOLS_DIR": "/nonexistent", "EDGEPILOT_ENGINE": "tools"}


@pytest.mark.parametrize(
    "command", [("bench", "-n", "4", "-r", "1"), ("tune", "-n", "4", "-r", "1", "--device", "none")]
)
def test_plot_into_a_folder_of_another_user_is_refused_before_measuring(
    ordinary_user, open_tmp, smollm_path, command
):
    out = refusing(open_tmp / "out", NO_WRITE)
    ordinary_user.refuses_write(out)
    name, *flags = command
    model = str(readable_model(smollm_path))
    done = ordinary_user.run(name, model, *flags, "--plot", str(out / "sweep.png"), env=NO_ENGINE)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write --plot {out}/sweep.png: permission denied in {out}" in line
    assert list(out.iterdir()) == []


def test_the_bundled_model_needs_a_cache_the_user_can_write(ordinary_user, open_tmp):
    cache = refusing(open_tmp / "cache", NO_WRITE)
    ordinary_user.refuses_write(cache)
    done = ordinary_user.run("fit", "--json", env={"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write the bundled model in {cache}: permission denied" in line
    assert "XDG_CACHE_HOME" in line and "MODEL" in line
    assert list(cache.iterdir()) == []


def test_a_bundled_model_left_by_another_user_is_replaced_whole(ordinary_user):
    """A `sudo edgepilot` left a model file of root's in the user's cache (not verified: no stamp): it is
    assembled again beside it and moved over it in one step, never written through in place."""
    models = ordinary_user.home / "cache" / "edgepilot" / "models"
    models.mkdir(parents=True)
    ordinary_user.give(ordinary_user.home / "cache")
    stale = models / BUNDLED_NAME
    stale.write_bytes(b"GGUF half of a model")
    stale.chmod(0o444)
    done = ordinary_user.run("fit", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["fits"] is True
    assert sorted(os.listdir(models)) == [BUNDLED_NAME, f"{BUNDLED_NAME}.verified"]
    assert stale.stat().st_uid == ordinary_user.uid and stale.stat().st_size > 100 << 20


BACKSTOP = """
import sys
from edgepilot.cli.app import app, user_errors

@app.command("write-there")
@user_errors
def write_there():
    open(sys.argv[1], "w").close()

app(["write-there"], prog_name="edgepilot")
"""


def test_a_refusal_no_module_foresaw_is_one_line_with_the_path_escaped(ordinary_user, open_tmp):
    folder = refusing(open_tmp / "no\x1b[31mentry", NO_WRITE)
    ordinary_user.refuses_write(folder)
    done = ordinary_user.python(BACKSTOP, str(folder / "file"))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    shown = str(open_tmp / "no\\x1b[31mentry" / "file")
    assert line == (
        f"edgepilot: error: permission denied: {shown} (during edgepilot write-there): give yourself "
        "access to it (ls -ld shows its owner) or choose another path"
    )
    assert list(folder.iterdir()) == []
