"""Every method package; importing this registers all architectures and tasks."""

from . import classify, fga, hippotune, ivpt, pretrain, ram  # noqa: F401
