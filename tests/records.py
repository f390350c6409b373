"""Record classes that more than one schema test needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class V1:
    """The first version of record ``Rec``."""

    id: int


@dataclass
class V2:
    """``Rec`` with an optional field added: a compatible evolution of ``V1``."""

    id: int
    extra: Optional[str] = None


# Both register as record "Rec", so that the broker sees two versions of one schema.
V1.__name__ = V2.__name__ = "Rec"
