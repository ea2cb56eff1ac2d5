"""Plot and chip helpers the dock views are built from."""
