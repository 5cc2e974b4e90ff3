"""How the settings' classes are made (`plain`, frozen dataclasses), and the keys of a section
class whatever it is made of: ours are such dataclasses, a platform may bring a pydantic model
of its own. The keys are what the unknown-key and environment checks (config/loader.py,
config/environment.py) and `Platform.secrets` walk; no pydantic imported."""

from __future__ import annotations

import dataclasses
import sys
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


_keys: dict[type[Any], tuple[str, ...]] = {}
_annotations: dict[tuple[type[Any], str], Any] = {}


def section_keys(cls: type[Any]) -> tuple[str, ...]:
    """A section class's keys; none for a class that is no section (nor a pydantic model)."""
    found = _keys.get(cls)
    if found is None:
        model_fields = getattr(cls, "model_fields", None)  # a pydantic model's, if it is one
        if dataclasses.is_dataclass(cls):
            found = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        else:
            found = tuple(model_fields) if isinstance(model_fields, dict) else ()
        _keys[cls] = found
    return found


def key_annotation(cls: type[Any], key: str) -> Any:
    """The annotation of one key of a section class (its `Annotated` constraints kept),
    evaluated alone and once: the checks look at the few keys a configuration sets, and
    evaluating every key of every section (typing.get_type_hints) was a few ms per start."""
    found = _annotations.get((cls, key), _annotations)
    if found is _annotations:
        found = _annotations[(cls, key)] = _annotation(cls, key)
    return found


def _annotation(cls: type[Any], key: str) -> Any:
    if not dataclasses.is_dataclass(cls):
        return cls.model_fields[key].rebuild_annotation()
    for klass in cls.__mro__:
        annotation = vars(klass).get("__annotations__", {}).get(key)
        if isinstance(annotation, str):
            # As typing.get_type_hints evaluates it: in the globals of the defining module.
            return eval(annotation, vars(sys.modules[klass.__module__]))
        if annotation is not None:
            return annotation
    raise KeyError(key)


def section_fields(cls: type[Any]) -> dict[str, Any]:
    """A section class's keys and their annotations ({} for a class that is no section)."""
    return {key: key_annotation(cls, key) for key in section_keys(cls)}


def bare(annotation: Any) -> Any:
    """The annotation without `Annotated`'s constraints (`Annotated[int, Gt(0)]` -> int)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def section_class(annotation: Any) -> type[Any] | None:
    """The section class an annotation is (a table of keys), or None."""
    annotation = bare(annotation)
    return annotation if isinstance(annotation, type) and section_keys(annotation) else None
