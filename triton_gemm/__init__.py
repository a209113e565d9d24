"""triton_gemm: autotuned Triton GEMM kernels with torch.matmul semantics."""

from .api import (PRECISIONS, ArgumentTypeError, ArgumentValueError, addmm, baddbmm, bmm,
                  last_config, linear, matmul, mm, resolve_precision, tuned_configs)

from . import nn
from .intercept import intercept
from .nn import patch

__all__ = ["intercept", "nn", "patch", "PRECISIONS", "ArgumentTypeError", "ArgumentValueError",
           "addmm", "baddbmm", "bmm", "last_config", "linear", "matmul", "mm",
           "resolve_precision", "tuned_configs"]
__version__ = "0.1.0"
