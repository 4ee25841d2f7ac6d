"""The report's videos (MP4, or GIF without an encoder), its population videos (tiles, labels, frozen ends), its Video
blocks, and the data of the distance heatmap: group spans, policy order and the merging of the runs' distance
matrices, on exact numbers."""

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image as PILImage

from npsco.errors import NpscoError
from npsco.evaluation.measure import measure_policy
from npsco.report import distances, video
from npsco.report.behaviour import fit_frame
from npsco.report.build import behaviour_blocks
from npsco.report.distances import known_distances, policy_order
from npsco.report.document import Details, Heading, Image, Video, to_html, to_markdown
from npsco.report.figures import distance_heatmap_figure, group_spans


def frames(n=12, h=40, w=30) -> list[np.ndarray]:
    out = []
    for k in range(n):
        f = np.full((h, w, 3), 255, np.uint8)
        f[5:15, k : k + 8] = (200, 0, 0)  # a moving red block
        out.append(f)
    return out


def test_mp4_is_h264_in_an_mp4_box_with_every_frame(tmp_path):
    if not video.mp4_available():
        pytest.skip("imageio-ffmpeg is not installed (the dev extra installs it)")
    import imageio_ffmpeg

    path = video.save_video(frames(12, 41, 31), tmp_path / "clip", fps=6)
    assert path.name == "clip.mp4" and path.read_bytes()[4:8] == b"ftyp"
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    decoded = [np.frombuffer(f, np.uint8) for f in reader]
    assert meta["size"] == (30, 40) and meta["codec"].startswith("h264") and len(decoded) == 12  # cropped to even
    assert not list(tmp_path.glob(".*tmp"))


def test_without_an_encoder_videos_are_gifs(tmp_path, monkeypatch):
    monkeypatch.setattr(video, "mp4_available", lambda: False)
    assert video.resolve_format("auto") == "gif"
    with pytest.raises(NpscoError, match="pip install imageio-ffmpeg"):
        video.resolve_format("mp4")
    path = video.save_video(frames(5), tmp_path / "clip", fps=5)
    with PILImage.open(path) as gif:
        assert path.suffix == ".gif" and gif.format == "GIF" and gif.n_frames == 5
    with pytest.raises(NpscoError, match="unknown video format"):
        video.resolve_format("webm")


def test_even_frames_and_fit_frame_sizes():
    assert video.even_frames([np.zeros((41, 31, 4), np.uint8)])[0].shape == (40, 30, 3)
    assert fit_frame(np.zeros((48, 64, 3), np.uint8), 160).shape == (120, 160, 3)
    assert fit_frame(np.zeros((240, 240, 3), np.uint8), 240).shape == (240, 240, 3)
    with pytest.raises(NpscoError, match="rendered nothing"):
        fit_frame(None, 100)


def test_video_blocks_in_markdown_and_html(tmp_path):
    (tmp_path / "v.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom")
    PILImage.fromarray(frames(1)[0]).save(tmp_path / "f.png")
    PILImage.fromarray(frames(1)[0]).save(tmp_path / "g.gif")
    blocks = [
        Heading("t"),
        Video("v.mp4", "video of a", "a's episode"),
        Image("f.png", "filmstrip of a"),
        Video("g.gif", "video of b", "b's episode"),
    ]
    md = to_markdown(blocks)
    assert '<video src="v.mp4" controls autoplay loop muted playsinline></video> [video of a](v.mp4)' in md
    assert "![filmstrip of a](f.png)" in md and "![video of b](g.gif)\n\n*b's episode*" in md
    html = to_html(blocks, "t", tmp_path)
    assert html.count("<video ") == 1
    assert 'src="data:video/mp4;base64,AAAAGGZ0eXBpc29t"' in html and "autoplay loop muted playsinline" in html
    assert html.count('src="data:image/png;base64,') == 1 and html.count('src="data:image/gif;base64,') == 1


def test_grid_columns_balance_the_rows():
    assert [video.grid_columns(n) for n in (1, 2, 5, 6, 7, 10, 11)] == [1, 2, 5, 3, 4, 5, 4]


