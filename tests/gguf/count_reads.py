"""Run one edgepilot command in this process and report how often Python opened the model file and parsed
its header (an audit hook sees every open; the parser is wrapped). Used by test_one_read.py."""

from __future__ import annotations

import json
import os
import sys
import traceback

model = os.path.realpath(sys.argv[1])
opens: list[str] = []


def hook(event: str, args: tuple) -> None:
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    try:
        if os.path.realpath(os.fsdecode(args[0])) != model:
            return
    except (TypeError, ValueError):
        return
    opens.append(" < ".join(f.name for f in reversed(traceback.extract_stack(limit=8)[:-1])))


sys.addaudithook(hook)

from edgepilot.cli import app  # noqa: E402
from edgepilot.gguf import gguf_header  # noqa: E402

parses = 0
parse = gguf_header._Parser.parse


def counted(self):  # type: ignore[no-untyped-def]
    global parses
    parses += 1
    return parse(self)


gguf_header._Parser.parse = counted  # type: ignore[method-assign]
code = 0
try:
    app.main(sys.argv[2:], standalone_mode=False)
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
sys.stdout.flush()
sys.stderr.write("\nREADS " + json.dumps({"code": code, "parses": parses, "opens": opens}) + "\n")
