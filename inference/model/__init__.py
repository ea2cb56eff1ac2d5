"""The decoder in PyTorch: config, layers and their linear backends, rotary, the KV cache, attention capture, weights."""
