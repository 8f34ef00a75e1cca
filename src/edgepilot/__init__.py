"""edgepilot: make local LLMs run well on phones and small ARM boards, on top of llama.cpp."""

__version__ = "0.1.0"
