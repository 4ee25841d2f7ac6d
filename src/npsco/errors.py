"""The one exception type npsco raises for problems the user can fix (bad input, bad files), and the one place that
makes its message one line of a bounded length."""

MAX_MESSAGE_CHARS = 600
"""The longest message an NpscoError carries (npsco's own are under ~500 characters; a value quoted from a damaged
file could be megabytes): past it, the message is cut and says so."""


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` on one line (line breaks and tabs become spaces), cut to at most `limit` characters with a note of how
    much was left out."""
    flat = " ".join(text.split()) if any(c in text for c in "\n\r\t\v\f") else text
    if len(flat) <= limit:
        return flat
    note = f" ... ({len(flat) - limit:,} more characters cut)"
    return flat[: max(0, limit - len(note))] + note


class NpscoError(Exception):
    """A problem with the user's input or files; the CLI prints its message on one line, without a traceback. The
    message is made one line of at most `MAX_MESSAGE_CHARS` here, for the CLI and the Python API alike."""

    def __init__(self, message: object = "") -> None:
        super().__init__(one_line(str(message)))
