"""TokenStep inference engine: plain Python and PyTorch, no Qt."""
