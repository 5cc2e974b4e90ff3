"""How the settings' classes are made (`plain`, frozen dataclasses), and the keys of a section
class whatever it is made of: ours are such dataclasses, a platform may bring a pydantic model
of its own. The keys are what the unknown-key and environment checks (config/loader.py,
config/environment.py) and `Platform.secrets` walk; no pydantic imported."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


class Plain:
    """The repr, equality and hash of a `plain` class, by its fields as a dataclass's own
    would be: written once here rather than generated into each class (the generated
    functions are a third of the time the settings' classes take to make, at every start)."""

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                     if f.compare)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Plain)
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        keys = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                         for f in dataclasses.fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({keys})"


@dataclass_transform(frozen_default=True, kw_only_default=True,
                     field_specifiers=(dataclasses.field,))
def plain(cls: type[T]) -> type[T]:
    """A frozen, keyword-only dataclass (of a `Plain` subclass: its repr and equality)."""
    return dataclasses.dataclass(frozen=True, kw_only=True, repr=False, eq=False)(cls)

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
