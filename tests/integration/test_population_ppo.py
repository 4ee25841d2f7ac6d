"""`npsco population --method ppo`: the novel policies are more PPO seeds (no references, no threshold)."""

import json

from npsco.cli import main


def test_ppo_population_trains_more_seeds_without_a_threshold(tmp_path, capsys):
    out = tmp_path / "pop"
    code = main(
        [
            "population",
            "--method",
            "ppo",
            "--refs",
            "1",
            "--novel",
            "1",
            "--steps",
            "1024",
            "--set",
            "num_steps=64",
            "--set",
            "eval_episodes=2",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    members = json.loads((out / "manifest.json").read_text())["members"]
    novel = [m for m in members if m["role"] == "novel"]
    assert [m["status"] for m in members] == ["done", "done"]
    assert novel[0]["method"] == "ppo" and novel[0]["threshold"] is None and novel[0]["references"] == []
    assert (out / novel[0]["path"] / "policy.safetensors").exists()
    assert "no novelty constraint" in capsys.readouterr().out
