"""Run a child under a hard memory limit (a fresh cgroup v1 memory group), as lmkd or a small phone would.

`edgepilot doctor --memory-limit 300MiB -- CMD` reproduces an out-of-memory kill on a desktop or board. The
child joins the group through a /bin/sh wrapper that writes its own pid to cgroup.procs and then execs the
command, so the pid we wait for is the real program. Needs root (or a delegated, writable hierarchy).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from edgepilot.device.system import linux_kernel
from edgepilot.errors import UserError

CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")


def cgroup_problem(root: Path = CGROUP_V1_MEMORY) -> str | None:
    """None when a memory group can be made under root; otherwise why not, with what to do."""
    if not linux_kernel():  # Android's Python says "android": its kernel has the same cgroups
        return "memory limits need Linux cgroups (Linux or Android)"
    if not (root / "memory.limit_in_bytes").exists():
        return (
            f"{root} is not a cgroup v1 memory hierarchy; on a cgroup v2 system use "
            "`systemd-run --user --scope -p MemoryMax=SIZE -p MemorySwapMax=0 CMD` and "
            "`edgepilot doctor --log`"
        )
    if not os.access(root, os.W_OK):
        return f"{root} is not writable: run as root to use --memory-limit"
    return None


def drop_page_cache() -> bool:
    """sync, then drop clean page cache: a model file's pages are charged to whoever reads them first."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


class MemoryLimit:
    """A fresh `edgepilot-doctor-N` memory group with a hard limit and no swap; removed on exit."""

    def __init__(self, limit_bytes: int, root: Path = CGROUP_V1_MEMORY) -> None:
        self.limit_bytes = int(limit_bytes)
        self.root = root
        self.path: Path | None = None

    def __enter__(self) -> MemoryLimit:
        problem = cgroup_problem(self.root)
        if problem:
            raise UserError(problem)
        for n in range(1000):
            path = self.root / f"edgepilot-doctor-{os.getpid()}-{n}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise UserError(
                    f"cannot create a memory cgroup under {self.root}: {exc.strerror or exc}"
                ) from None
        else:
            raise UserError(f"cannot create a memory cgroup under {self.root}")
        self.path = path
        try:
            # memory first, then memory+swap (memsw must stay >= memory); swappiness 0 keeps pages off swap
            (path / "memory.limit_in_bytes").write_text(str(self.limit_bytes))
            for name, value in (("memory.memsw.limit_in_bytes", self.limit_bytes), ("memory.swappiness", 0)):
                with contextlib.suppress(OSError):
                    (path / name).write_text(str(value))
        except OSError as exc:
            self.__exit__()
            raise UserError(f"cannot set a memory limit in {path}: {exc.strerror or exc}") from None
        return self

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run by a shell that first moves itself into the group, then execs argv (same pid)."""
        assert self.path is not None
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def _read(self, name: str) -> str:
        try:
            return (self.path / name).read_text().strip() if self.path else ""
        except OSError:
            return ""

    def counters(self) -> dict[str, Any]:
        oom = dict(
            line.split(None, 1) for line in self._read("memory.oom_control").splitlines() if " " in line
        )

        def num(text: str) -> int:
            try:
                return int(text)
            except ValueError:
                return 0

        return {
            "limit_bytes": num(self._read("memory.limit_in_bytes")),
            "max_usage_bytes": num(self._read("memory.max_usage_in_bytes")),
            "memsw_max_usage_bytes": num(self._read("memory.memsw.max_usage_in_bytes")),
            "failcnt": num(self._read("memory.failcnt")),
            "oom_kill": num(oom.get("oom_kill", "0")),
            "under_oom": num(oom.get("under_oom", "0")),
        }

    def __exit__(self, *exc: object) -> None:
        if self.path is None:
            return
        for _ in range(50):  # the group can only be removed once its tasks are gone
            try:
                self.path.rmdir()
                break
            except OSError:
                with contextlib.suppress(OSError):
                    (self.path / "memory.force_empty").write_text("0")
                time.sleep(0.1)
        self.path = None
