"""`edgepilot build`: llama.cpp's own tools (llama-server, llama-bench, ...) compiled for this device."""
