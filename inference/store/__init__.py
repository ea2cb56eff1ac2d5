"""Where models come from: the user's folders and cache, the default model, the picker's catalog, loading."""
