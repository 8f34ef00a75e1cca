"""Defaults every command shares (and shows in its --help, which must import nothing heavy): one prompt and
one context size, so `fit`, `run`, `chat`, `serve` and `cluster plan` plan the same thing without flags."""

DEFAULT_PROMPT = "Here are three things a phone can do without an internet connection:"
DEFAULT_CTX = 4096  # tokens: run's context when it fits (the planner lowers it otherwise)
