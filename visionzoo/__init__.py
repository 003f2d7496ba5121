"""visionzoo: adapt pretrained vision models and solve imaging inverse problems.

>>> import visionzoo
>>> visionzoo.list_models("classifier*")[:1]
['classifier_deit_tiny_patch16_224']
"""

from . import backbones as _backbones  # noqa: F401  (registers vit_tiny_partworld with timm)
from .cards import list_pretrained
from .checkpoint import from_pretrained, save_pretrained
from .factory import create_model, create_transforms, load_pretrained
from .hub import push_to_hub
from .registry import is_model, list_models, register_family, register_model
from .version import __version__

__all__ = [
    "__version__", "create_model", "create_transforms", "list_models", "list_pretrained", "load_pretrained",
    "from_pretrained", "save_pretrained", "push_to_hub", "is_model", "register_model", "register_family",
]
