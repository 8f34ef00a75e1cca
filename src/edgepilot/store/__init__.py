"""The model store and its tools: pull, list, remove, quantize, compare."""
