"""What model files say about themselves, read from their headers only: safetensors and GGUF."""
