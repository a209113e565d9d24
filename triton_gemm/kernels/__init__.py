"""Triton kernels: one module per algorithm, each a private @triton.jit kernel and its launcher."""
