"""A stand-in for a hosted LLM: a real OpenAI-compatible HTTP server on loopback.

The only part of the system this machine cannot have is a hosted model, so tests and demos run
the real client (``OpenAIPolicy``) over real HTTP against this server. It speaks the
chat-completions schema (``POST /v1/chat/completions``, ``GET /v1/models``), validates requests
the way a real server does (400 on a missing model or messages, malformed tools, tool results
that answer no call; 404 on an unknown model; 401 on a wrong key) and can be told to fail the
next N requests so retries are tested for real: with an HTTP error (503, 429, 500, ...), by
never answering (``stall_next``: the client's timeout fires), or by dropping the connection
half-way through the response body (``drop_next``). Its replies come from a *brain*:
any callable ``(request_json) -> assistant message dict``.

    with StandinLLM(ScriptedBrain([...])) as srv:
        policy = OpenAIPolicy(base_url=srv.base_url, model=srv.model)

Like vLLM, it returns ``logprobs`` (with ``return_tokens_as_token_ids``) and ``token_ids`` /
``prompt_token_ids`` (with ``return_token_ids``) when asked. Its "tokens" are word pieces with
stable ids, unless the brain's message supplies ``token_ids`` / ``logprobs`` itself.

Token in, token out: with a ``completion_brain`` it also answers ``POST /v1/completions`` whose
``prompt`` is a list of token ids, as vLLM does (``choices[0].token_ids``, ``prompt_token_ids``,
``logprobs.token_logprobs``, ``stop_token_ids`` and ``max_tokens`` applied). A completion brain
is ``(request_json) -> {"token_ids": [...], "logprobs": [...]}``. With a ``control`` handler it
answers vLLM's dev-mode endpoints too (``/collective_rpc``, ``/pause``, ``/resume``,
``/reset_prefix_cache``): ``control(path, request_json) -> response_json``; without one they are
404, as on a vLLM server started without ``VLLM_SERVER_DEV_MODE``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from longhorizon.core.task import dumps_canonical

Brain = Callable[[dict], dict]

CONTROL_ROUTES = ("/collective_rpc", "/pause", "/resume", "/reset_prefix_cache")
"""vLLM's dev-mode endpoints (``VLLM_SERVER_DEV_MODE=1``) that weight syncing uses."""

ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PIECE = re.compile(r"\s*\S+|\s+")


