"""Query parameters of the hot routes, parsed by hand.

FastAPI's per-parameter validation (dependency solving, pydantic) was a
third of a single-record produce request's CPU time. The produce and fetch
routes take the raw request and parse their few parameters here, with the
same clear 400 INVALID_REQUEST errors; ``openapi()`` documents them so
``/docs`` still shows every parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import ApiError


@dataclass(frozen=True, slots=True)
class IntParam:
    name: str
    default: int | None
    lo: int
    hi: int
    description: str = ""

    def parse(self, raw: str | None) -> int | None:
        if raw is None:
            return self.default
        try:
            value = int(raw)
        except ValueError:
            raise ApiError("INVALID_REQUEST", f"{self.name} must be an integer, not {raw!r}") from None
        if not self.lo <= value <= self.hi:
            raise ApiError(
                "INVALID_REQUEST", f"{self.name} must be between {self.lo} and {self.hi}, not {value}"
            )
        return value

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "integer", "minimum": self.lo, "maximum": self.hi}
        if self.default is not None:
            s["default"] = self.default
        return s


@dataclass(frozen=True, slots=True)
class ChoiceParam:
    name: str
    default: str
    choices: tuple[str, ...]
    description: str = ""

    def parse(self, raw: str | None) -> str:
        if raw is None:
            return self.default
        if raw not in self.choices:
            raise ApiError(
                "INVALID_REQUEST", f"{self.name} must be one of {', '.join(self.choices)}, not {raw!r}"
            )
        return raw

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices), "default": self.default}


@dataclass(frozen=True, slots=True)
class StrParam:
    name: str
    description: str = ""

    def parse(self, raw: str | None) -> str | None:
        return raw

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}


Param = IntParam | ChoiceParam | StrParam


def parse(query: Mapping[str, str], specs: Sequence[Param]) -> dict[str, Any]:
    return {p.name: p.parse(query.get(p.name)) for p in specs}


def path_int(path_params: Mapping[str, Any], name: str) -> int:
    raw = path_params[name]
    try:
        value = int(raw)
    except ValueError:
        raise ApiError("INVALID_REQUEST", f"{name} must be an integer, not {raw!r}") from None
    return value  # a negative number is a partition that does not exist: 404 later


def openapi(
    specs: Sequence[Param], path: Sequence[tuple[str, str]] = (), body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``openapi_extra`` for a route that parses its parameters itself."""
    params: list[dict[str, Any]] = [
        {"name": n, "in": "path", "required": True, "schema": {"type": t}} for n, t in path
    ]
    params += [
        {"name": p.name, "in": "query", "required": False, "schema": p.schema(),
         "description": p.description}
        for p in specs
    ]
    extra: dict[str, Any] = {"parameters": params}
    if body is not None:
        extra["requestBody"] = body
    return extra
