"""training_kernels (being written)."""
