"""The verl AgentLoop adapter with verl's own types (AgentLoopBase, TokenOutput,
AgentLoopOutput) on CPU: a multi-turn Episode of a real Task, sampled through a stand-in for
verl's server manager; the response mask selects exactly the tokens the policy sampled, tool
results are masked, log-probs line up. Runs in its own environment (.venvs/verl: `make test`)."""

import pytest

pytest.importorskip("verl", reason="verl has its own environment: .venvs/verl (make verl-venv; make test runs it)")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from longhorizon.adapters.verl_agent_loop import AGENT_NAME, LongHorizonAgentLoop  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402
from longhorizon.tasks.registry import get_family  # noqa: E402
from longhorizon.train.tiny import default_corpus, train_tokenizer  # noqa: E402

TASK = "downloads_cleanup-000000"
SCRIPT = [  # what the stand-in model "samples", turn by turn
    {"role": "assistant", "content": "Let me look around.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "files__list_dir", "arguments": '{"path": "."}'}}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "files__read_file", "arguments": '{"path": "nope.txt"}'}}]},
    {"role": "assistant", "content": "Done."},
]


class ScriptedServer:
    """verl's server manager as the agent loop sees it: ``generate`` returns a TokenOutput."""

    def __init__(self, tokenizer):
        self.renderer = ChatRenderer(tokenizer)
        self.calls = []  # (prompt_ids, sampled ids, log-probs)

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kw):
        ids = self.renderer.assistant_ids(SCRIPT[len(self.calls)])
        logprobs = [-0.01 * (len(self.calls) + 1) - 0.001 * k for k in range(len(ids))]
        self.calls.append((list(prompt_ids), ids, logprobs))
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(default_corpus([get_family("downloads_cleanup")]), vocab_size=600)


async def test_a_multi_turn_episode_decodes_to_exactly_the_policy_tokens(tokenizer):
    config = OmegaConf.create({"actor_rollout_ref": {"model": {"path": "tiny"},
                                                     "rollout": {"prompt_length": 8192, "response_length": 8192}}})
    server = ScriptedServer(tokenizer)
    loop = LongHorizonAgentLoop(DictConfigWrap(config), server, tokenizer, None, RLHFDataset,
                                DictConfigWrap(OmegaConf.create({})))
    out = await loop.run({"temperature": 1.0}, extra_info={"task_id": TASK, "sample": 0}, agent_name=AGENT_NAME)
    assert isinstance(out, AgentLoopOutput) and len(server.calls) == 3

    assert out.prompt_ids == server.calls[0][0], "the prompt is the first turn's, as the server saw it"
    ids, mask, lps = out.response_ids, out.response_mask, out.response_logprobs
    assert len(ids) == len(mask) == len(lps)
    sampled = [t for _, s, _ in server.calls for t in s]
    assert [t for t, m in zip(ids, mask) if m] == sampled
    assert tokenizer.decode([t for t, m in zip(ids, mask) if m]) == "".join(
        tokenizer.decode(s) for _, s, _ in server.calls)
    assert [lp for lp, m in zip(lps, mask) if m] == [lp for _, _, ls in server.calls for lp in ls]
    assert all(lp == 0.0 for lp, m in zip(lps, mask) if not m)
    # each later prompt is everything before it: token-in/token-out, nothing re-tokenised
    for k in (1, 2):
        assert server.calls[k][0] == out.prompt_ids + ids[:len(server.calls[k][0]) - len(out.prompt_ids)]
    env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "nope.txt" in env_text and "Error" in env_text, "the tool results are in the masked part"
    assert out.extra_fields["tool_calls"] == 2 and out.extra_fields["status"] == "completed"
    assert out.reward_score == 0.0 and not out.extra_fields["passed"]  # looking around solves nothing

    batch = out.as_dict()  # what verl's worker pads and stacks
    assert batch["responses"].tolist() == ids and batch["response_mask"].sum().item() == len(sampled)
    assert batch["rollout_log_probs"].shape == batch["responses"].shape


def test_the_recipe_config_composes_over_verls_trainer_config_into_its_typed_configs():
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    root = Path(__file__).resolve().parents[2] / "configs" / "verl"
    with initialize_config_dir(config_dir=str(root), version_base=None):
        cfg = compose("gspo_recipe", overrides=["actor_rollout_ref.model.path=runs/sft"])
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert rollout.n == 8 and rollout.agent.default_agent_loop == AGENT_NAME
    assert actor.policy_loss.loss_mode == "gspo" and (actor.clip_ratio_low, actor.clip_ratio_high) == (3e-4, 4e-4)
    assert (cfg.actor_rollout_ref.model.lora_rank, cfg.actor_rollout_ref.model.lora_alpha) == (32, 32)
    loops = OmegaConf.load(root / "agent_loops.yaml")
    assert [(x.name, x._target_) for x in loops] == [
        (AGENT_NAME, f"{LongHorizonAgentLoop.__module__}.{LongHorizonAgentLoop.__qualname__}")]
