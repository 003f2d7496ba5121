"""Counter-based random numbers from integer hashing: same keys, same numbers on any machine.

PartWorld needs pixels that do not depend on the machine, the torch version or how items are
batched. ``torch.Generator`` streams are only promised per torch build and force one generator per
item, so PartWorld draws its randomness by hashing integer counters instead: every number is a
pure function of ``(key, stream, counter)``. All arithmetic is exact int64 (products are split into
16-bit halves so nothing overflows), and uniforms are multiples of 2^-24, exact in float32.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2^32`` for ``0 <= x < 2^32`` without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & _MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche hash (xorshift-multiply) of int64 values in ``[0, 2^32)``."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def combine(*parts: torch.Tensor | int) -> torch.Tensor:
    """Hash several integers (tensors broadcast together) into one 32-bit key, order-sensitive."""
    h = torch.tensor(0x2545F491, dtype=torch.int64)
    for p in parts:
        p = torch.as_tensor(p, dtype=torch.int64)
        h = mix32(h ^ mix32(p & _MASK32) ^ ((p >> 32) & _MASK32))
        h = mix32(h + 0x9E3779B9)
    return h


def uniform(key: torch.Tensor, stream: int, n: int) -> torch.Tensor:
    """``n`` uniforms in ``[0, 1)`` per key.

    Args:
        key: int64 keys, any shape ``[...]`` (from :func:`combine`).
        stream: an integer naming what the numbers are for, so uses never share numbers.
        n: numbers per key.

    Returns:
        float32 ``[..., n]``.
    """
    key = key.to(torch.int64)
    counter = torch.arange(n, dtype=torch.int64)
    h = mix32(mix32(key[..., None] ^ (stream * 0x632BE5AB & _MASK32)) + counter)
    h = mix32(h ^ 0x5BD1E995)
    return (h >> 8).to(torch.float32) * (1.0 / (1 << 24))


def uniform_field(key: torch.Tensor, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A field of uniforms ``[B, *shape]`` in ``[0, 1)``, one independent field per key ``[B]``."""
    count = 1
    for s in shape:
        count *= s
    return uniform(key.reshape(-1), stream, count).reshape(key.shape[0], *shape)


def randint(key: torch.Tensor, stream: int, n: int, high: int) -> torch.Tensor:
    """``n`` integers in ``[0, high)`` per key: int64 ``[..., n]``."""
    u = uniform(key, stream, n)
    return (u * high).floor().to(torch.int64).clamp_(max=high - 1)
