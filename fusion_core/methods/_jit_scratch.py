"""Stack scratch arrays for compiled kernels (imported only where numba is: the optional ``fast`` extra).

A compiled kernel's work arrays made with ``np.empty`` live on the heap, and the compiler must assume that every
store into another array (the M-step's expected counts, the posteriors) may change them, so each class's running
sum goes back to memory and is read again for every response.  :func:`alloca_f64` reserves them on the kernel's
stack instead (viewed as an array with ``carray``): nothing else can point there, so the sums stay in registers
(Dawid–Skene pass at 1M responses, one core: 7.3 → 6.4 ms, same numbers to the bit; ``benchmarks/bench_scale.py``).
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.numpy_support import carray


@intrinsic
def _alloca_f64(typingctx: Any, size: Any) -> Any:
    """A pointer to ``size`` float64 (a compile-time constant) on the stack of the calling kernel, reserved once at
    its entry."""
    if not isinstance(size, types.IntegerLiteral):
        return None  # the size must be a constant of the kernel (a clo variable), not a runtime value
    n = int(size.literal_value)
    sig = types.CPointer(types.float64)(size)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        count = context.get_constant(types.intp, n)
        return cgutils.alloca_once(builder, context.get_value_type(types.float64), size=count)

    return sig, codegen


alloca_f64: Any = _alloca_f64  # called inside compiled code with the size only

__all__ = ["alloca_f64", "carray"]
