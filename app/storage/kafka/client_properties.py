"""Extra librdkafka properties for every Kafka client of the broker, read from a file
of ``name=value`` lines (``NAKADI_KAFKA_CLIENT_PROPERTIES``): how a broker that needs
TLS or SASL is reached.

The file is the usual Kafka client properties file, kept simple: one property per
line, ``=`` or ``:`` between name and value, blank lines and lines starting with
``#`` or ``!`` ignored, no continuation lines or escapes. Only the properties that
say how to connect may be set here; the ones that decide what an acknowledgement
means (``acks``, idempotence) and how the broker reads (offsets, groups) stay the
broker's own.
"""

from __future__ import annotations

from pathlib import Path

ALLOWED_PREFIXES = (
    "security.protocol", "sasl.", "ssl.", "enable.ssl.", "client.id",
    "client.rack", "socket.", "broker.address.", "reconnect.backoff",
    "connections.max.idle.ms", "metadata.max.age.ms", "topic.metadata.refresh.",
)


class ClientPropertiesError(ValueError):
    """The file cannot be used; the message names the file, the line and what to fix."""


def parse_client_properties(text: str, source: str) -> dict[str, str]:
    """The properties of a file's ``text``; ``source`` names it in errors."""
    properties: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        separators = [index for index in (stripped.find("="), stripped.find(":")) if index > 0]
        if not separators:
            raise ClientPropertiesError(
                f"{source}, line {number}: expected name=value, got {stripped[:80]!r}")
        split = min(separators)
        name, value = stripped[:split].strip(), stripped[split + 1:].strip()
        if not name.startswith(ALLOWED_PREFIXES):
            raise ClientPropertiesError(
                f"{source}, line {number}: {name!r} cannot be set here; only how to connect "
                f"can (properties starting with {', '.join(ALLOWED_PREFIXES)})")
        if name in properties:
            raise ClientPropertiesError(f"{source}, line {number}: {name!r} is set twice")
        properties[name] = value
    return properties


def read_client_properties(path: str) -> dict[str, str]:
    """The properties of the file at ``path``."""
    source = f"NAKADI_KAFKA_CLIENT_PROPERTIES ({path})"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ClientPropertiesError(f"{source} cannot be read: {error}") from None
    return parse_client_properties(text, source)
