"""Settings read from ``NAKADI_*`` environment variables.

Every default makes the local stack (``make run``) work with no configuration.
README.md has the table of variables; keep the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Settings:
    database_url: str = "postgresql://nakadi@127.0.0.1:5433/nakadi"
    database_pool_size: int = 20
    zookeeper: str = "127.0.0.1:2181"
    zookeeper_root: str = "/nakadi"
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    default_storage: str = "postgres"
    log_level: str = "INFO"
    retention_check_interval_s: float = 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``NAKADI_<FIELD>`` variables, falling back to defaults."""
        environ = os.environ if environ is None else environ
        values = {}
        for field in fields(cls):
            raw = environ.get(f"NAKADI_{field.name.upper()}")
            if raw is None:
                continue
            convert = type(field.default)
            try:
                values[field.name] = convert(raw)
            except ValueError:
                raise ValueError(
                    f"NAKADI_{field.name.upper()}={raw!r} is not a valid {convert.__name__}"
                ) from None
        return cls(**values)
