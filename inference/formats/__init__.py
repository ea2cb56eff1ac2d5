"""Model files read as files: safetensors and GGUF headers, GGUF conversion."""
