"""The closed lists of values the spec defines for event type fields, in the spec's order.

`PARTITION_STRATEGIES` and `ENRICHMENT_STRATEGIES` are also what
`/registry/partition-strategies` and `/registry/enrichment-strategies` list.
"""

CATEGORIES = ("undefined", "data", "business")
PARTITION_STRATEGIES = ("random", "hash", "user_defined")
ENRICHMENT_STRATEGIES = ("metadata_enrichment",)
COMPATIBILITY_MODES = ("compatible", "forward", "none")
CLEANUP_POLICIES = ("delete", "compact")
AUDIENCES = (
    "component-internal",
    "business-unit-internal",
    "company-internal",
    "external-partner",
    "external-public",
)
SCHEMA_TYPES = ("json_schema",)
DATA_OPERATIONS = ("C", "U", "D", "S")
# Later Nakadi versions: where the owner of an event is read from.
EVENT_OWNER_SELECTOR_TYPES = ("path", "static", "metadata")

DEFAULT_PARTITION_STRATEGY = "random"
DEFAULT_COMPATIBILITY_MODE = "forward"
DEFAULT_CLEANUP_POLICY = "delete"
