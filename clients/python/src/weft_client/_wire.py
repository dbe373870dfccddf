"""Base classes of the wire models, and the liberal tagged unions they use.

Every model keeps the fields it does not know (``model_extra``), and every tagged union falls
back to its ``Unknown*`` member for a tag it does not know or a known tag whose fields do not
fit: what a newer server sends always parses.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from pydantic import (
    AliasChoices,
    AliasGenerator,
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidatorFunctionWrapHandler,
)
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A model whose JSON is camelCase (the server's), with snake_case attributes.

    Unknown fields are kept (in ``model_extra``); either spelling is accepted on input.
    """

    model_config = ConfigDict(
        extra="allow",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON object the server reads (camelCase, unset optional fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _either_spelling(name: str) -> AliasChoices:
    return AliasChoices(name, to_camel(name))


class SnakeModel(BaseModel):
    """A model whose JSON is snake_case (the step trace's, as the AceAI format writes it).

    The camelCase spelling (the Rust library's ``AgentResponse`` JSON) is accepted on input too,
    and unknown fields are kept.
    """

    model_config = ConfigDict(
        extra="allow",
        alias_generator=AliasGenerator(validation_alias=_either_spelling),
        validate_by_name=True,
        validate_by_alias=True,
    )


def tag_of(field: str, known: Collection[str]) -> Callable[[Any], str]:
    """A discriminator reading ``field``: its value when known, else ``"unknown"``."""

    def discriminate(value: Any) -> str:
        tag = value.get(field) if isinstance(value, dict) else getattr(value, field, None)
        return tag if isinstance(tag, str) and tag in known else "unknown"

    return discriminate


def fallback_to(
    unknown: type[BaseModel],
) -> Callable[[Any, ValidatorFunctionWrapHandler], Any]:
    """A wrap validator: an object whose known tag does not fit its model becomes ``unknown``."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            if isinstance(value, dict):
                return unknown.model_validate(value)
            raise

    return validate
