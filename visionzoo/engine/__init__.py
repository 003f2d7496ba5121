"""One training loop and one evaluation loop that every method plugs into."""

from .evaluator import evaluate
from .task import Task, TaskParts, get_task, list_tasks, register_task
from .trainer import fit

__all__ = ["Task", "TaskParts", "register_task", "get_task", "list_tasks", "fit", "evaluate"]
