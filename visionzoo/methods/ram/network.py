"""RAMNet: deepinv's RAM with configurable widths/depths, input checks and inference speed options.

``RAMNet(RAM_BASE)`` has exactly the modules of ``deepinv.models.RAM`` (same names, shapes and
order), so state dicts are interchangeable and, in the default mode, outputs are bit-identical.
Smaller members of the family (:data:`~.config.RAM_SMALL`, :data:`~.config.RAM_TINY`) use the same
deepinv blocks with fewer channels and blocks.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence

import torch
from deepinv.models import RAM
from deepinv.models.ram import (
    BaseEncBlock,
    InHead,
    OutTail,
    downsample_strideconv,
    krylov_embeddings,
    upsample_convtranspose,
)
from deepinv.physics import LinearPhysicsMultiScaler, Physics
from torch import Tensor, nn

from ...errors import CheckpointError
from .checks import RAMInputError, check_channels, check_measurement, check_physics, image_shape
from .config import RAM_BASE, RAMConfig
from .fast_physics import PrebuiltMultiScaler, ResamplerCache


class RAMNet(RAM):
    """Physics-aware non-iterative reconstructor; call as ``model(y, physics)``.

    Args:
        config: widths, blocks per scale and supported channel counts (:class:`RAMConfig`).
        device: where to create the parameters.

    Shapes: ``y`` is whatever the operator produces (``[B, C, H, W]`` for most operators); the
    output is ``[B, C, H, W]`` with ``C`` in ``config.in_channels`` (2 = complex as real/imag).

    Inference options (off by default, so that outputs equal deepinv's bit for bit; the default
    path already reuses the multiscale operators across calls):
        ``fast_multiscale``: FFT multiscale operators (~1e-6 difference, faster);
        ``use_inference_mode``: run under ``torch.inference_mode()`` when not training;
        ``autocast_dtype``: e.g. ``torch.bfloat16`` to run convolutions in reduced precision;
        channels-last weights via :meth:`optimize_for_inference`.
        ``check_inputs`` (on by default) validates inputs before the network runs.
    """

    def __init__(self, config: RAMConfig = RAM_BASE, device: torch.device | str | None = None):
        # deepinv's RAM.__init__ hard-codes nc = (64, 128, 256, 512) and 4 blocks per scale, so we
        # skip it and build the same modules, under the same names and in the same order, from config.
        super(RAM, self).__init__()
        self.config = config
        nc = config.widths
        chans = list(config.in_channels)
        self.in_channels = tuple(chans)
        self.fact_realign = nn.Parameter(torch.tensor([1.0], device=device))
        self.separate_head = False  # deepinv's value for a tuple in_channels; we check channels ourselves

        def stage(width: int, upscale: int) -> BaseEncBlock:
            return BaseEncBlock(width, width, nb=config.blocks, img_channels=chans, decode_upscale=upscale)

        self.m_head = InHead([c + 2 for c in chans], nc[0])
        self.m_down1 = stage(nc[0], 1)
        self.m_down2 = stage(nc[1], 2)
        self.m_down3 = stage(nc[2], 4)
        self.m_body = stage(nc[3], 8)
        self.m_up3 = stage(nc[2], 4)
        self.m_up2 = stage(nc[1], 2)
        self.m_up1 = stage(nc[0], 1)
        self.pool1 = downsample_strideconv(nc[0], nc[1], bias=False, mode="2")
        self.pool2 = downsample_strideconv(nc[1], nc[2], bias=False, mode="2")
        self.pool3 = downsample_strideconv(nc[2], nc[3], bias=False, mode="2")
        self.up3 = upsample_convtranspose(nc[3], nc[2], bias=False, mode="2")
        self.up2 = upsample_convtranspose(nc[2], nc[1], bias=False, mode="2")
        self.up1 = upsample_convtranspose(nc[1], nc[0], bias=False, mode="2")
        self.m_tail = OutTail(nc[0], chans)

        self.sigma_threshold = 5e-3
        self.gain_threshold = 1e-4

        self.check_inputs = True
        self.fast_multiscale = False
        self.use_inference_mode = False
        self.autocast_dtype: torch.dtype | None = None
        self._resamplers = ResamplerCache()
        # channels-last weights are not contiguous; safetensors refuses them, so state dicts are packed.
        self.register_state_dict_post_hook(_contiguous_state_dict)
        if device is not None:
            self.to(device)

    # ----------------------------------------------------------------------------------- options
    def optimize_for_inference(self, channels_last: bool = True, fast_multiscale: bool = True,
                               inference_mode: bool = True, autocast_dtype: torch.dtype | None = None) -> RAMNet:
        """Switch to eval mode with the speed options; returns ``self``.

        ``autocast_dtype=torch.bfloat16`` trades accuracy (~1e-2 abs. difference) for speed; the
        other options keep float32 results within ~1e-5 of the default path.
        """
        self.eval()
        if channels_last:
            self.to(memory_format=torch.channels_last)
        self.fast_multiscale = fast_multiscale
        self.use_inference_mode = inference_mode
        self.autocast_dtype = autocast_dtype
        return self

    def _run_context(self, device: torch.device) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        if not self.training:
            if self.use_inference_mode:
                stack.enter_context(torch.inference_mode())
            if self.autocast_dtype is not None:
                stack.enter_context(torch.autocast(device_type=device.type, dtype=self.autocast_dtype))
        return stack

    # ----------------------------------------------------------------------------------- forward
    def forward(self, y: Tensor, physics: Physics | None = None, sigma: float | Tensor | None = None,
                gain: float | Tensor | None = None, img_size: Sequence[int] | None = None) -> Tensor:
        """Reconstruct ``x`` from ``y`` (see deepinv's ``RAM.forward``); inputs are checked first."""
        if self.check_inputs:
            check_measurement(y)
            check_physics(physics, sigma, gain)
            if physics is None and sigma is None and gain is None:
                raise RAMInputError("pass an operator (model(y, physics)) or a noise level "
                                 "(model(y, sigma=...)) to a RAM-family model.")
            channels = image_shape(y, physics)[1] if physics is not None else y.shape[1]
            check_channels(int(channels), self.in_channels)
        device = (y[0] if not isinstance(y, Tensor) else y).device
        with self._run_context(device):
            out = super().forward(y, physics, sigma=sigma, gain=gain, img_size=img_size)
        return out.float() if self.autocast_dtype is not None and out.dtype != torch.float32 else out

    def _multiscale(self, physics: Physics, x0: Tensor) -> LinearPhysicsMultiScaler:
        """deepinv's multiscale operator with resamplers cached per image size (bit-identical), or
        with FFT resamplers when ``fast_multiscale`` (see :mod:`.fast_physics`)."""
        size = tuple(x0.shape[-3:])
        if self.fast_multiscale:
            dtype = x0.dtype if x0.dtype in (torch.float32, torch.float64) else torch.float32
            resamplers = self._resamplers.get(size, x0.device, dtype, fft=True)
        else:
            resamplers = self._resamplers.get(size, x0.device, None, fft=False)
        return PrebuiltMultiScaler(physics, size, resamplers, device=x0.device)

    def forward_unet(self, x0: Tensor, sigma: float | Tensor | None = None, gain: float | Tensor | None = None,
                     physics: Physics | None = None, y: Tensor | None = None) -> Tensor:
        """deepinv's ``RAM.forward_unet`` with a pluggable multiscale operator (see :meth:`_multiscale`).

        ``x0``: ``[B, C, H, W]`` padded ``Aᵀy``; ``H, W`` multiples of 16.
        """
        img_channels = x0.shape[1]
        physics = self._multiscale(physics, x0)

        y_list = []
        for scale in range(4):
            physics.set_scale(scale)
            y_list.append(krylov_embeddings(physics.downsample(x0, scale=scale), physics, 2**scale, N=2))
        physics.set_scale(0)

        if y is not None:
            x0 = self.realign_input(x0, physics, y, sigma)
        x0 = self.base_conditioning(x0, sigma, gain)

        def block(m: BaseEncBlock, x: Tensor, scale: int) -> Tensor:
            return m(x, physics=physics, y=y_list[scale], img_channels=img_channels, scale=scale)

        x1 = self.m_head(x0)
        x1_ = block(self.m_down1, x1, 0)
        x2 = self.pool1(x1_)
        x3_ = block(self.m_down2, x2, 1)
        x3 = self.pool2(x3_)
        x4_ = block(self.m_down3, x3, 2)
        x4 = self.pool3(x4_)
        x = block(self.m_body, x4, 3)
        x = block(self.m_up3, self.up3(x + x4), 2)
        x = block(self.m_up2, self.up2(x + x3), 1)
        x = block(self.m_up1, self.up1(x + x2), 0)
        return self.m_tail(x + x1, img_channels)

    # ----------------------------------------------------------------------------------- weights
    def load_pretrained_weights(self, state_dict: dict[str, Tensor]) -> None:
        """Load deepinv's published ``ram.pth.tar`` (or any RAM state dict) into this network.

        Like deepinv (``load_state_dict(..., strict=False)``) entries the network does not have are
        ignored (the official file carries a few unused scalars). Unlike a plain non-strict load,
        a missing weight tensor or a shape mismatch is an error; a missing learned scalar (a
        residual gain or ``fact_realign``, initialised to 1) only warns.
        """
        state = {k.removeprefix("module."): v for k, v in state_dict.items()}
        own = self.state_dict()
        bad_shapes = [f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}"
                      for k, v in state.items() if k in own and tuple(v.shape) != tuple(own[k].shape)]
        if bad_shapes:
            raise CheckpointError(f"the weights do not fit {type(self).__name__} {self.config.to_dict()} "
                                  f"({len(bad_shapes)} shape mismatches, e.g. {bad_shapes[:3]}); load them into "
                                  "the architecture they were trained for (ram_base for deepinv's ram.pth.tar).")
        missing = [k for k in own if k not in state]
        missing_tensors = [k for k in missing if own[k].numel() > 1]
        if missing_tensors:
            raise CheckpointError(f"the weights lack {len(missing_tensors)} tensors of "
                                  f"{type(self).__name__}, e.g. {missing_tensors[:5]}; the file is not a "
                                  "RAM checkpoint for this architecture or it is truncated.")
        if missing:
            warnings.warn(f"the weights lack the scalars {missing}; they keep their initial value 1.0.",
                          stacklevel=2)
        self.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)
        self.unused_pretrained_keys = sorted(k for k in state if k not in own)


def _contiguous_state_dict(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    for k, v in state_dict.items():
        if k.startswith(prefix) and isinstance(v, Tensor) and not v.is_contiguous():
            state_dict[k] = v.contiguous()
