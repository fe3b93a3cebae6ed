"""The server's context window: discovered from its API, or learned from its refusal.

:func:`discover_window` asks the server once per process and endpoint (nothing for the
default OpenAI endpoint, ``base_url: null``), trying what each server exposes:

* ``GET {base_url}/models``: the entry of the model (or the only entry) with a window field:
  vLLM's ``max_model_len``; ``context_length`` / ``context_window`` / ``n_ctx`` of other
  OpenAI-compatible servers;
* ``GET {root}/props`` (llama.cpp's own server): ``default_generation_settings.n_ctx``;
* Ollama (recognised by ``GET {root}/api/version``): the request's ``extra_body.options.num_ctx``
  or the ``num_ctx`` of ``POST {root}/api/show`` (Ollama's default window otherwise, which it
  does not report: not discovered).

llama-cpp-python's server exposes none of these (its ``/v1/models`` lists ids only); its
context-length refusal (HTTP 400, code ``context_length_exceeded``, "This model's maximum
context length is W tokens. However, you requested R tokens (M in the messages, C in the
completion)") is parsed by :func:`overflow_numbers` instead, as are vLLM's and OpenAI's.

:func:`fitted_budget` turns a window into a context budget in estimated tokens
(:mod:`.context`): the window minus ``max_tokens``, a small margin and the tool definitions,
divided by the measured ratio of server tokens to estimated tokens.
"""

from __future__ import annotations

import re
import threading

from .config import LLMConfig

_PROBE_TIMEOUT = 5.0
_CACHE: dict[tuple, int | None] = {}
_LOCK = threading.Lock()
_MODEL_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")
_WINDOW_RE = re.compile(
    r"(?:maximum context length|context window|context size|n_ctx)"
    r"\D{0,40}?(\d{3,9})",
    re.IGNORECASE,
)
_MESSAGES_RE = re.compile(
    r"(\d{1,9}) in the messages|messages resulted in (\d{1,9}) tokens|"
    r"prompt (?:is|has) (\d{1,9}) tokens|(\d{1,9}) in your prompt",
    re.IGNORECASE,
)


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _from_models(payload, model: str) -> int | None:
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in chosen:
        for key in _MODEL_KEYS:
            if _int(entry.get(key)):
                return entry[key]
        meta = entry.get("meta")
        if isinstance(meta, dict) and _int(meta.get("n_ctx")):
            return meta["n_ctx"]
    return None


def _from_props(payload) -> int | None:
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    if isinstance(settings, dict) and _int(settings.get("n_ctx")):
        return settings["n_ctx"]
    return _int(payload.get("n_ctx"))


def _from_ollama(payload) -> int | None:
    params = payload.get("parameters") if isinstance(payload, dict) else None
    m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.MULTILINE) if isinstance(params, str) else None
    return int(m.group(1)) if m else None


def _probe(cfg: LLMConfig, key: str | None) -> int | None:
    import httpx

    assert cfg.base_url  # discover_window probes only where one is set
    base = cfg.base_url.rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=_PROBE_TIMEOUT, headers=headers) as http:

        def get(url: str):
            try:
                r = http.get(url)
                return r.json() if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None

        window = _from_models(get(f"{base}/models"), cfg.model) or _from_props(get(f"{root}/props"))
        if window or get(f"{root}/api/version") is None:  # not Ollama
            return window
        options = (cfg.extra_body or {}).get("options")
        if isinstance(options, dict) and _int(options.get("num_ctx")):
            return options["num_ctx"]
        try:
            r = http.post(f"{root}/api/show", json={"model": cfg.model})
            return _from_ollama(r.json()) if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None


def discover_window(cfg: LLMConfig, key: str | None = None) -> int | None:
    """The server's context window in tokens, or ``None`` where its API does not say; asked
    once per process and ``(base_url, model)`` (blocking: at most a few short requests)."""
    if cfg.context_window is not None:
        return cfg.context_window
    if not cfg.base_url or not cfg.discover_window:
        return None
    ident = (cfg.base_url, cfg.model)
    with _LOCK:
        if ident in _CACHE:
            return _CACHE[ident]
    window = _probe(cfg, key)
    with _LOCK:
        return _CACHE.setdefault(ident, window)


def overflow_numbers(message: str) -> tuple[int | None, int | None]:
    """``(window, prompt_tokens)`` from a server's context-length refusal (``None`` where the
    message does not give the number)."""
    w = _WINDOW_RE.search(message or "")
    m = _MESSAGES_RE.search(message or "")
    prompt = next((int(g) for g in m.groups() if g), None) if m else None
    return (int(w.group(1)) if w else None), prompt


def fitted_budget(window: int, max_tokens: int, tools_est: int, ratio: float) -> int:
    """A context budget (estimated tokens, :mod:`.context`) for ``window`` server tokens:
    ``(window - max_tokens - margin) / ratio - tools_est``, at least 1 (the trim then keeps
    the pinned messages and the newest turn only). The margin is ``window // 32`` (chat
    template framing the estimate does not see)."""
    room = (window - max_tokens - window // 32) / max(ratio, 1.0) - tools_est
    return max(1, int(room))
