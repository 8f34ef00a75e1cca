"""Devices pooled over llama.cpp's RPC backend: rpc-server on each helper, a plan of which layers go where."""
