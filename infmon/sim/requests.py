"""Parse and validate a completions / chat completions body as vLLM does (errors in its shape)."""

from __future__ import annotations

import json
from typing import ClassVar

from infmon.sim import tokenizer
from infmon.sim.http import Request
from infmon.sim.roofline import EngineConfig
from infmon.sim.streams import RequestSpec
from infmon.sim.text import TextModel, chat_prompt, count_tokens

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default


class ApiError(Exception):
    """An error answered in vLLM's JSON shape."""

    TYPES: ClassVar[dict[int, str]] = {
        400: "BadRequestError",
        404: "NotFoundError",
        429: "RateLimitError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.TYPES.get(self.status, "Error"),
                "param": self.param,
                "code": self.status,
            }
        }


def _body(req: Request) -> dict:
    try:
        body = json.loads(req.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def _prompt(body: dict, chat: bool, generation_prompt: bool = True) -> str | list[int]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list", "messages")
        return chat_prompt(messages, generation_prompt)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt) and prompt:
        return prompt
    if not isinstance(prompt, str):
        raise ApiError(
            400, "'prompt' must be a string, a list of token ids, or a list of one", "prompt"
        )
    return prompt


def _decoded(ids: list[int]) -> str:
    try:
        return tokenizer.decode(ids)
    except ValueError:
        return ""


def _int(body: dict, key: str, default: int | None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ApiError(400, f"'{key}' must be a non-negative integer", key)
    return value


def parse_tokenize(req: Request, cfg: EngineConfig) -> str | list[int]:
    """The text of a ``/tokenize`` body: ``prompt`` or ``messages`` (+ add_generation_prompt)."""
    body = _body(req)
    model = body.get("model")
    if model is not None and model != cfg.served_model_name:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    if "messages" in body:
        return _prompt(body, True, body.get("add_generation_prompt", True) is not False)
    return _prompt(body, False)


def parse_detokenize(req: Request, cfg: EngineConfig) -> list[int]:
    body = _body(req)
    model = body.get("model")
    if model is not None and model != cfg.served_model_name:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        raise ApiError(400, "'tokens' must be a list of token ids", "tokens")
    return tokens


def parse_request(
    req: Request, chat: bool, cfg: EngineConfig, text: TextModel
) -> tuple[RequestSpec, str | list[int]]:
    body = _body(req)
    model = body.get("model")
    if model is not None and model != cfg.served_model_name:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    if (body.get("n") or 1) != 1:
        raise ApiError(400, "the simulator supports n=1 only", "n")
    prompt = _prompt(body, chat)
    prompt_text = prompt if isinstance(prompt, str) else _decoded(prompt)
    n_prompt = count_tokens(prompt) if isinstance(prompt, str) else len(prompt)
    limit = cfg.max_model_len
    if n_prompt >= limit:
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, "
            f"your request has {n_prompt} input tokens. Please reduce the length of "
            "the input messages.",
            "messages" if chat else "prompt",
        )
    default = (limit - n_prompt) if chat else COMPLETIONS_DEFAULT_MAX_TOKENS
    given = _int(body, "max_completion_tokens", None) if chat else None
    if given is None:
        given = _int(body, "max_tokens", default)
    max_tokens = default if given is None else given
    if max_tokens + n_prompt > limit:
        raise ApiError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. "
            f"This model's maximum context length is {limit} tokens and your request "
            f"has {n_prompt} input tokens ({max_tokens} > {limit} - {n_prompt}).",
            "max_tokens",
        )
    min_tokens = _int(body, "min_tokens", 0) or 0
    if max_tokens == 0:
        raise ApiError(400, "'max_tokens' must be at least 1", "max_tokens")
    seed = body.get("seed")
    temperature = body.get("temperature")
    if seed is None and temperature not in (None, 0, 0.0):
        seed = hash((prompt_text, id(req)))  # sampling without a seed: varies per request
    answer = text.answer_pieces(prompt_text, seed) or []
    stop_at = None
    if not body.get("ignore_eos"):
        natural = len(answer) or text.natural_length(prompt_text, seed)
        stop_at = max(natural, min_tokens, 1)
    opts = body.get("stream_options") or {}
    spec = RequestSpec(
        chat=chat,
        stream=bool(body.get("stream")),
        include_usage=bool(opts.get("include_usage")),
        prompt_tokens=n_prompt,
        max_tokens=max_tokens,
        answer=answer,
        continuation=text.continuation(prompt_text, seed),
        client_request_id=req.headers.get("x-request-id"),
        stop_at=stop_at,
    )
    return spec, prompt
