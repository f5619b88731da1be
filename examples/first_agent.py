"""A first agent of your own: `longhorizon run --policy examples.first_agent:make --task ID --out runs/mine`.

It looks at the workspace once, then stops (so it passes nothing): replace `act` with your model.
"""

import json


class LookAroundAgent:
    name = "look-around"

    def describe(self) -> dict:  # recorded in every trajectory: say what acted and how
        return {"policy": self.name, "model": None, "sampling": None}

    async def act(self, messages: list[dict], tools: list[dict], ctx) -> dict:
        names = [t["function"]["name"] for t in tools]  # OpenAI-format schemas, named APP__TOOL
        if "files__list_dir" in names and not any(m["role"] == "tool" for m in messages):
            call = {"id": "call_1", "type": "function",
                    "function": {"name": "files__list_dir", "arguments": json.dumps({"path": "."})}}
            return {"role": "assistant", "content": "First, what is in the workspace?", "tool_calls": [call]}
        return {"role": "assistant", "content": "Done looking; a real agent would work here."}


def make(**options) -> LookAroundAgent:  # options: --model, --base-url, --temperature, ... (None if not given)
    return LookAroundAgent()
