"""Strict argument models: the base every operation's arguments share (a wrong type or an unknown
field is refused, never coerced), and the one way a payload becomes one, with a one-line error."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import InputError

A = TypeVar("A", bound="Args")


class Args(BaseModel):
    """Strict: a wrong type or an unknown field is a 400 (exit code 2), never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


def validate(model: type[A], payload: Any) -> A:
    """`payload` as a `model`; a bad one is an InputError naming the first bad field."""
    try:
        return model.model_validate({} if payload is None else payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InputError(
            f"bad argument {where}: {first['msg']}",
            hint=f"{len(exc.errors())} problem(s); fields: {', '.join(model.model_fields)}",
        ) from None


def model_of(declared: type, name: str | None = None) -> type[Args]:
    """A strict request model made from a dataclass of arguments (fields, defaults, and the `help`,
    `ge`, `le`, `gt`, `min_length`, `max_length` of their metadata), so a request is checked as the library call is."""
    import dataclasses
    import typing

    from pydantic import Field, create_model

    hints = typing.get_type_hints(declared)
    definitions: dict[str, Any] = {}
    for f in dataclasses.fields(declared):
        meta = f.metadata
        default = ... if f.default is dataclasses.MISSING else f.default
        bounds = {key: meta[key] for key in ("ge", "le", "gt", "min_length", "max_length") if meta.get(key) is not None}
        definitions[f.name] = (hints[f.name], Field(default, description=meta.get("help"), **bounds))
    return create_model(name or declared.__name__, __base__=Args, **definitions)
