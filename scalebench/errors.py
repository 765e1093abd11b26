"""Errors caused by user input. The CLI prints them as one line and exits non-zero."""


class ScalebenchError(Exception):
    """A user-facing error: the message names what is wrong and what is allowed."""


class ConfigError(ScalebenchError):
    """An experiment configuration, parameter value or command-line argument is invalid."""


class MissingFileError(ScalebenchError):
    """A file the run needs (weights, data) is not where it was asked for."""
