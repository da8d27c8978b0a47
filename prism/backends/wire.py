"""What every HTTP backend reads the same way off a reply, and how an error message quotes a reply.

Ollama's ``/api/chat`` and the OpenAI-compatible chat API name their fields differently but report token
counts and the reason generation stopped alike; both backends read them through these functions, so a
reply that omits a count, or sends a string where a count belongs, is handled the same way everywhere.
"""

from __future__ import annotations

from typing import Any


def token_count(value: Any) -> int | None:
    """A token count as an int, or None when absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def stop_reason(value: Any) -> str | None:
    """Why generation stopped ("stop", "length", ...), or None if the reply does not say."""
    return value if isinstance(value, str) and value else None


def excerpt(value: Any, limit: int = 200) -> str:
    """A short printable excerpt of a value for an error message."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_dict(reply: Any) -> dict[str, Any] | None:
    """An official client's reply as the JSON the server sent, or None when it could not be read as an object.

    ``exclude_unset`` keeps only the fields the server sent: the client's own defaults for fields the
    server never mentioned would otherwise change with the client's version, and with them the digest.
    The OpenAI and Anthropic SDKs both hand back pydantic models (and the body as text when it is not JSON).
    """
    dump = getattr(reply, "model_dump", None)
    if not callable(dump):
        return None
    data = dump(exclude_unset=True)
    return data if isinstance(data, dict) else None