class BrainError(Exception):
    """A brain can raise this to answer with a given HTTP error (default 400)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class _Reject(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


# -- brains --------------------------------------------------------------------------------


def _as_message(reply: Any) -> dict:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    return dict(reply)


class ScriptedBrain:
    """Plays a fixed list of replies in order, one per request; then ``final`` forever.

    A reply is an assistant message dict, a plain string (a text reply), or a callable
    ``(request) -> reply`` for replies that depend on what the client sent (e.g. a tool result).
    """

    def __init__(self, replies: Iterable[dict | str | Callable[[dict], Any]], final: str = "Done."):
        self.replies = list(replies)
        self.final = final
        self.played = 0

    def __call__(self, request: dict) -> dict:
        if self.played >= len(self.replies):
            return {"role": "assistant", "content": self.final}
        reply = self.replies[self.played]
        self.played += 1
        return _as_message(reply(request) if callable(reply) else reply)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


class OracleBrain:
    """Plays each Task's oracle, so a real client can solve real tasks over HTTP.

    Stateless: every request replays the oracle from the start, feeding it the tool results
    found in the request's messages, so any number of concurrent episodes (even of the same
    task) are answered correctly. The Task is found by its instruction (the first user message).
    """

    def __init__(self, tasks):
        tasks = [tasks] if hasattr(tasks, "instruction") else list(tasks)
        self.tasks = {t.instruction: t for t in tasks}

    def __call__(self, request: dict) -> dict:
        messages = request["messages"]
        instruction = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), None)
        task = self.tasks.get(instruction)
        if task is None:
            raise BrainError("OracleBrain: no task has this instruction")
        results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        gen = task.oracle()
        try:
            call = next(gen)
            for result in results:
                call = gen.send(result)
        except StopIteration as stop:
            return {"role": "assistant", "content": stop.value or "Done."}
        return {
            "role": "assistant",
            "content": call.note,
            "tool_calls": [{
                "id": f"call_{len(results) + 1}",
                "type": "function",
                "function": {"name": call.name, "arguments": dumps_canonical(call.arguments)},
            }],
        }


# -- request validation -------------------------------------------------------------------


def _bad(message: str, param: str | None = None, code: str | None = None) -> _Reject:
    return _Reject(400, message, param, code or "invalid_value")


def _number(body: dict, key: str, lo: float, hi: float | None) -> None:
    if key not in body or body[key] is None:
        return
    v = body[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo or (hi is not None and v > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise _bad(f"'{key}' must be a number {bound}, got {v!r}", key)


def _int(body: dict, key: str, lo: int) -> None:
    if key not in body or body[key] is None:
        return
    v = body[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise _bad(f"'{key}' must be an integer >= {lo}, got {v!r}", key)


def validate_chat_request(body: Any, served_model: str) -> None:
    """Raise ``_Reject`` for what a real OpenAI-compatible server would refuse."""
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    model = body.get("model")
    if not model:
        raise _bad("you must provide a model parameter", "model", "missing_required_parameter")
    if not isinstance(model, str):
        raise _bad("'model' must be a string", "model")
    if model != served_model:
        raise _Reject(404, f"The model `{model}` does not exist.", "model", "model_not_found")
    _validate_messages(body.get("messages"))
    tools = body.get("tools")
    if tools is not None:
        _validate_tools(tools)
    choice = body.get("tool_choice")
    if choice is not None:
        if not tools:
            raise _bad("'tool_choice' is only allowed when 'tools' are specified", "tool_choice")
        names = {t["function"]["name"] for t in tools}
        if isinstance(choice, str):
            if choice not in ("none", "auto", "required"):
                raise _bad(f"invalid 'tool_choice' {choice!r}", "tool_choice")
        elif not (isinstance(choice, dict) and choice.get("type") == "function"
                  and isinstance(choice.get("function"), dict) and choice["function"].get("name") in names):
            raise _bad("'tool_choice' must be none, auto, required or a named function among 'tools'", "tool_choice")
    _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    _number(body, "presence_penalty", -2, 2)
    _number(body, "frequency_penalty", -2, 2)
    _int(body, "max_tokens", 1)
    _int(body, "max_completion_tokens", 1)
    _int(body, "n", 1)
    if body.get("n", 1) != 1:
        raise _bad("the stand-in serves n=1 only", "n")
    if "seed" in body and body["seed"] is not None and (isinstance(body["seed"], bool) or not isinstance(body["seed"], int)):
        raise _bad("'seed' must be an integer", "seed")
    if body.get("stream"):
        raise _bad("the stand-in does not stream; send stream=false", "stream")
    if "logprobs" in body and not isinstance(body["logprobs"], (bool, type(None))):
        raise _bad("'logprobs' must be a boolean", "logprobs")
    if body.get("top_logprobs") is not None:
        _int(body, "top_logprobs", 0)
        if not body.get("logprobs"):
            raise _bad("'top_logprobs' requires 'logprobs' to be true", "top_logprobs")


def validate_completion_request(body: Any, served_model: str) -> None:
    """What a completions request with a token-id prompt needs (vLLM's rules where they matter here)."""
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    if body.get("model") != served_model:
        raise _Reject(404, f"The model `{body.get('model')}` does not exist.", "model", "model_not_found")
    prompt = body.get("prompt")
    if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) and not isinstance(t, bool)
                                                             and t >= 0 for t in prompt):
        raise _bad("the stand-in takes a non-empty list of token ids as 'prompt'", "prompt")
    if "max_tokens" not in body:
        raise _bad("the stand-in needs 'max_tokens'", "max_tokens", "missing_required_parameter")
    _int(body, "max_tokens", 1)
    _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    if body.get("logprobs") is not None:
        _int(body, "logprobs", 0)
    stops = body.get("stop_token_ids")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(t, int) for t in stops)):
        raise _bad("'stop_token_ids' must be a list of integers", "stop_token_ids")