def tile(label: str, shades: list[int], ended: bool = True) -> video.Tile:
    """A tile whose k-th frame is a 20 x 80 image of one grey `shades[k]`, at step 10 k."""
    pictures = [np.full((20, 80, 3), c, np.uint8) for c in shades]
    return video.Tile(label, pictures, [10 * k for k in range(len(shades))], ended)


def test_a_population_video_plays_every_episode_in_step_and_freezes_the_ended_ones():
    tiles = [tile("ref0", [10, 20, 30, 40, 50]), tile("k0", [60, 70]), tile("k1", [80, 90, 100], ended=False)]
    out = video.grid_frames(tiles, pad=2)
    band = video.LABEL_HEIGHT
    assert len(out) == 5  # as long as the longest episode
    assert all(f.shape == (band + 20 + 2 * 2, 3 * 80 + 4 * 2, 3) for f in out)  # one row of 3 tiles

    def picture(frame: np.ndarray, i: int) -> np.ndarray:  # tile i's picture, under its label band
        left = 2 + i * (80 + 2)
        return frame[2 + band : 2 + band + 20, left : left + 80]

    def label(frame: np.ndarray, i: int) -> np.ndarray:
        left = 2 + i * (80 + 2)
        return frame[2 : 2 + band, left : left + 80]

    for j, frame in enumerate(out):
        assert (picture(frame, 0) == 10 * (j + 1)).all()  # every frame of the longest episode
        assert (picture(frame, 1) == (60 if j == 0 else 70)).all()  # stays on its last frame from frame 1 on
        assert (picture(frame, 2) == [80, 90, 100, 100, 100][j]).all()

    def background(frame: np.ndarray, i: int) -> tuple:  # the band's colour, at its top right corner
        return tuple(label(frame, i)[0, -1])

    grey, red = (235, 235, 235), (120, 20, 20)
    assert background(out[0], 1) == grey and background(out[1], 1) == red  # ended: red from its last frame on
    assert background(out[3], 0) == grey and background(out[4], 0) == red
    assert background(out[4], 2) == grey  # cut before its end (not `ended`): not marked so
    assert not np.array_equal(label(out[0], 0), label(out[1], 0))  # the step written in changes
    # 7 tiles wrap into rows of 4 and 3; a missing cell stays white
    seven = video.grid_frames([tile(f"k{i}", [i * 30]) for i in range(7)], pad=1)[0]
    assert seven.shape == (2 * (band + 20) + 3, 4 * 80 + 5, 3) and (seven[-21:-1, -81:-1] == 255).all()
    with pytest.raises(ValueError):
        video.grid_frames([video.Tile("x", [], [], True)])


def test_group_spans():
    assert group_spans(["ppo", "ppo", "ipd", "ipd-r0x2", "ipd-r0x2"]) == [
        ("ppo", 0, 2),
        ("ipd", 2, 3),
        ("ipd-r0x2", 3, 5),
    ]
    assert group_spans([]) == []


def row(name, group, run="r", checkpoint=None):
    return {"name": name, "group": group, "run": run, "checkpoint": checkpoint or f"/{run}/{name}", "task": "T"}


def test_policy_order_is_method_then_chain_position():
    rows = [
        row("ipd/k10", "ipd"),
        row("wsr/k0", "wsr"),
        row("ref1", "ppo"),
        row("ipd-r0x2/k0", "ipd-r0x2"),
        row("ipd/k2", "ipd"),
        row("ref0", "ppo"),
        row("cpo/k0", "cpo"),
    ]
    assert [rows[i]["name"] for i in policy_order(rows)] == [
        "ref0",
        "ref1",
        "wsr/k0",
        "cpo/k0",
        "ipd/k2",
        "ipd/k10",
        "ipd-r0x2/k0",
    ]


