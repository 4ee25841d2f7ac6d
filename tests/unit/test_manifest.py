"""The manifest's types: a chain as a (method, scale) value named as on disk, and a member read back as written."""

import dataclasses

import pytest

from npsco.manifest import Chain, Member


@pytest.mark.parametrize(
    ("chain", "name"),
    [
        (Chain("ipd"), "ipd"),
        (Chain("ipd", 0.5), "ipd-r0x0.5"),
        (Chain("ipd", 2.0), "ipd-r0x2"),
        (Chain("wsr", 1.5), "wsr-r0x1.5"),
        (Chain("ppo"), "ppo"),
        (Chain("ipd", 0.25), "ipd-r0x0.25"),
    ],
)
def test_a_chain_is_named_as_on_disk_and_parsed_back(chain, name):
    assert chain.name == name and str(chain) == name
    assert Chain.parse(name) == chain


def test_the_scale_is_kept_as_the_name_writes_it():
    chain = Chain("ipd", 0.123456789)
    assert chain.name == "ipd-r0x0.123457" and chain.scale == 0.123457  # what a manifest reads back
    assert Chain.parse(chain.name) == chain


def test_multiple_and_odd_names():
    assert Chain("ipd").multiple == 1.0 and Chain("ipd", 0.5).multiple == 0.5
    assert Chain.parse("ipd-r0x0.5-t0") == Chain("ipd-r0x0.5-t0")  # no number after the mark: a plain name
    assert Chain.parse("ipd-r0x0.5-t0").name == "ipd-r0x0.5-t0"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Chain("ipd").scale = 2.0  # a value: frozen


def test_a_member_record_round_trips_with_its_chain_by_name():
    member = Member(
        name="ipd-r0x2/k1",
        role="novel",
        method="ipd",
        seed=1001,
        path="novel/ipd-r0x2/k1",
        chain=Chain("ipd", 2.0),
        index=1,
        threshold=0.4,
        references=["ref0", "ipd-r0x2/k0"],
    )
    record = member.to_dict()
    assert record["chain"] == "ipd-r0x2" and list(record) == [f.name for f in dataclasses.fields(Member)]
    assert Member.from_dict(record) == member
    assert Member.from_dict({**record, "added_by_a_later_npsco": 1}) == member
    reference = Member(name="ref0", role="reference", method="ppo", seed=0, path="refs/ref0")
    assert reference.to_dict()["chain"] is None and Member.from_dict(reference.to_dict()) == reference
    assert str(member.checkpoint_in("/runs/pop")) == "/runs/pop/novel/ipd-r0x2/k1/policy.safetensors"
