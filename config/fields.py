"""The keys of a section class, whatever it is made of: our sections are dataclasses, a
platform may bring a pydantic model of its own. What the unknown-key and environment checks
(config/loader.py, config/environment.py) and `Platform.secrets` walk; no pydantic imported."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

_fields: dict[type[Any], dict[str, Any]] = {}


def section_fields(cls: type[Any]) -> dict[str, Any]:
    """A section class's keys and their annotations (their `Annotated` constraints kept):
    {} for a class that is no section (nor a pydantic model). Found once per class."""
    found = _fields.get(cls)
    if found is None:
        found = _fields[cls] = _keys(cls)
    return found


def _keys(cls: type[Any]) -> dict[str, Any]:
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls, include_extras=True)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    model_fields = getattr(cls, "model_fields", None)  # a pydantic model's, if it is one
    if isinstance(model_fields, dict):
        return {name: info.rebuild_annotation() for name, info in model_fields.items()}
    return {}


def bare(annotation: Any) -> Any:
    """The annotation without `Annotated`'s constraints (`Annotated[int, Gt(0)]` -> int)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def section_class(annotation: Any) -> type[Any] | None:
    """The section class an annotation is (a table of keys), or None."""
    annotation = bare(annotation)
    return annotation if isinstance(annotation, type) and section_fields(annotation) else None
