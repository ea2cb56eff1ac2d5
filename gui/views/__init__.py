"""The views: one module per dock, the toolbar's history slider, and what they share (plotting, format)."""
