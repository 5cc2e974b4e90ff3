"""The value types of the settings, plain Python that pydantic validates when the loader asks:
importing them imports no pydantic (the daemon holds the settings for its whole life, and
needs pydantic only to read them). Constraints are annotated_types' (pydantic reads them
natively); `Secret` and `After` teach pydantic themselves, importing pydantic_core only then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from annotated_types import Ge, Gt

PositiveInt = Annotated[int, Gt(0)]
PositiveFloat = Annotated[float, Gt(0)]
NonNegativeInt = Annotated[int, Ge(0)]
NonNegativeFloat = Annotated[float, Ge(0)]

MASK = "**********"


# Default factories of empty lists and tables, Python functions rather than `list` and `dict`:
# pydantic looks at each factory's signature, and the builtins' are parsed from text (with
# tokenize), some 8 ms at each start of the command line.
def empty_list() -> list[Any]:
    return []


def empty_dict() -> dict[str, Any]:
    return {}


class Secret:
    """A token or password: its value only through `get_secret_value()`, never in a repr, a
    str or a log line (what pydantic's SecretStr does)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return MASK if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __getstate__(self) -> str:
        return self._value

    def __setstate__(self, state: str) -> None:
        self._value = state

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        # A string (wrapped after it is one, so a wrong type is said as for any string); a
        # Secret given as it is passes.
        return core_schema.no_info_before_validator_function(
            _unwrapped, core_schema.no_info_after_validator_function(cls, core_schema.str_schema()))


def _unwrapped(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, Secret) else value


class After:
    """`Annotated[T, After(check)]`: `check` gets the value once pydantic has validated it as a
    T and returns the value kept, or raises ValueError with a sentence for the operator (what
    a field validator of a pydantic model did, without the model)."""

    __slots__ = ("check",)

    def __init__(self, check: Callable[[Any], Any]) -> None:
        self.check = check

    def __repr__(self) -> str:
        return f"After({self.check.__qualname__})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.check, handler(source))
