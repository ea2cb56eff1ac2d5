"""One module per dock."""
