"""Text in and out: the tokenizer, the chat template sandbox, stop strings."""
