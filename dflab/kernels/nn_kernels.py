"""nn_kernels (being written)."""
