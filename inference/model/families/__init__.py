"""Model families: one module per family and the registry that names them."""
