"""Every method package; importing this registers all architectures and tasks."""

from . import classify, fga, pretrain, ram  # noqa: F401