def _validate_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array", "messages", "missing_required_parameter")
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _bad(f"{where} must be an object", where)
        role = m.get("role")
        if role not in ROLES:
            raise _bad(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise _bad(f"{where}.content must be a string or an array of parts", f"{where}.content")
        if role == "assistant":
            calls = m.get("tool_calls")
            if content is None and not calls:
                raise _bad(f"{where}: an assistant message needs content or tool_calls", where)
            open_calls = set()
            for j, c in enumerate(calls or []):
                p = f"{where}.tool_calls[{j}]"
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(c, dict) or not isinstance(c.get("id"), str) or c.get("type") != "function" \
                        or not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise _bad(f"{p} must be {{id, type: 'function', function: {{name, arguments}}}}", p)
                if not isinstance(fn.get("arguments"), str):
                    raise _bad(f"{p}.function.arguments must be a JSON string", f"{p}.function.arguments")
                open_calls.add(c["id"])
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise _bad(f"{where}.tool_call_id is required for role 'tool'", f"{where}.tool_call_id")
            if call_id not in open_calls:
                raise _bad(
                    f"{where}: messages with role 'tool' must answer a tool call of the preceding "
                    f"assistant message (no call has id {call_id!r})", where)
        else:
            open_calls = set()
            if content is None:
                raise _bad(f"{where}.content is required for role {role!r}", f"{where}.content")


def _validate_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise _bad("'tools' must be an array", "tools")
    seen = set()
    for i, t in enumerate(tools):
        p = f"tools[{i}]"
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            raise _bad(f"{p} must be {{type: 'function', function: {{...}}}}", p)
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise _bad(f"{p}.function.name must match ^[a-zA-Z0-9_-]{{1,64}}$, got {name!r}", f"{p}.function.name")
        if name in seen:
            raise _bad(f"{p}: duplicate tool name {name!r}", f"{p}.function.name")
        seen.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise _bad(f"{p}.function.description must be a string", f"{p}.function.description")
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type", "object") != "object"):
            raise _bad(f"{p}.function.parameters must be a JSON Schema object", f"{p}.function.parameters")


# -- fake tokenisation (stable, so clients can check what they parse) ----------------------


def _pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def _piece_id(piece: str) -> int:
    return zlib.crc32(piece.encode()) % 150_000


def _completion_text(msg: dict) -> str:
    parts = [msg.get("content") or ""]
    for c in msg.get("tool_calls") or []:
        fn = c["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
        parts.append(f'<tool_call>\n{{"name": {json.dumps(fn["name"])}, "arguments": {args}}}\n</tool_call>')
    return "\n".join(p for p in parts if p)


# -- the server ----------------------------------------------------------------------------


class StandinLLM:
    """An OpenAI-compatible server on 127.0.0.1 whose replies come from ``brain``.

    ``requests`` holds every chat-completion body received (failed ones too), in order.
    ``dump_arguments=False`` passes dict arguments through as the brain wrote them, to mimic
    servers that break the schema that way.
    """

    def __init__(self, brain: Brain | None = None, *, model: str = "standin", api_key: str | None = None,
                 dump_arguments: bool = True, port: int = 0, completion_brain: Brain | None = None,
                 control: Callable[[str, dict], dict] | None = None, model_card: dict | None = None):
        self.brain = brain or ScriptedBrain([])
        self.completion_brain = completion_brain
        self.control = control
        self.model_card = dict(model_card or {})
        """Extra fields of the model's ``/v1/models`` entry (vLLM's ``root``, ``max_model_len``)."""
        self.completion_requests: list[Any] = []
        self.model = model
        self.api_key = api_key
        self.dump_arguments = dump_arguments
        self.requests: list[Any] = []
        self._port = port
        self._failures: list[tuple[str, int, str, dict[str, str]]] = []
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._brain_lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._bound: int | None = None

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> "StandinLLM":
        handler = type("_Handler", (_Handler,), {"standin": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._bound = self._httpd.server_address[1]
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="standin-llm", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._closing.set()  # stalled requests give up
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:  # drop keep-alive connections, so no one is served after close
            for conn in list(self._conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join()
        self._httpd = None

    def __enter__(self) -> "StandinLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound port (kept after close, so URLs can still be compared)."""
        assert self._bound is not None, "server not started"
        return self._bound

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # failure injection -------------------------------------------------------------------
    def fail_next(self, n: int, status: int = 503, message: str = "the stand-in is overloaded",
                  retry_after: float | None = None) -> None:
        """The next ``n`` chat requests get ``status`` (after being recorded), before validation."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        with self._lock:
            self._failures.extend([("status", status, message, headers)] * n)

    def stall_next(self, n: int) -> None:
        """The next ``n`` chat requests are read and never answered (until ``close``): a model
        server that hangs, so the client's read timeout fires."""
        with self._lock:
            self._failures.extend([("stall", 0, "", {})] * n)

    def drop_next(self, n: int) -> None:
        """The next ``n`` chat requests get a 200 whose body stops half-way, then the connection
        closes: a server or proxy dying mid-response."""
        with self._lock:
            self._failures.extend([("drop", 200, "", {})] * n)

    # request handling ----------------------------------------------------------------------
    def _next_failure(self):
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def complete(self, body: Any) -> dict:
        """The chat-completion response for ``body``; raises ``_Reject`` for an HTTP error."""
        validate_chat_request(body, self.model)
        try:
            with self._brain_lock:  # brains keep state (a script position); one request at a time
                msg = _as_message(self.brain(body))
        except BrainError as exc:
            raise _Reject(exc.status, str(exc), code="brain_error") from exc
        except Exception as exc:  # a crashing brain is a server error, as a crashing model would be
            raise _Reject(500, f"brain failed: {type(exc).__name__}: {exc}", code="internal_error") from exc
        return self._response(body, msg)

    def complete_tokens(self, body: Any) -> dict:
        """The ``/v1/completions`` response for a token-id prompt; raises ``_Reject`` for an HTTP error."""
        validate_completion_request(body, self.model)
        try:
            with self._brain_lock:
                out = self.completion_brain(body)
        except BrainError as exc:
            raise _Reject(exc.status, str(exc), code="brain_error") from exc
        except Exception as exc:
            raise _Reject(500, f"brain failed: {type(exc).__name__}: {exc}", code="internal_error") from exc
        ids, logprobs = list(out["token_ids"]), [float(v) for v in out["logprobs"]]
        finish = "length"
        stops = set(body.get("stop_token_ids") or [])
        for k, t in enumerate(ids):
            if t in stops:  # like vLLM: the stop id is the last sampled id
                ids, logprobs, finish = ids[:k + 1], logprobs[:k + 1], "stop"
                break
        if len(ids) > body["max_tokens"]:
            ids, logprobs, finish = ids[:body["max_tokens"]], logprobs[:body["max_tokens"]], "length"
        choice: dict[str, Any] = {"index": 0, "text": out.get("text", ""), "logprobs": None,
                                  "finish_reason": finish, "stop_reason": None}
        if body.get("logprobs") is not None:
            as_ids = body.get("return_tokens_as_token_ids")
            choice["logprobs"] = {"text_offset": [0] * len(ids), "token_logprobs": logprobs,
                                  "tokens": [f"token_id:{t}" if as_ids else str(t) for t in ids],
                                  "top_logprobs": [{} for _ in ids]}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = list(body["prompt"])
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": self.model, "choices": [choice],
                "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids),
                          "total_tokens": len(body["prompt"]) + len(ids)}}

    def _response(self, body: dict, msg: dict) -> dict:
        calls = []
        for i, c in enumerate(msg.get("tool_calls") or []):
            fn = c.get("function") or {}
            args = fn.get("arguments", {})
            if self.dump_arguments and not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            calls.append({"id": c.get("id") or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                          "function": {"name": fn.get("name", ""), "arguments": args}})
        content = msg.get("content")
        text = _completion_text({"content": content, "tool_calls": calls})
        if "token_ids" in msg:
            ids, pieces = list(msg["token_ids"]), None
        else:
            pieces = _pieces(text)
            ids = [_piece_id(p) for p in pieces]
        logprobs = list(msg.get("logprobs") or [0.0] * len(ids))
        finish = "tool_calls" if calls else "stop"
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit and len(ids) > limit:  # like a real server: cut the text, no parsable tool calls
            ids, logprobs, finish, calls = ids[:limit], logprobs[:limit], "length", []
            content = "".join(pieces[:limit]) if pieces else (content or "")
        prompt_ids = [_piece_id(p) for p in _pieces(json.dumps(body["messages"]) + json.dumps(body.get("tools") or []))]
        message: dict[str, Any] = {"role": "assistant", "content": content or ("" if not calls else None),
                                   "refusal": None}
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        if body.get("logprobs"):
            as_ids = body.get("return_tokens_as_token_ids")
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{t}" if as_ids or pieces is None else pieces[k], "logprob": lp,
                 "bytes": None, "top_logprobs": []}
                for k, (t, lp) in enumerate(zip(ids, logprobs))
            ]}
        out: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": "longhorizon-standin",
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids),
                      "total_tokens": len(prompt_ids) + len(ids)},
        }
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            out["prompt_token_ids"] = prompt_ids
        return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "longhorizon-standin/1"
    timeout = 60  # idle keep-alive connections are closed after this many seconds
    standin: StandinLLM

    def setup(self) -> None:
        super().setup()
        with self.standin._lock:
            self.standin._conns.add(self.request)

    def finish(self) -> None:
        with self.standin._lock:
            self.standin._conns.discard(self.request)
        super().finish()

    def log_message(self, format, *args) -> None:  # quiet: tests read failures, not logs
        pass

    def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, r: _Reject) -> None:
        kind = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}.get(
            r.status, "invalid_request_error" if r.status < 500 else "server_error")
        self._send(r.status, {"error": {"message": r.message, "type": kind, "param": r.param, "code": r.code}},
                   r.headers)

    def _authorised(self) -> bool:
        key = self.standin.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(_Reject(401, "Incorrect API key provided.", code="invalid_api_key"))
        return False

    def _json(self, raw: bytes) -> Any:
        try:
            return json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _bad(f"request body is not valid JSON: {exc}", code="invalid_json") from None

    def _post_tokens(self, raw: bytes) -> None:
        try:
            body = self._json(raw)
            self.standin.completion_requests.append(body)
            if not self._authorised():
                return
            reply = self.standin.complete_tokens(body)
        except _Reject as r:
            self._error(r)
            return
        self._send(200, reply)

    def _post_control(self, route: str, raw: bytes) -> None:
        from urllib.parse import parse_qsl, urlsplit

        try:
            body = self._json(raw)
            body = {**dict(parse_qsl(urlsplit(self.path).query)), **(body if isinstance(body, dict) else {})}
            reply = self.standin.control(route, body)
        except _Reject as r:
            self._error(r)
            return
        except Exception as exc:  # a failing handler is a server error, as a failing engine would be
            self._error(_Reject(500, f"{route} failed: {type(exc).__name__}: {exc}", code="internal_error"))
            return
        self._send(200, reply if isinstance(reply, dict) else {"result": reply})

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok"})
        elif self.path.rstrip("/") == "/v1/models":
            if self._authorised():
                self._send(200, {"object": "list", "data": [
                    {"id": self.standin.model, "object": "model", "created": 0, "owned_by": "longhorizon",
                     **self.standin.model_card}]})
        else:
            self._error(_Reject(404, f"no route {self.path}", code="not_found"))

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            self._error(_Reject(411, "Content-Length is required", code="length_required"))
            return
        raw = self.rfile.read(int(length))
        route = self.path.split("?", 1)[0].rstrip("/")
        if route == "/v1/completions" and self.standin.completion_brain is not None:
            self._post_tokens(raw)
            return
        if route in CONTROL_ROUTES and self.standin.control is not None:
            self._post_control(route, raw)
            return
        if route != "/v1/chat/completions":
            self._error(_Reject(404, f"no route {self.path}", code="not_found"))
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.standin.requests.append(raw)
            self._error(_bad(f"request body is not valid JSON: {exc}", code="invalid_json"))
            return
        self.standin.requests.append(body)
        if not self._authorised():
            return
        failure = self.standin._next_failure()
        if failure and failure[0] == "status":
            _, status, message, headers = failure
            self._error(_Reject(status, message, code=HTTPStatus(status).phrase.lower().replace(" ", "_"),
                                headers=headers))
            return
        if failure and failure[0] == "stall":
            self.standin._closing.wait(60)
            self.close_connection = True
            return
        try:
            reply = self.standin.complete(body)
        except _Reject as r:
            self._error(r)
            return
        if failure and failure[0] == "drop":
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.request.shutdown(socket.SHUT_RDWR)
            return
        self._send(200, reply)
