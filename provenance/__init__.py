"""Provenance of every result row: what produced it, where, and how to run it again.

Importing this package never imports torch: the environment is read lazily, and only from
modules the running process has already loaded or from the system itself.
"""

from provenance.canonical import canonical_json, config_hash
from provenance.digest import array_digest
from provenance.process import collect
from provenance.schema import COLUMN_PREFIX, FIELDS, SCHEMA_VERSION

__all__ = ["COLUMN_PREFIX", "FIELDS", "SCHEMA_VERSION", "array_digest", "canonical_json",
           "collect", "config_hash"]
