"""A composed config as its schema's instance, checked once (:func:`to_schema`), and back to plain data."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

from prism.errors import ConfigError

T = TypeVar("T")


@runtime_checkable
class Checked(Protocol):
    """A config that checks itself as a whole (each top-level schema whose groups have checks)."""

    def check(self) -> None:
        """Raise a :class:`~prism.errors.PrismError` naming the first value that cannot be used."""


def to_schema(cfg: Any, schema: type[T]) -> T:
    """The composed (or merged) config ``cfg`` as an instance of its schema, interpolations resolved and checked.

    A schema with a ``check()`` (:class:`Checked`) is checked here, once, as it is built.

    Raises:
        ConfigError: If a mandatory value (``???``) was never set, naming it, or the schema's check refuses
            a value (``DataError`` for a dataset).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        value = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        raise ConfigError(f"{exc.full_key} must be set ({exc.msg}); set it with {exc.full_key}=VALUE.") from exc
    if not isinstance(value, schema):
        raise ConfigError(f"the config is a {type(value).__name__}, not the {schema.__name__} this needs.")
    if isinstance(value, Checked):
        value.check()
    return value
