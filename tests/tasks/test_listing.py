"""`tasks list` from caches: no family imported, no Task generated, no oracle played when warm."""

import json

import pytest

from longhorizon.cli import main
from longhorizon.core.task import HOLDOUT_SEED_BASE, SPLITS
from longhorizon.tasks import listing, registry
from longhorizon.tasks.registry import families, instances

LIST = ["tasks", "list", "--format", "json", "--seeds", "1", "--family", "downloads_cleanup"]


def test_a_warm_listing_imports_no_family_and_plays_no_oracle(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(LIST) == 0  # cold: counts the oracle's calls once and caches them
    cold = json.loads(capsys.readouterr().out)

    def refuse(*args, **kwargs):
        raise AssertionError("a warm listing must not import families or play the oracle")

    monkeypatch.setattr(registry, "_load", refuse)  # families(), get_family() and so generate()
    monkeypatch.setattr("longhorizon.env.episode.play_task", refuse)
    assert main(LIST) == 0
    assert json.loads(capsys.readouterr().out) == cold
    assert [r["id"] for r in cold] == ["downloads_cleanup-000000", f"downloads_cleanup-{HOLDOUT_SEED_BASE:06d}"]


def test_a_cold_listing_says_it_is_counting_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(LIST) == 0
    assert capsys.readouterr().err == (f"counting the oracle's tool calls of 2 tasks (once; cached in "
                                       f"{tmp_path / 'longhorizon'}/oracle-calls-{listing.suite_fingerprint()}.json)\n")
    assert main(LIST) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("seeds", [None, 2])
def test_cached_families_choose_the_same_instances_as_the_registry(tmp_path, monkeypatch, split, seeds):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    listing.listed_families()  # cold: read from the registry, then cached
    for level in (None, 1, 2):
        cached = listing.listed_instances(split, seeds, level=level)
        assert [(f.name, s, lv) for f, s, lv in cached] == [(f.name, s, lv) for f, s, lv in
                                                             instances(split, seeds, level=level)]


@pytest.mark.parametrize("family", [f.name for f in families()])
def test_an_instance_says_what_its_family_lists(family):
    fam = registry.get_family(family)
    for split in SPLITS:
        for seed in registry.suite_seeds(split, fam)[:1]:
            for level in (None, *range(1, fam.levels)):
                card = fam.instance(seed, level).card()
                assert fam.listing(seed, level) == {k: card[k] for k in ("id", "category", "family", "split",
                                                                          "level", "apps")}
