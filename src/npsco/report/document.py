"""A tiny document model (headings, paragraphs, tables, images, code, collapsible sections, a table of contents)
rendered to Markdown and to self-contained HTML; tables also to CSV and LaTeX.

Images are files beside the document, referenced by relative paths; the HTML embeds them as base64 data URIs so that
the one `.html` file can be mailed or opened anywhere. Text may use `backticks` for code; nothing else is interpreted.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import re
from collections.abc import Iterator
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
    name: str | None = None
    """File stem of the table's CSV and LaTeX copies beside the document (`tables` lists them); None: none."""
    nowrap: tuple[int, ...] = ()
    """Columns whose cells never wrap in HTML (a task name such as `Hopper-v5` stays on one line)."""


@dataclass
class Image:
    path: str
    """Relative to the document's folder."""
    alt: str
    caption: str | None = None
    also: list[str] = field(default_factory=list)
    """The same picture in other formats (e.g. `figures/x.svg`, `figures/x.pdf`), linked under it."""


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
class Code:
    text: str
    language: str = ""


@dataclass
class Items:
    items: list[str] = field(default_factory=list)


@dataclass
class Details:
    """A collapsible section: its heading (in HTML, the part that stays visible and opens it), a line beside the
    heading, and its blocks; `open` shows it unfolded at first. Markdown gets the heading, then a <details> element."""

    heading: Heading
    blocks: list[Block] = field(default_factory=list)
    summary: str = ""
    open: bool = False


@dataclass
class Contents:
    """The table of contents: a link to every heading of levels 2 to `depth` (those inside sections too)."""

    depth: int = 4


Block = Heading | Paragraph | Table | Image | Video | Code | Items | Details | Contents


def slug(text: str) -> str:
    """The anchor of a heading (GitHub style, roughly): lowercase, spaces to dashes, punctuation dropped."""
    return re.sub(r"[^a-z0-9 -]", "", text.lower()).strip().replace(" ", "-")


def walk(blocks: list[Block]) -> Iterator[Block]:
    """Every block in document order, those inside sections too (a section's heading before its blocks)."""
    for b in blocks:
        if isinstance(b, Details):
            yield b
            yield b.heading
            yield from walk(b.blocks)
        else:
            yield b


def anchors(blocks: list[Block]) -> dict[int, str]:
    """The anchor of every heading (keyed by `id`), unique as GitHub makes them: a repeated slug gets `-1`, `-2`."""
    seen: dict[str, int] = {}
    out: dict[int, str] = {}
    for b in walk(blocks):
        if isinstance(b, Heading):
            base = slug(b.text)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out[id(b)] = base if n == 0 else f"{base}-{n}"
    return out


def toc_entries(blocks: list[Block], depth: int) -> list[tuple[int, str, str]]:
    """(level, text, anchor) of the headings of levels 2 to `depth`, in document order."""
    ids = anchors(blocks)
    return [(b.level, b.text, ids[id(b)]) for b in walk(blocks) if isinstance(b, Heading) and 2 <= b.level <= depth]


def tables(blocks: list[Block]) -> list[Table]:
    """The tables that have a `name` (those inside sections too), in document order."""
    return [b for b in walk(blocks) if isinstance(b, Table) and b.name]


# ------------------------------------------------------------------------------------------------------ CSV, LaTeX
def csv_text(table: Table) -> str:
    """The table as CSV: the header, then one line per row, the cells as shown (UTF-8, e.g. `2944 ± 799`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows(table.rows)
    return buffer.getvalue()


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "–": "--",
}


def latex_escape(text: str) -> str:
    """Text for a LaTeX cell: its special characters escaped, ± as $\\pm$, an en dash as --, `code` marks dropped."""
    return "".join(_LATEX.get(c, c) for c in str(text).replace("`", ""))


def latex_text(table: Table) -> str:
    """The table as a LaTeX `tabular` (booktabs rules: `\\usepackage{booktabs}`), one line per row."""
    align = table.align or "l" + "r" * (len(table.header) - 1)
    lines = [f"\\begin{{tabular}}{{{align}}}", "\\toprule", " & ".join(map(latex_escape, table.header)) + r" \\"]
    lines.append("\\midrule")
    lines += [" & ".join(map(latex_escape, row)) + r" \\" for row in table.rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ Markdown
def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table_files(table: Table) -> list[str]:
    """The CSV and LaTeX copies of a named table (relative paths beside the document)."""
    return [f"{table.name}.csv", f"{table.name}.tex"] if table.name else []


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as GitHub-flavoured Markdown; sections as a heading followed by a <details> element."""
    ids = anchors(blocks)
    return "\n\n".join(_md_block(b, blocks, ids) for b in blocks) + "\n"


