"""The report's document model: the table of contents, collapsible sections, unique anchors, cells that do not wrap,
links to a figure's other formats, and tables written as CSV and LaTeX that read back cell for cell."""

import csv
import io
import re
from html.parser import HTMLParser

from npsco.report.document import (
    Contents,
    Details,
    Heading,
    Image,
    Paragraph,
    Table,
    anchors,
    csv_text,
    latex_text,
    tables,
    to_html,
    to_markdown,
)

TABLE = Table(
    header=["Task", "Method", "reward", "50% of `r0`"],
    rows=[["Hopper-v5", "ipd-r0x0.5", "2244 ± 909", "a_b & {c} #1 $2 ~x^y \\z"], ["Walker2d-v5", "ppo", "–", "x"]],
    align="llrr",
    name="table1",
    nowrap=(0,),
)


def document() -> list:
    return [
        Heading("npsco report", 1),
        Contents(),
        Heading("Table 1"),
        TABLE,
        Heading("Behaviour"),
        Details(
            Heading("Hopper-v5", 3),
            [Paragraph("trajectories"), Details(Heading("Hopper-v5: ipd", 4), [Paragraph("video")], "5 policies")],
            "25 policies",
            open=True,
        ),
        Heading("Training curves"),
        Details(Heading("Hopper-v5", 3), [Image("figures/c.png", "curves", "caption", also=["figures/c.svg"])]),
    ]


class Collect(HTMLParser):
    """The ids, in-page links, <details> (open or not) and table cells with their classes of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.details: list[bool] = []
        self.cells: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "details":
            self.details.append("open" in a)
        if tag == "td":
            self.cells.append(a.get("class"))


def test_anchors_are_unique_as_githubs():
    ids = anchors(document())
    assert sorted(ids.values()) == sorted(
        ["npsco-report", "table-1", "behaviour", "hopper-v5", "hopper-v5-ipd", "training-curves", "hopper-v5-1"]
    )


def test_html_has_contents_linking_every_heading_and_collapsible_sections(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "c.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    page = Collect()
    page.feed(to_html(document(), "t", tmp_path))
    assert page.links == ["table-1", "behaviour", "hopper-v5", "hopper-v5-ipd", "training-curves", "hopper-v5-1"]
    assert set(page.links) <= set(page.ids)  # every entry of the contents leads to a heading
    assert page.details == [True, False, False]  # the task open, its method and the curves closed
    assert page.cells == ["nw", None, "r", "r", "nw", None, "r", "r"]  # the task column never wraps
    text = to_html(document(), "t", tmp_path)
    assert '<summary><h4 id="hopper-v5-ipd">Hopper-v5: ipd</h4><span class="note">5 policies</span></summary>' in text
    assert 'Also as <a href="figures/c.svg">c.svg</a>' in text
    assert 'Also as <a href="table1.csv">table1.csv</a>, <a href="table1.tex">table1.tex</a>' in text


def test_markdown_has_contents_and_details():
    md = to_markdown(document())
    assert "- [Table 1](#table-1)\n- [Behaviour](#behaviour)\n  - [Hopper-v5](#hopper-v5)\n" in md
    assert "    - [Hopper-v5: ipd](#hopper-v5-ipd)\n- [Training curves](#training-curves)\n" in md
    assert "### Hopper-v5\n\n<details open><summary>25 policies</summary>\n\ntrajectories\n\n#### Hopper-v5: ipd" in md
    assert md.count("<details") == md.count("</details>") == 3
    assert (
        "Also as [SVG](figures/c.svg)." in md and "Also as [table1.csv](table1.csv) and [table1.tex](table1.tex)." in md
    )


def test_named_tables_are_found_inside_sections():
    inner = Table(["a"], [["1"]], name="inner")
    blocks = [TABLE, Table(["b"], [["2"]]), Details(Heading("x", 3), [inner])]
    assert [t.name for t in tables(blocks)] == ["table1", "inner"]  # unnamed tables get no files


def test_csv_reads_back_cell_for_cell():
    assert list(csv.reader(io.StringIO(csv_text(TABLE)))) == [TABLE.header, *TABLE.rows]


def test_latex_is_a_booktabs_tabular_that_reads_back():
    tex = latex_text(TABLE)
    lines = tex.strip().splitlines()
    assert lines[:2] == ["\\begin{tabular}{llrr}", "\\toprule"] and lines[3] == "\\midrule"
    assert lines[-2:] == ["\\bottomrule", "\\end{tabular}"]
    body = [lines[2], *lines[4:-2]]
    assert len(body) == 1 + len(TABLE.rows) and all(line.endswith(" \\\\") for line in body)
    cells = [re.split(r"(?<!\\)&", line.removesuffix(" \\\\")) for line in body]
    assert all(len(row) == 4 for row in cells)  # every special character escaped: no stray column
    unescape = {
        r"\textbackslash{}": "\\",
        r"\textasciitilde{}": "~",
        r"\textasciicircum{}": "^",
        r"$\pm$": "±",
        "--": "–",
        r"\&": "&",
        r"\%": "%",
        r"\$": "$",
        r"\#": "#",
        r"\_": "_",
        r"\{": "{",
        r"\}": "}",
    }
    pattern = re.compile("|".join(map(re.escape, unescape)))
    back = [[pattern.sub(lambda m: unescape[m.group()], c.strip()) for c in row] for row in cells]
    assert back == [["Task", "Method", "reward", "50% of r0"], *TABLE.rows]  # `code` marks dropped
