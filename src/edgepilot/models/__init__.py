"""The model store: pull from a hub, list, remove (and quantize, compare)."""
