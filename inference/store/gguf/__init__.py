"""GGUF files: their metadata, and their conversion into a safetensors folder in the user cache (by the
families' GGUF tensor names), with the tokenizer llama.cpp keeps inside the file."""