def test_known_distances_merges_the_runs_and_leaves_cross_run_pairs_unknown():
    # two runs borrowing the same two references (same checkpoints), each with one novel policy
    refs = ["/p/ref0", "/p/ref1"]
    ipd = {
        "policies": [row("ref0", "ppo", "p", refs[0]), row("ref1", "ppo", "p", refs[1]), row("ipd/k0", "ipd", "i")],
        "action_distance_matrix": {
            "names": ["ref0", "ref1", "ipd/k0"],
            "matrix": [[0, 1.0, 2.0], [1.5, 0, 2.5], [3.0, 3.5, 0]],
        },
    }
    wsr = {
        "policies": [row("ref0", "ppo", "p", refs[0]), row("ref1", "ppo", "p", refs[1]), row("wsr/k0", "wsr", "w")],
        "action_distance_matrix": {
            "names": ["ref0", "ref1", "wsr/k0"],
            "matrix": [[0, 1.0, 4.0], [1.5, 0, 4.5], [5.0, 5.5, 0]],
        },
    }
    order = [*refs, "/i/ipd/k0", "/w/wsr/k0"]
    m = known_distances(order, [ipd, wsr])
    expected = np.array([[0, 1.0, 2.0, 4.0], [1.5, 0, 2.5, 4.5], [3.0, 3.5, 0, np.nan], [5.0, 5.5, np.nan, 0]])
    np.testing.assert_array_equal(m, expected)


def test_the_heatmap_reuses_the_evaluations_measurements_of_relative_checkpoints(tmp_path, monkeypatch, maze_policies):
    # two runs, one policy each: the pair meets in no run, so both rows are measured, unless the evaluation's cache
    # (keyed by the resolved checkpoint, as evaluate_run keys it) already holds them
    monkeypatch.chdir(tmp_path)
    rows, docs, cache = [], [], {}
    for run, action in (("a", [1.0, 0.0]), ("b", [0.0, 1.0])):
        policy = maze_policies.const(action)
        checkpoint = policy.save(tmp_path / run / "policy.safetensors")
        cache[(str(checkpoint.resolve()), 2, 0)] = measure_policy(policy, 2, 0)
        r = row(f"{run}0", "ppo" if run == "a" else "ipd", run, f"{run}/policy.safetensors")  # relative, as portable()
        rows.append(r)
        docs.append({"run": run, "settings": {"episodes": 2, "seed": 0}, "policies": [r]})

    def measure_again(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(distances, "measure_policy", measure_again)
    d = distances.task_distances("T", rows, docs, {}, cache, log=lambda line: None)
    assert d.labels == ["a0", "b0"] and d.matrix[0, 1] == pytest.approx(np.sqrt(2.0))
    # a row the cache lacks is measured with its run's time limit (from the configurations given)
    del cache[(str((tmp_path / "b" / "policy.safetensors").resolve()), 2, 0)]
    measured = []
    monkeypatch.setattr(distances, "measure_policy", lambda *a: measured.append(a[1:]) or measure_policy(*a))
    again = distances.task_distances("T", rows, docs, {"b": {"ppo": {"max_episode_steps": 7}}}, cache, lambda _: None)
    assert measured == [(2, 0, 7)]
    np.testing.assert_allclose(again.matrix, d.matrix, rtol=1e-6)


def test_distance_heatmap_figure():
    m = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, np.nan], [0.5, 0.2, 0.0]])
    fig = distance_heatmap_figure(m, ["ref0", "ref1", "ipd/k0"], ["ppo", "ppo", "ipd"], title="T")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ref0", "ref1", "ipd/k0"]
    assert sum(t.get_text() == "2" for t in ax.texts) == 1  # the cell values are written in
    with pytest.raises(ValueError):
        distance_heatmap_figure(m, ["a", "b"], ["g", "g"])


