"""Every method package; importing this registers all architectures and tasks."""

from . import classify, pretrain, ram  # noqa: F401
