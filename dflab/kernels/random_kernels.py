"""random_kernels (being written)."""
