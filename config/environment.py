"""The PICOBRIDGE_* environment variables as settings: which names set a key, which value must
be JSON, and which variable set the key an error is about (an error names the variable,
never its value)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_origin

from picobridge.config.fields import (
    bare,
    key_annotation,
    section_class,
    section_fields,
    section_keys,
)

ENV_PREFIX = "PICOBRIDGE_"

# Variables with the prefix that are not settings (they tell where the settings are).
_NOT_SETTINGS = frozenset({"PICOBRIDGE_CONFIG"})


def _env_names(model: type[Any], prefix: str) -> list[str]:
    names = []
    for key, annotation in section_fields(model).items():
        name = f"{prefix}{key.upper()}"
        names.append(name)
        section = section_class(annotation)
        if section is not None:
            names.extend(_env_names(section, f"{name}__"))
    return names


def unknown_env(environ: Mapping[str, str], model: type[Any]) -> list[str]:
    """PICOBRIDGE_* variables that set nothing: a misspelled one (one underscore where two
    belong) would otherwise be ignored while the same mistake in the file is an error."""
    problems = []
    for name in sorted(environ):
        upper = name.upper()
        if (not upper.startswith(ENV_PREFIX) or upper in _NOT_SETTINGS
                or _env_field(model, upper) is not None):
            continue
        from difflib import get_close_matches  # only to word a mistake

        hint = get_close_matches(upper, _env_names(model, ENV_PREFIX), n=1)
        problems.append(f"unknown environment variable {name}"
                        + (f" (did you mean {hint[0]}?)" if hint else ""))
    return problems


def env_source(loc: Sequence[Any], environ: Mapping[str, str]) -> str | None:
    """The PICOBRIDGE_* variable that set the value at `loc`, if one did."""
    upper = {name.upper(): name for name in environ}
    for depth in range(len(loc), 0, -1):
        name = ENV_PREFIX + "__".join(str(part).upper() for part in loc[:depth])
        if name in upper:
            return upper[name]
    return None


def _complex(annotation: Any) -> bool:
    """Whether pydantic-settings reads this field's variable as JSON."""
    for arg in (annotation, *get_args(bare(annotation))):
        arg = bare(arg)
        if get_origin(arg) in (list, dict, tuple, set, frozenset) or arg in (
                list, dict, tuple, set, frozenset) or section_class(arg) is not None:
            return True
    return False


def _env_field(model: type[Any], name: str) -> Any:
    """The annotation of the field a PICOBRIDGE_* variable sets, or None."""
    parts = name.upper().removeprefix(ENV_PREFIX).split("__")
    annotation: Any = model
    for part in parts:
        section = section_class(annotation)
        keys = section_keys(section) if section is not None else ()
        match = next((k for k in keys if k.upper() == part), None)
        if section is None or match is None:
            return None
        annotation = key_annotation(section, match)
    return annotation


def not_json(environ: Mapping[str, str], model: type[Any]) -> list[str]:
    """The variables holding a list or table that is not valid JSON."""
    bad = []
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX) or name.upper() in _NOT_SETTINGS:
            continue
        annotation = _env_field(model, name)
        if annotation is None or not _complex(annotation):
            continue
        try:
            json.loads(environ[name])
        except ValueError:
            bad.append(name)
    return bad
