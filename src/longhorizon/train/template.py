"""The one chat template: every model this project trains, samples or serves renders with it.

SFT examples, RL episodes, the local policy and a served model (vLLM reads the folder's
``chat_template.jinja``) all render conversations through this text, byte for byte, for the
tiny random model and for the embedded SmolLM2 alike. It uses ChatML's turn tokens
(``<|im_start|>ROLE``, a newline, the text, ``<|im_end|>``: SmolLM2's own) and adds what
SmolLM2's template lacks:

* tools: listed in the system turn as JSON Schemas inside ``<tools></tools>``;
* tool calls: ``{"name": ..., "arguments": {...}}`` on a line of its own between a
  ``<tool_call>`` and a ``</tool_call>`` line in the assistant's turn (what
  ``policies.local_model.parse_completion`` and vLLM's ``hermes`` parser read);
* tool results: the results of one turn come back together, each in ``<tool_response>``
  tags, in the next user turn (Qwen's layout);
* ``{% generation %}`` markers around exactly what the assistant emits after
  ``<|im_start|>assistant`` and its newline (its text, calls and ``<|im_end|>``), so TRL's
  assistant-only loss and ``return_assistant_tokens_mask`` know which tokens are the model's.

Written for transformers' Jinja settings (trim_blocks, lstrip_blocks). Tool arguments that are
strings (JSON as sampled) are written as they are; objects are serialised.
"""

from __future__ import annotations

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
"""The tokens the template and the models share (ids 0, 1, 2 in SmolLM2's vocabulary and the tiny one's):
padding, start of a turn, end of a turn (the end-of-sequence token every model here stops on)."""

CHAT_TEMPLATE = """\
{%- macro render_call(tc) -%}
{%- set fn = tc.function if tc.function is defined else tc -%}
{{- '<tool_call>\\n{"name": ' + (fn.name | tojson) + ', "arguments": ' -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}
{%- else -%}{{- (fn.arguments if fn.arguments is defined else {}) | tojson -}}{%- endif -%}
{{- '}\\n</tool_call>' -}}
{%- endmacro -%}
{%- if messages and messages[0].role == 'system' -%}
{%- set system = messages[0].content or '' -%}
{%- set rest = messages[1:] -%}
{%- else -%}
{%- set system = '' -%}
{%- set rest = messages -%}
{%- endif -%}
{%- if system or tools -%}
{{- '<|im_start|>system\\n' + system -}}
{%- if tools -%}
{{- '\\n\\n# Tools\\nYou can call the functions below. Each signature is a JSON Schema inside <tools></tools>:\\n<tools>' -}}
{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\\n</tools>\\nTo call a function, write a JSON object with its name and arguments inside '
    '<tool_call></tool_call> tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <arguments-object>}'
    '\\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- for m in rest -%}
{%- if m.role == 'assistant' -%}
{{- '<|im_start|>assistant\\n' -}}
{%- generation -%}
{{- m.content or '' -}}
{%- for tc in (m.tool_calls or []) -%}
{%- if not loop.first or m.content -%}{{- '\\n' -}}{%- endif -%}
{{- render_call(tc) -}}
{%- endfor -%}
{{- '<|im_end|>' -}}
{%- endgeneration -%}
{{- '\\n' -}}
{%- elif m.role == 'tool' -%}
{%- if loop.first or rest[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\\n<tool_response>\\n' + (m.content or '') + '\\n</tool_response>' -}}
{%- if loop.last or rest[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}
{%- else -%}
{{- '<|im_start|>' + m.role + '\\n' + (m.content or '') + '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""


TEMPLATE_FILE = "chat_template.jinja"
"""The file transformers (5.x) and vLLM read a folder's chat template from."""


def apply_template(tokenizer) -> None:
    """Give ``tokenizer`` this project's chat template and ChatML's end-of-turn token."""
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = IM_END


def save_tokenizer(tokenizer, out_dir) -> None:
    """``tokenizer.save_pretrained(out_dir)`` with the chat template in both places readers look:
    ``chat_template.jinja`` (transformers 5, vLLM) and ``tokenizer_config.json`` (older readers)."""
    import json
    from pathlib import Path

    tokenizer.save_pretrained(out_dir)
    template = tokenizer.chat_template
    if not isinstance(template, str):
        return
    out = Path(out_dir)
    (out / TEMPLATE_FILE).write_text(template)
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["chat_template"] = template
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
