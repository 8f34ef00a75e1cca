"""Ctrl-C while llama.cpp runs a long C call (a model load, a quantization).

Python runs its SIGINT handler at the next Python bytecode of the main thread, which during a C call is
inside one of our ctypes callbacks (the log, the load progress). A KeyboardInterrupt raised there cannot cross
the C frames: ctypes prints "Exception ignored" and the work goes on. So around such a call the handler only
records the signal; the load's progress callback then asks llama.cpp to stop, and once the call has returned
the interrupt is raised in Python, where the CLI turns it into "interrupted" and exit status 130. The
callbacks themselves never raise (`note_from_callback`), for a Ctrl-C outside these calls.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

_pending = False


def pending() -> bool:
    """A Ctrl-C has arrived and not yet been raised."""
    return _pending


def note() -> None:
    global _pending
    _pending = True


def raise_pending() -> None:
    """Raise the KeyboardInterrupt that arrived while C code was running, if one did."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


def _record(_sig: int, _frame: object) -> None:
    note()


@contextlib.contextmanager
def deferred() -> Iterator[Callable[[], bool]]:
    """Run C calls with Ctrl-C recorded instead of raised; it is raised when the block ends, and it wins
    over an error the block raised (a load the progress callback stopped fails in llama.cpp)."""
    old = None
    # only where Ctrl-C would raise KeyboardInterrupt: an ignored SIGINT or a caller's own handler stays
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread: signals go to the main thread anyway
            old = signal.signal(signal.SIGINT, _record)
    try:
        yield pending
    except Exception:
        if _pending:
            raise_pending()
        raise
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
    raise_pending()


@contextlib.contextmanager
def stops_generation() -> Iterator[Callable[[], bool]]:
    """Around a generation whose output is worth keeping (run): Ctrl-C sets a flag, which the caller's
    per-token callback returns to end the generation where it is (as chat's answers do); no exception can
    leave llama.cpp half-way. Only where Ctrl-C would raise KeyboardInterrupt (the main thread, SIGINT at
    Python's default): elsewhere the flag stays False and SIGINT is left as it was."""
    hit = [False]

    def handler(_sig: int, _frame: object) -> None:
        hit[0] = True

    old = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread
            old = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: hit[0]
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def guard_callback(func: Callable[..., object], default: object) -> Callable[..., object]:
    """`func` for use as a ctypes callback: it never raises into C. A KeyboardInterrupt is recorded (raised
    by the next `deferred` block or `raise_pending`); anything else gives `default`."""

    def guarded(*args: object) -> object:
        try:
            return func(*args)
        except KeyboardInterrupt:
            note()
        except BaseException:  # noqa: BLE001 - an exception cannot cross C frames; ctypes would print it
            pass
        return default

    guarded.__name__ = getattr(func, "__name__", "callback")
    return guarded


def _progress(_progress_value: float, _user_data: object) -> bool:
    return not _pending  # False stops the load: llama_model_load_from_file returns NULL


def load_progress_callback() -> object:
    """The progress callback for llama_model_params: it stops a load once Ctrl-C has been pressed."""
    from edgepilot.engine.llama_binding import llama_cpp

    global _LOAD_PROGRESS
    if _LOAD_PROGRESS is None:  # kept alive here: llama.cpp holds only the C pointer
        _LOAD_PROGRESS = llama_cpp.llama_progress_callback(guard_callback(_progress, False))
    return _LOAD_PROGRESS


_LOAD_PROGRESS: object = None
