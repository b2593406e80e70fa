# SPDX-License-Identifier: MIT
"""Argument checks, made before any CUDA call: what ctypes would pass silently wrong is refused."""
import ctypes

import numpy as np


def check_array(x, dtype, name="array", ndim=None, shape=None, writable=False):
    """Refuse what ctypes would pass silently wrong: another dtype, another shape, a strided
    view (a slice or a transpose: its elements are not where C expects them)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, not {type(x).__name__}")
    if x.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, not {x.dtype.name} "
                        f"(convert with {name}.astype(np.{np.dtype(dtype).name}))")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), not {x.ndim} (shape {x.shape})")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, not {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} is not C-contiguous (a slice or a transpose?): "
                         f"pass np.ascontiguousarray({name})")
    if writable and not x.flags.writeable:
        raise ValueError(f"{name} is read-only, but the C code writes into it")
    return x


def check_count(n, name="n", maximum=2**31 - 1, minimum=0):
    """A size or count: an integer in [minimum, maximum] (C int by default)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {type(n).__name__}")
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    if n > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {n}")
    return int(n)


def ptr(x):
    """The address of a checked NumPy array's data, for a c_void_p argument."""
    return ctypes.c_void_p(x.ctypes.data)
