"""Every method package; importing this registers all architectures and tasks."""

from . import classify  # noqa: F401
