"""What becomes of the episodes SFT is given: examples cut or dropped at max_length are counted
and reported (output and summary JSON); the context policy makes long episodes trainable; RL
refuses a policy with one."""

import asyncio
import json

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.env.episode import play_task  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402
from longhorizon.policies.scripted import OraclePolicy  # noqa: E402
from longhorizon.train.data import clean_message  # noqa: E402
from longhorizon.train.sft import prepare_examples  # noqa: E402


@pytest.fixture(scope="module")
def episodes(make_copy_task, files_tools):
    """Two oracle episodes of the copy task: one as played, one whose request is so long that its
    prompt alone fills a small max_length."""
    teacher = asyncio.run(play_task(make_copy_task(), OraclePolicy()))
    short = [clean_message(m) for m in teacher.messages]
    long = [dict(m) for m in short]
    long[1]["content"] = "Copy in.txt to out.txt. " + "Please be careful. " * 200
    row = {"tools": json.dumps(files_tools), "split": "train", "task_id": "copy-000000"}
    return [{**row, "messages": short}, {**row, "messages": long}]


def test_examples_cut_or_dropped_at_max_length_are_counted_with_the_reason(episodes, small_model, files_tools):
    tok = AutoTokenizer.from_pretrained(small_model)
    short_len = len(ChatRenderer(tok).episode(episodes[0]["messages"], files_tools)[0])
    data, report = prepare_examples(Dataset.from_list(episodes), tok, max_length=short_len - 3)
    assert len(data) == 1 and len(data[0]["input_ids"]) == short_len - 3
    assert (report["episodes"], report["examples"], report["kept"], report["truncated"]) == (2, 2, 1, 1)
    assert report["dropped"] == {f"no assistant token within max_length {short_len - 3}": 1}
    assert "1 of 2 examples kept" in report["summary"] and "1 dropped (1 no assistant token" in report["summary"]
    whole = sum(sum(ChatRenderer(tok).episode(e["messages"], files_tools)[1]) for e in episodes)
    assert report["assistant_tokens"] == {"trained": sum(data[0]["assistant_masks"]), "all": whole}
    assert "of the assistant tokens trained" in report["summary"]
    with pytest.raises(UsageError, match="no SFT example left"):
        prepare_examples(Dataset.from_list(episodes[1:]), tok, max_length=short_len - 3)


def test_train_sft_reports_dropped_examples_in_its_output_and_summary(episodes, small_model, files_tools, tmp_path,
                                                                     capsys):
    from longhorizon.cli import main

    tok = AutoTokenizer.from_pretrained(small_model)
    fits = len(ChatRenderer(tok).episode(episodes[0]["messages"], files_tools)[0])
    data = tmp_path / "data"
    Dataset.from_list(episodes).save_to_disk(str(data / "hf"))
    out = tmp_path / "sft"
    assert main(["train", "sft", "--data", str(data), "--model", str(small_model), "--out", str(out),
                 "--max-steps", "1", "--max-length", str(fits), "--quiet"]) == 0
    stdout, stderr = capsys.readouterr()
    printed = json.loads(stdout[stdout.rindex('{\n  "out"'):])["data"]  # (TRL prints its own dicts before it)
    assert printed["dropped"] == {f"no assistant token within max_length {fits}": 1} and printed["kept"] == 1
    assert printed["summary"] in stderr.splitlines()
    assert json.loads((out / "summary.json").read_text())["data"] == printed


def test_the_context_policy_makes_a_long_episode_trainable_at_a_small_max_length(episodes, small_model, files_tools):
    """The long request is kept; the tool results are what it elides. Each assistant token once."""
    tok = AutoTokenizer.from_pretrained(small_model)
    long = dict(episodes[0])
    long["messages"] = [dict(m) for m in long["messages"]]
    for m in long["messages"]:
        if m["role"] == "tool":
            m["content"] = m["content"] + "\n" + "padding line\n" * 150
    ids, mask = ChatRenderer(tok).episode(long["messages"], files_tools)
    prompt_to_last = ids[:max(k for k in range(len(mask)) if mask[k] and not mask[k - 1])]
    small = len(prompt_to_last) - 100  # the last turn's whole prompt does not fit
    plain, plain_report = prepare_examples(Dataset.from_list([long]), tok, max_length=small)
    assert plain_report["truncated"] == 1 and sum(plain[0]["assistant_masks"]) < sum(mask)
    data, report = prepare_examples(Dataset.from_list([long]), tok, max_length=small + 100,
                                    context_policy="elide-oldest", max_context=small)
    assert report["examples"] == len(data) > 1 and report["truncated"] == 0 and not report["dropped"]
    assert sum(sum(row["assistant_masks"]) for row in data) == sum(mask)
    assert all(len(row["input_ids"]) <= small + 100 for row in data)
    assert "context policy elide-oldest" in report["summary"]


def test_the_sft_config_refuses_a_context_policy_without_its_budget():
    from longhorizon.train.config import SFTConfig

    with pytest.raises(UsageError, match="max_context"):
        SFTConfig(context_policy="elide-oldest").validate()
    with pytest.raises(UsageError, match="context_policy"):
        SFTConfig(max_context=512).validate()


def test_rl_refuses_a_sampling_policy_with_a_context_policy(tmp_path):
    from longhorizon.train.config import RLConfig
    from longhorizon.train.rl import EpisodeRollout

    class Eliding:
        context = object()

    rollout = EpisodeRollout({}, RLConfig(), tokenizer=None, policy_factory=lambda model: Eliding())
    with pytest.raises(UsageError, match="context policy"):
        rollout.policy(object())
