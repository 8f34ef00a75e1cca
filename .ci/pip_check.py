"""What the .ci checks of a pip install report share: their command line (resolve the project afresh, or
check a report pip already wrote; --save the closure as the tests record it), the closure trimmed of this
machine's paths, and the verdict they print. Imported from the scripts' own directory (.ci/ is no package)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPI_FILES = "https://files.pythonhosted.org/packages/"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def trimmed(report: dict) -> dict:
    """The report with only what the checks read, and no path of this machine."""
    items = []
    for item in report.get("install", []):
        info = item.get("download_info", {})
        if "dir_info" in info:
            where = {"url": "file:///project", "dir_info": {}}
        else:
            where = {"url": PYPI_FILES + info.get("url", "").rsplit("/", 1)[-1]}
        meta = {"name": item["metadata"]["name"], "version": item["metadata"]["version"]}
        items.append({"metadata": meta, "download_info": where})
    return {"version": report.get("version"), "install": items}


def main(
    argv: list[str] | None,
    *,
    name: str,
    doc: str,
    resolve: Callable[[Path], dict],
    check: Callable[[dict], tuple[list[str], list[str]]],
    trim: Callable[[dict], dict],
    passed: Callable[[list[str]], str],
) -> int:
    """Parse the command line, get the report, save it if asked, check it: 0 clean (passed(names) printed),
    1 with every problem printed to stderr. `check` returns (every package, what is wrong)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("project", nargs="?", default=str(ROOT))
    ap.add_argument("--report", help="check this pip --report JSON instead of resolving")
    ap.add_argument("--save", help="also write the closure here, trimmed as the tests record it")
    args = ap.parse_args(argv)
    if args.report:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    else:
        report = resolve(Path(args.project))
    if args.save:
        Path(args.save).write_text(json.dumps(trim(report), indent=1) + "\n", encoding="utf-8")
    names, wrong = check(report)
    for line in wrong:
        print(f"{name}: {line}", file=sys.stderr)
    if wrong:
        return 1
    print(f"{name}: {passed(names)}")
    return 0
