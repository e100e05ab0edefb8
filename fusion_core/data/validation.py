"""What happened between the user's table and the coded responses (:class:`ValidationReport`), and the duplicate
policies coding applies; below both :mod:`~fusion_core.data.coding` and :mod:`~fusion_core.data.responses`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DUPLICATE_POLICIES = ("keep", "first", "last", "error")


@dataclass
class ValidationReport:
    """What happened between the user's table and the coded responses."""

    rows_read: int = 0
    responses: int = 0
    dropped_missing_label: int = 0
    dropped_missing_id: int = 0
    dropped_missing_place: int = 0  # rows with their ids but no sequence or position (sequential data)
    duplicate_rows: int = 0  # rows that repeat an earlier (task, worker) pair
    duplicate_policy: str = "keep"
    duplicates_removed: int = 0
    notes: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        """Human-readable lines, one per thing a user should know."""
        out = [f"Read {self.rows_read:,} rows; kept {self.responses:,} responses."]
        if self.dropped_missing_label:
            out.append(f"Dropped {self.dropped_missing_label:,} rows with a missing label.")
        if self.dropped_missing_id:
            out.append(f"Dropped {self.dropped_missing_id:,} rows with a missing task or worker id.")
        if self.dropped_missing_place:
            out.append(f"Dropped {self.dropped_missing_place:,} rows with a missing sequence or position.")
        if self.duplicate_rows:
            if self.duplicate_policy == "keep":
                out.append(
                    f"{self.duplicate_rows:,} rows repeat a (task, worker) pair; kept as separate responses "
                    "(policy 'keep')."
                )
            else:
                out.append(
                    f"{self.duplicate_rows:,} rows repeat a (task, worker) pair; removed "
                    f"{self.duplicates_removed:,} (policy '{self.duplicate_policy}')."
                )
        out.extend(self.notes)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_read": self.rows_read,
            "responses": self.responses,
            "dropped_missing_label": self.dropped_missing_label,
            "dropped_missing_id": self.dropped_missing_id,
            "dropped_missing_place": self.dropped_missing_place,
            "duplicate_rows": self.duplicate_rows,
            "duplicate_policy": self.duplicate_policy,
            "duplicates_removed": self.duplicates_removed,
            "notes": list(self.notes),
        }
