"""The one exception type npsco raises for problems the user can fix (bad input, bad files)."""


class NpscoError(Exception):
    """A problem with the user's input or files; the CLI prints its message on one line, without a traceback."""
