"""What the views draw, Qt-free: the history of a run, comparisons, timing, text formatting."""
