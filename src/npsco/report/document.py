"""A tiny document model (headings, paragraphs, tables, images, code) rendered to Markdown and to self-contained HTML.

Images are files beside the document, referenced by relative paths; the HTML embeds them as base64 data URIs so that
the one `.html` file can be mailed or opened anywhere. Text may use `backticks` for code; nothing else is interpreted.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    align: str | None = None
    """One letter per column, `l` or `r` (default: first column left, the others right)."""


@dataclass
class Image:
    path: str
    """Relative to the document's folder."""
    alt: str
    caption: str | None = None


@dataclass
class Video:
    path: str
    """Relative to the document's folder: an `.mp4` (a <video> element) or a `.gif` (an image)."""
    alt: str
    caption: str | None = None

    @property
    def is_image(self) -> bool:
        """A GIF, shown as an image; an MP4 needs a <video> element."""
        return self.path.lower().endswith(".gif")


@dataclass
class Row:
    """Blocks side by side in HTML (e.g. a video next to its filmstrip); one after the other in Markdown."""

    items: list[Image | Video] = field(default_factory=list)
    caption: str | None = None


@dataclass
class Code:
    text: str
    language: str = ""


@dataclass
class Items:
    items: list[str] = field(default_factory=list)


Block = Heading | Paragraph | Table | Image | Video | Row | Code | Items


def slug(text: str) -> str:
    """The anchor of a heading (GitHub style, roughly): lowercase, spaces to dashes, punctuation dropped."""
    return re.sub(r"[^a-z0-9 -]", "", text.lower()).strip().replace(" ", "-")


# ------------------------------------------------------------------------------------------------------ Markdown
def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as GitHub-flavoured Markdown."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Paragraph):
            out.append(b.text)
        elif isinstance(b, Table):
            align = b.align or "l" + "r" * (len(b.header) - 1)
            lines = [
                "| " + " | ".join(_md_cell(h) for h in b.header) + " |",
                "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|",
            ]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, Image):
            text = f"![{b.alt}]({b.path})"
            out.append(text + (f"\n\n*{b.caption}*" if b.caption else ""))
        elif isinstance(b, Video):
            out.append(_md_video(b) + (f"\n\n*{b.caption}*" if b.caption else ""))
        elif isinstance(b, Row):
            parts = [_md_video(i) if isinstance(i, Video) else f"![{i.alt}]({i.path})" for i in b.items]
            out.append("\n".join(parts) + (f"\n\n*{b.caption}*" if b.caption else ""))
        elif isinstance(b, Code):
            out.append(f"```{b.language}\n{b.text.rstrip()}\n```")
        elif isinstance(b, Items):
            out.append("\n".join(f"- {item}" for item in b.items))
        else:  # pragma: no cover
            raise TypeError(f"unknown block {b!r}")
    return "\n\n".join(out) + "\n"


def _md_video(v: Video) -> str:
    """A GIF as an image; an MP4 as an HTML <video> element (Markdown viewers that allow HTML play it) and a link."""
    if v.is_image:
        return f"![{v.alt}]({v.path})"
    return f'<video src="{html.escape(v.path)}" controls autoplay loop muted playsinline></video> [{v.alt}]({v.path})'


# ---------------------------------------------------------------------------------------------------------- HTML
_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; }
td.r, th.r { text-align: right; }
img { max-width: 100%; border: 1px solid #eee; }
video { border: 1px solid #eee; flex: none; }
.row { display: flex; gap: 0.6em; align-items: flex-start; overflow-x: auto; }
.row img { min-width: 0; }
figure { margin: 1em 0; }
figcaption { font-style: italic; color: #555; font-size: 0.92em; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
code { background: #f6f8fa; padding: 0 0.2em; }
"""


def _inline(text: str) -> str:
    """Escape text for HTML, turning `code` spans into <code> elements."""
    parts = re.split(r"`([^`]*)`", str(text))
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def _data_uri(path: Path) -> str:
    mime = {
        ".png": "image/png",
        ".gif": "image/gif",
        ".svg": "image/svg+xml",
        ".jpg": "image/jpeg",
        ".mp4": "video/mp4",
    }.get(path.suffix.lower(), "application/octet-stream")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _media(item: Image | Video, base: Path, embed: bool) -> str:
    """An <img> (images, GIF videos) or a muted, looping, autoplaying <video> (MP4), embedded or linked."""
    src = _data_uri(base / item.path) if embed else html.escape(item.path)
    if isinstance(item, Video) and not item.is_image:
        return (
            f'<video src="{src}" title="{html.escape(item.alt)}" controls autoplay loop muted playsinline '
            f'preload="auto"></video>'
        )
    return f'<img src="{src}" alt="{html.escape(item.alt)}">'


def to_html(blocks: list[Block], title: str, base: str | Path, embed: bool = True) -> str:
    """The blocks as one HTML page; images are embedded (base64) from files under `base`, or linked (`embed=False`)."""
    base = Path(base)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
    ]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f'<h{b.level} id="{slug(b.text)}">{_inline(b.text)}</h{b.level}>')
        elif isinstance(b, Paragraph):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            align = b.align or "l" + "r" * (len(b.header) - 1)
            cls = [' class="r"' if a == "r" else "" for a in align]
            out.append(
                "<table><thead><tr>"
                + "".join(f"<th{c}>{_inline(h)}</th>" for c, h in zip(cls, b.header, strict=True))
                + "</tr></thead><tbody>"
            )
            for row in b.rows:
                out.append(
                    "<tr>" + "".join(f"<td{c}>{_inline(v)}</td>" for c, v in zip(cls, row, strict=True)) + "</tr>"
                )
            out.append("</tbody></table>")
        elif isinstance(b, (Image, Video)):
            caption = f"<figcaption>{_inline(b.caption)}</figcaption>" if b.caption else ""
            out.append(f"<figure>{_media(b, base, embed)}{caption}</figure>")
        elif isinstance(b, Row):
            caption = f"<figcaption>{_inline(b.caption)}</figcaption>" if b.caption else ""
            items = "".join(_media(i, base, embed) for i in b.items)
            out.append(f'<figure><div class="row">{items}</div>{caption}</figure>')
        elif isinstance(b, Code):
            out.append(f"<pre><code>{html.escape(b.text.rstrip())}</code></pre>")
        elif isinstance(b, Items):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        else:  # pragma: no cover
            raise TypeError(f"unknown block {b!r}")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
