"""Ask an OpenAI-compatible server, before the first episode, whether it can serve the run.

``GET {base_url}/models`` once: a wrong address, a refused key or a model the server does not
serve is then one line at the start instead of every episode failing as an infrastructure
error minutes later.
"""

from __future__ import annotations

from typing import Any

import httpx2

from longhorizon.core.errors import UsageError


def _detail(resp) -> str:
    try:
        data = resp.json()
    except ValueError:
        return " ".join((resp.text or resp.reason_phrase or "").split())[:200]
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        err = err.get("message") or err.get("detail") or err
    return " ".join(str(err).split())[:200]


async def check_server(base_url: str, model: str, api_key: str = "", timeout_s: float = 10.0) -> list[str]:
    """The models ``base_url`` serves; raises ``UsageError`` (one line saying what is wrong)
    when the server cannot be reached, refuses the key, is not OpenAI-compatible, or does not
    list ``model``."""
    return [str(c["id"]) for c in await _models(base_url, model, api_key, timeout_s)]


async def model_card(base_url: str, model: str | None = None, api_key: str = "",
                     timeout_s: float = 10.0) -> tuple[str, dict]:
    """``(name, entry)`` of ``model`` in the server's model list (no model: the one it serves),
    checked as ``check_server`` does. vLLM's entry says where the model was loaded from
    (``root``) and its context (``max_model_len``): what a token-level client needs."""
    cards = await _models(base_url, model, api_key, timeout_s)
    if model is None:
        if len(cards) != 1:
            raise UsageError(f"the model server at {base_url} serves {len(cards)} models "
                             f"({', '.join(str(c['id']) for c in cards)}): name one")
        return str(cards[0]["id"]), cards[0]
    return model, next(c for c in cards if str(c["id"]) == model)


async def _models(base_url: str, model: str | None, api_key: str, timeout_s: float) -> list[dict]:
    url = f"{base_url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx2.AsyncClient(timeout=timeout_s, headers=headers) as client:
            resp = await client.get(url)
    except httpx2.InvalidURL as exc:
        raise UsageError(f"--base-url {base_url!r} is not a valid URL ({exc})") from None
    except httpx2.UnsupportedProtocol:
        raise UsageError(f"--base-url {base_url!r} needs http:// or https://") from None
    except httpx2.TimeoutException:
        raise UsageError(f"the model server at {base_url} did not answer within {timeout_s:g} s") from None
    except httpx2.TransportError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"cannot reach the model server at {base_url} ({reason}); is it running?") from None
    if resp.status_code in (401, 403):
        raise UsageError(f"the model server at {base_url} refused the API key (HTTP {resp.status_code}: "
                         f"{_detail(resp)}); pass --api-key or set OPENAI_API_KEY")
    if resp.status_code == 404:
        raise UsageError(f"{url} does not exist (HTTP 404): --base-url should be the API root, "
                         "e.g. http://127.0.0.1:8000/v1")
    if resp.status_code != 200:
        raise UsageError(f"the model server at {base_url} answered HTTP {resp.status_code} to GET /models: "
                         f"{_detail(resp)}")
    try:
        data: Any = resp.json()
        cards = [m for m in data["data"] if isinstance(m, dict)]
        served = [str(m["id"]) for m in cards]
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{url} did not answer like an OpenAI-compatible server (no model list)") from None
    if model is not None and model not in served:
        shown = ", ".join(served[:10]) + (", ..." if len(served) > 10 else "")
        raise UsageError(f"the model server at {base_url} does not serve model {model!r} "
                         f"(it serves: {shown or 'nothing'}); check --model")
    return cards
