"""FGA: sharpness-aware prompt tuning (SAPT) and sharpness-based test-time view selection (STSS)
for open_clip models, with CoOp, CoCoOp, TPT, Zero and zero-shot CLIP baselines."""

from . import cocoop, model, task  # noqa: F401
