"""Class-incremental metrics from the accuracy matrix (spec §Protocol).

``matrix[t][j]`` is the accuracy (%) on the test classes of task ``j`` after training task ``t``
(``j <= t``; a joint run has one row over all tasks). ``curve[t]`` is the accuracy on all classes
seen after task ``t`` (items pooled, so tasks weigh by their test size).

* **Acc**: ``curve[-1]``;
* **AAA**: mean of ``curve`` (average over tasks of the accuracy on all classes seen so far);
* **Forgetting**: mean over old tasks ``j < T−1`` of ``max_{j<=t<T−1} matrix[t][j] − matrix[T−1][j]``.
"""

from __future__ import annotations

import math


def check_matrix(matrix: list[list[float]]) -> None:
    """Raise ValueError unless ``matrix`` is lower-triangular (row ``t`` has ``t + 1`` entries) or a
    single joint row."""
    if not matrix:
        raise ValueError("empty accuracy matrix")
    if len(matrix) == 1:
        return
    for t, row in enumerate(matrix):
        if len(row) != t + 1:
            raise ValueError(f"row {t} of the accuracy matrix has {len(row)} entries, expected {t + 1}")


def forgetting(matrix: list[list[float]]) -> float | None:
    """Mean forgetting over the old tasks (None for fewer than two stages)."""
    check_matrix(matrix)
    stages = len(matrix)
    if stages < 2:
        return None
    final = matrix[-1]
    drops = [max(matrix[t][j] for t in range(j, stages - 1)) - final[j] for j in range(stages - 1)]
    return sum(drops) / len(drops)


def cl_metrics(matrix: list[list[float]], curve: list[float]) -> dict[str, float | None]:
    """``{"acc", "aaa", "forgetting"}`` (percent; AAA/forgetting None for a single-stage run)."""
    check_matrix(matrix)
    if len(curve) != len(matrix):
        raise ValueError(f"{len(curve)} curve points for {len(matrix)} stages")
    if any(math.isnan(a) for a in curve):
        raise ValueError("the accuracy curve holds NaN")
    return {"acc": curve[-1], "aaa": sum(curve) / len(curve) if len(curve) > 1 else None,
            "forgetting": forgetting(matrix)}
