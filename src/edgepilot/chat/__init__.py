"""`edgepilot chat`: multi-turn sessions that keep their KV cache between turns."""
