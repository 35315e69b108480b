"""The one place where complex samples cross between torch and numpy.

On the wire and in radio backends: numpy complex64 (C-contiguous). Inside
torch: complex64 or complex128 tensors.
"""

from __future__ import annotations

import numpy as np
import torch


def to_numpy(x: torch.Tensor, dtype=np.complex64) -> np.ndarray:
    """Tensor [...] complex (complex64/complex128) -> numpy [...] complex64 (or complex128 when
    ``dtype`` is np.complex128), same shape, detached, on the CPU, C-contiguous."""
    if not torch.is_complex(x):
        raise TypeError(f"expected a complex tensor, got {x.dtype}")
    tdt = torch.complex128 if np.dtype(dtype) == np.complex128 else torch.complex64
    return np.ascontiguousarray(x.detach().to("cpu", tdt).numpy())


def to_numpy_real(x: torch.Tensor, dtype=np.float32) -> np.ndarray:
    """Real tensor [...] (any real dtype) -> numpy [...] float32 (or float64 when ``dtype`` is
    np.float64), same shape, detached, on the CPU, a copy."""
    if torch.is_complex(x):
        raise TypeError(f"expected a real tensor, got {x.dtype}")
    tdt = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
    return x.detach().to("cpu", tdt).numpy().copy()


def to_torch(a: np.ndarray, dtype: torch.dtype = torch.complex64, device="cpu") -> torch.Tensor:
    """numpy complex array [...] (complex, any precision) -> tensor [...] of ``dtype``
    (complex128 when ``dtype`` is torch.complex128, else complex64) on ``device``; a copy, so
    the caller may reuse its buffer."""
    a = np.asarray(a)
    if not np.iscomplexobj(a):
        raise TypeError(f"expected a complex array, got {a.dtype}")
    return torch.from_numpy(
        np.array(a, dtype=np.complex128 if dtype == torch.complex128 else np.complex64)
    ).to(device)
