"""The one error shape of the registry: a field path and the reason it was refused."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One refused field. `field` is a dotted path into the event type (`schema.schema`,
    `authorization.admins[0].value`); `reason` says what is wrong with it."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class EventTypeInvalid(Exception):
    """An event type was refused; the HTTP layer answers 422 with `detail` as the Problem detail."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        if not self.errors:
            raise ValueError("EventTypeInvalid needs at least one FieldError")
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        """All errors in one line, e.g. `name: is required; category: must be one of: ...`."""
        return "; ".join(str(error) for error in self.errors)
