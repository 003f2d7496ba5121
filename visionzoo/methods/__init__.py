"""Every method package; importing this registers all architectures and tasks."""

from . import classify, fga, ivpt, pretrain, ram  # noqa: F401