@pytest.mark.parametrize("n", [2, 3, 30])
def test_the_heatmaps_colour_bar_label_is_whole_at_any_size(n):
    """The label lies inside the figure (it was cut at the top and bottom with 3 policies)."""
    fig = distance_heatmap_figure(np.ones((n, n)) - np.eye(n), [f"p{i}" for i in range(n)], ["g"] * n)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # lays the figure out
    renderer = canvas.get_renderer()
    label = fig.axes[1].yaxis.label
    box, page = label.get_window_extent(renderer), fig.bbox
    assert label.get_text().startswith("D(row, column)")
    assert page.y0 <= box.y0 and box.y1 <= page.y1 and page.x0 <= box.x0 and box.x1 <= page.x1


def test_a_stem_with_a_dot_keeps_it_in_the_video_name(tmp_path, monkeypatch):
    monkeypatch.setattr(video, "mp4_available", lambda: False)
    path = video.save_video(frames(3), tmp_path / "maze__ipd__ipd-r0x0.5-k1", fps=5)
    assert path.name == "maze__ipd__ipd-r0x0.5-k1.gif" and path.exists()


def test_every_method_gets_a_population_video_and_every_policy_a_filmstrip(tmp_path, maze_policies):
    # chains at r0 x 0.5: the policies' names hold a dot, which must not be taken for a file suffix
    rows = []
    for k, action in enumerate(([-1.0, 0.0], [0.0, 1.0], [0.0, -1.0])):
        checkpoint = maze_policies.const(action, method="ipd", seed=k).save(tmp_path / f"p{k}.safetensors")
        name, group, role = ("ref0", "ppo", "reference") if k == 0 else (f"ipd-r0x0.5/k{k - 1}", "ipd", "novel")
        rows.append({**row(name, group, "runs/ipd", str(checkpoint)), "seed": k, "role": role, "env": "maze"})
        rows[-1]["goal_from_right"] = "right"
    blocks = behaviour_blocks(rows, tmp_path / "report", seed=0, videos="gif", limit=None, log=lambda line: None)
    written = sorted(p.name for p in (tmp_path / "report" / "figures" / "behaviour").iterdir())
    strips = ["T__ipd__ref0", "T__ipd__ipd-r0x0.5-k0", "T__ipd__ipd-r0x0.5-k1"]
    assert written == sorted([f"{s}.png" for s in strips] + ["T__population__ppo.gif", "T__population__ipd.gif"])
    task = next(b for b in blocks if isinstance(b, Details))
    assert task.heading.text == "T" and task.open  # a section per task, open
    methods = [b for b in task.blocks if isinstance(b, Details)]
    assert [m.heading.text for m in methods] == ["T: ppo", "T: ipd"] and not any(m.open for m in methods)
    ipd = methods[1].blocks
    assert ipd[0].path == "figures/behaviour/T__population__ipd.gif"  # the video first, then each filmstrip
    assert [b.alt for b in ipd[1:]] == ["filmstrip of ipd-r0x0.5/k0", "filmstrip of ipd-r0x0.5/k1"]
    with PILImage.open(tmp_path / "report" / ipd[0].path) as gif:  # the reference and both policies of the chain
        assert gif.size == (3 * 160 + 4 * 2, video.LABEL_HEIGHT + 160 + 2 * 2)
    assert "which ended at step" in ipd[1].caption and "steps 0, " in ipd[1].caption
    assert behaviour_blocks(rows, tmp_path / "r", seed=0, videos=None, limit=0, log=print) == []  # no placeholder


def test_mujoco_gl_defaults_to_egl_only_where_libegl_is_installed():
    from npsco.report.behaviour import default_mujoco_gl

    asked: list[str] = []

    def installed(name: str) -> str:
        asked.append(name)
        return "libEGL.so.1"

    environ: dict[str, str] = {}
    default_mujoco_gl(environ, installed)
    assert environ == {"MUJOCO_GL": "egl"} and asked == ["EGL"]
    environ = {}
    default_mujoco_gl(environ, lambda name: None)  # no libEGL: `import mujoco` under egl would fail; left unset
    assert environ == {}
    environ = {"MUJOCO_GL": "osmesa"}
    default_mujoco_gl(environ, installed)
    assert environ == {"MUJOCO_GL": "osmesa"}  # the user's choice stands
