"""Errors caused by user input. The CLI prints them as one line and exits non-zero."""


class ScalebenchError(Exception):
    """A user-facing error: the message names what is wrong and what is allowed."""


class ConfigError(ScalebenchError):
    """An experiment configuration, parameter value or command-line argument is invalid."""


class MissingFileError(ScalebenchError):
    """A file the run needs (weights, data) is not where it was asked for."""


def error_lines(error: Exception) -> list[str]:
    """How the CLI prints an error: one ``scalebench: error:`` line per problem it names."""
    return [f"scalebench: error: {line}" for line in str(error).splitlines() or [""]]
