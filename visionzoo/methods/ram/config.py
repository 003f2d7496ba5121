"""Architecture hyper-parameters of the RAM family (one dataclass, JSON-friendly)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RAMConfig:
    """Widths and depths of a RAM-family network.

    Attributes:
        in_channels: image channel counts the network has heads/tails for (1 = grey,
            2 = complex as real/imag, 3 = RGB); other counts are rejected at call time.
        widths: feature channels at the 4 scales (full, 1/2, 1/4, 1/8 resolution).
        blocks: measurement-conditioned residual blocks per scale (in each encoder, decoder
            and bottleneck stage).
    """

    in_channels: tuple[int, ...] = (1, 2, 3)
    widths: tuple[int, int, int, int] = (64, 128, 256, 512)
    blocks: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_channels", tuple(int(c) for c in self.in_channels))
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        if len(self.widths) != 4 or any(w <= 0 for w in self.widths):
            raise ValueError(f"widths must be 4 positive channel counts (one per scale), got {self.widths}.")
        if self.blocks < 1:
            raise ValueError(f"blocks must be >= 1, got {self.blocks}.")
        if not self.in_channels or any(c <= 0 for c in self.in_channels):
            raise ValueError(f"in_channels must be positive channel counts, got {self.in_channels}.")

    def to_dict(self) -> dict:
        return {"in_channels": list(self.in_channels), "widths": list(self.widths), "blocks": self.blocks}


# deepinv.models.RAM hard-codes these (nc = [64, 128, 256, 512], 4 blocks per scale).
RAM_BASE = RAMConfig()
RAM_SMALL = RAMConfig(widths=(32, 64, 128, 256), blocks=2)
RAM_TINY = RAMConfig(widths=(16, 32, 64, 128), blocks=2)