def _md_block(b: Block, document: list[Block], ids: dict[int, str]) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + b.text
    if isinstance(b, Paragraph):
        return b.text
    if isinstance(b, Table):
        align = b.align or "l" + "r" * (len(b.header) - 1)
        lines = [
            "| " + " | ".join(_md_cell(h) for h in b.header) + " |",
            "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|",
        ]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
        files = _table_files(b)
        return "\n".join(lines) + (f"\n\nAlso as {' and '.join(f'[{f}]({f})' for f in files)}." if files else "")
    if isinstance(b, Image):
        text = f"![{b.alt}]({b.path})"
        return text + (f"\n\n*{b.caption}*" if b.caption else "") + _md_also(b.also)
    if isinstance(b, Video):
        return _md_video(b) + (f"\n\n*{b.caption}*" if b.caption else "")
    if isinstance(b, Code):
        return f"```{b.language}\n{b.text.rstrip()}\n```"
    if isinstance(b, Items):
        return "\n".join(f"- {item}" for item in b.items)
    if isinstance(b, Details):
        inner = "\n\n".join(_md_block(x, document, ids) for x in b.blocks)
        summary = html.escape(b.summary or "show")
        return (
            f"{_md_block(b.heading, document, ids)}\n\n<details{' open' if b.open else ''}><summary>{summary}"
            f"</summary>\n\n{inner}\n\n</details>"
        )
    if isinstance(b, Contents):
        return "\n".join(
            "  " * (level - 2) + f"- [{_md_cell(text)}](#{anchor})"
            for level, text, anchor in toc_entries(document, b.depth)
        )
    raise TypeError(f"unknown block {b!r}")  # pragma: no cover


def _md_also(paths: list[str]) -> str:
    return ("\n\nAlso as " + ", ".join(f"[{Path(p).suffix[1:].upper()}]({p})" for p in paths) + ".") if paths else ""


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
td.nw { white-space: nowrap; }
img { max-width: 100%; border: 1px solid #eee; }
video { border: 1px solid #eee; max-width: 100%; }
figure { margin: 1em 0; }
figcaption { font-style: italic; color: #555; font-size: 0.92em; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
code { background: #f6f8fa; padding: 0 0.2em; }
details { border-left: 3px solid #e4e4e4; padding-left: 0.8em; margin: 0.6em 0; }
summary { cursor: pointer; }
summary > h2, summary > h3, summary > h4 { display: inline; }
summary .note { color: #666; font-size: 0.92em; margin-left: 0.5em; }
nav.toc ul { list-style: none; padding-left: 0; margin: 0.3em 0; }
nav.toc li.l3 { padding-left: 1.2em; }
nav.toc li.l4 { padding-left: 2.4em; font-size: 0.95em; }
.files { font-size: 0.85em; color: #555; margin-top: -0.6em; }
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


def _files(paths: list[str]) -> str:
    """Links to files beside the document (other formats of a figure, a table's CSV and LaTeX)."""
    links = ", ".join(f'<a href="{html.escape(p)}">{html.escape(Path(p).name)}</a>' for p in paths)
    return f'<p class="files">Also as {links}</p>' if paths else ""


def to_html(blocks: list[Block], title: str, base: str | Path, embed: bool = True) -> str:
    """The blocks as one HTML page; images are embedded (base64) from files under `base`, or linked (`embed=False`).
    Sections are <details> elements whose <summary> holds the heading; the contents link to every heading."""
    ids = anchors(blocks)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        *(_html_block(b, blocks, ids, Path(base), embed) for b in blocks),
        "</body></html>",
    ]
    return "\n".join(out) + "\n"


def _heading(b: Heading, ids: dict[int, str]) -> str:
    return f'<h{b.level} id="{ids[id(b)]}">{_inline(b.text)}</h{b.level}>'


def _cell_class(align: str, nowrap: bool) -> str:
    """The class attribute of a table cell: `r` right-aligned, `nw` never wrapped."""
    names = [name for name, on in (("r", align == "r"), ("nw", nowrap)) if on]
    return f' class="{" ".join(names)}"' if names else ""


def _html_block(b: Block, document: list[Block], ids: dict[int, str], base: Path, embed: bool) -> str:
    if isinstance(b, Heading):
        return _heading(b, ids)
    if isinstance(b, Paragraph):
        return f"<p>{_inline(b.text)}</p>"
    if isinstance(b, Table):
        align = b.align or "l" + "r" * (len(b.header) - 1)
        cls = [_cell_class(a, k in b.nowrap) for k, a in enumerate(align)]
        lines = [
            "<table><thead><tr>"
            + "".join(f"<th{c}>{_inline(h)}</th>" for c, h in zip(cls, b.header, strict=True))
            + "</tr></thead><tbody>"
        ]
        lines += [
            "<tr>" + "".join(f"<td{c}>{_inline(v)}</td>" for c, v in zip(cls, row, strict=True)) + "</tr>"
            for row in b.rows
        ]
        lines.append("</tbody></table>" + _files(_table_files(b)))
        return "\n".join(lines)
    if isinstance(b, (Image, Video)):
        caption = f"<figcaption>{_inline(b.caption)}</figcaption>" if b.caption else ""
        also = _files(b.also) if isinstance(b, Image) else ""
        return f"<figure>{_media(b, base, embed)}{caption}{also}</figure>"
    if isinstance(b, Code):
        return f"<pre><code>{html.escape(b.text.rstrip())}</code></pre>"
    if isinstance(b, Items):
        return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Details):
        note = f'<span class="note">{_inline(b.summary)}</span>' if b.summary else ""
        inner = "\n".join(_html_block(x, document, ids, base, embed) for x in b.blocks)
        return (
            f"<details{' open' if b.open else ''}><summary>{_heading(b.heading, ids)}{note}</summary>\n"
            f"{inner}\n</details>"
        )
    if isinstance(b, Contents):
        items = "".join(
            f'<li class="l{level}"><a href="#{anchor}">{_inline(text)}</a></li>'
            for level, text, anchor in toc_entries(document, b.depth)
        )
        return f'<nav class="toc"><strong>Contents</strong><ul>{items}</ul></nav>'
    raise TypeError(f"unknown block {b!r}")  # pragma: no cover
