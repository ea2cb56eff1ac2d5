"""GGUF: metadata, conversion to a safetensors folder, per-family quirks."""
