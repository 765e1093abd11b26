"""The one reader of the YAML files users give (configs, parallel configs): a file that cannot
be read or parsed is a one-line error naming it. Light: the launcher's children import it
before the stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scalebench.errors import ConfigError, unreadable_file_error


def read_yaml(path: Path, what: str) -> Any:
    """The YAML document in ``path``; a ConfigError naming ``what`` (e.g. "config") when the
    file cannot be read or parsed."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as error:
        raise unreadable_file_error(path, what, error) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{what} {path} is not valid YAML: {str(error).splitlines()[0]}") \
            from None
