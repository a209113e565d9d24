"""Benchmark report for triton_gemm: suites, measurement, tables and plots."""
