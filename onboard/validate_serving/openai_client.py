"""Talking to an OpenAI-compatible server: the `openai` package for transport, msgspec for the replies.

The `openai` client retries with backoff honouring `Retry-After`, times out per request, reads OPENAI_API_KEY and
streams. Its response models are not used, since engines extend the protocol (vLLM's `prompt_logprobs`, `token_id:`
tokens): msgspec decodes the few fields read, naming a field of the wrong shape. Every failure becomes an
EndpointError naming the URL and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from onboard.errors import InputError

DEFAULT_RETRIES = 2  # the openai package's default: 3 attempts in all


class EndpointError(InputError):
    """The endpoint cannot be used: down, too slow, or answering something that is not the OpenAI protocol."""


class HTTPStatusError(EndpointError):
    """The server answered with an error status (after retries, for the statuses worth retrying)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message, "check the request parameters the engine supports")
        self.code = code


class ModelEntry(msgspec.Struct):
    id: str


class ModelList(msgspec.Struct):
    data: list[ModelEntry] = []


class Completion(msgspec.Struct):
    """A /v1/completions reply or one streamed event; each choice stays a dict (engines add their own fields)."""

    choices: list[dict[str, Any]] = []


class ChatCompletion(msgspec.Struct):
    """A /v1/chat/completions reply or one streamed event; `prompt_token_ids`: vLLM's with `return_token_ids`."""

    choices: list[dict[str, Any]] = []
    prompt_token_ids: list[int] | None = None


class Version(msgspec.Struct):
    version: str | None = None


class OpenAIClient:
    def __init__(self, base: str, timeout_s: float, retries: int = DEFAULT_RETRIES) -> None:
        import openai  # a heavy import: only when an endpoint is validated

        self.base = base
        self.timeout = timeout_s
        self.retries = retries
        # Servers without auth ignore the key; vLLM's --api-key and hosted endpoints read it from the environment.
        self.client = openai.OpenAI(
            base_url=base + "/v1",
            api_key=os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout_s,
            max_retries=retries,
        )

    # --- requests ------------------------------------------------------------------------------------------------
    def models(self) -> list[str]:
        url = self.base + "/v1/models"
        with self._errors(url):
            raw = self.client.models.with_raw_response.list().http_response.content
        return [m.id for m in self._decode(raw, ModelList, url).data]

    def version(self) -> str | None:
        """The engine's version (vLLM's /version; not part of the OpenAI protocol): None when it has none."""
        import httpx2

        url = self.base + "/version"
        try:
            with self._errors(url):
                response = self.client.with_options(max_retries=0).get(url, cast_to=httpx2.Response)
            return self._decode(response.content, Version, url).version
        except EndpointError:
            return None

    def complete(self, body: dict[str, Any]) -> Completion:
        url = self.base + "/v1/completions"
        prompt, rest = body["prompt"], {k: v for k, v in body.items() if k not in ("model", "prompt")}
        with self._errors(url):
            raw = self.client.completions.with_raw_response.create(
                model=body["model"], prompt=prompt, extra_body=rest
            ).http_response.content
        return self._decode(raw, Completion, url)

    def stream(self, body: dict[str, Any]) -> Iterator[Completion]:
        """Server-sent events of a streamed completion, decoded as they arrive; an error unless it ends in [DONE]."""
        url = self.base + "/v1/completions"
        prompt, rest = body["prompt"], {k: v for k, v in body.items() if k not in ("model", "prompt")}
        with self._errors(url, streaming=True):
            with self.client.completions.with_streaming_response.create(
                model=body["model"], prompt=prompt, stream=True, extra_body=rest
            ) as response:
                yield from self._events(response, Completion, url)

    def chat(self, body: dict[str, Any]) -> ChatCompletion:
        """A /v1/chat/completions request (`messages`, `tools`, ...; engine extensions pass through as they are)."""
        url = self.base + "/v1/chat/completions"
        messages, rest = body["messages"], {k: v for k, v in body.items() if k not in ("model", "messages")}
        with self._errors(url):
            raw = self.client.chat.completions.with_raw_response.create(
                model=body["model"], messages=messages, extra_body=rest
            ).http_response.content
        return self._decode(raw, ChatCompletion, url)

    def chat_stream(self, body: dict[str, Any]) -> Iterator[ChatCompletion]:
        """Server-sent events of a streamed chat completion (`choices[].delta`), as `stream` reads them."""
        url = self.base + "/v1/chat/completions"
        messages, rest = body["messages"], {k: v for k, v in body.items() if k not in ("model", "messages")}
        with self._errors(url, streaming=True):
            with self.client.chat.completions.with_streaming_response.create(
                model=body["model"], messages=messages, stream=True, extra_body=rest
            ) as response:
                yield from self._events(response, ChatCompletion, url)

    def _events(self, response: Any, kind: type[Any], url: str) -> Iterator[Any]:
        """The `data:` events of a server-sent stream up to [DONE]; an EndpointError when it ends without it."""
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            yield self._decode(payload.encode(), kind, url, what="stream event")
        raise EndpointError(
            f"{url}: stream ended without [DONE] (truncated)", "the server crashed mid-generation; check its log"
        )

    # --- errors --------------------------------------------------------------------------------------------------
    def _decode(self, raw: bytes, kind: type[Any], url: str, what: str = "JSON response") -> Any:
        try:
            return msgspec.json.decode(raw, type=kind)
        except msgspec.ValidationError as exc:  # JSON of the wrong shape: msgspec names the field ($.choices[0])
            raise EndpointError(f"{url}: unexpected {what}: {exc}", "is this an OpenAI-compatible server?") from exc
        except msgspec.DecodeError as exc:
            raise EndpointError(
                f"{url}: malformed {what}: {raw[:120]!r}", "is this an OpenAI-compatible server?"
            ) from exc

    @contextmanager
    def _errors(self, url: str, streaming: bool = False) -> Iterator[None]:
        """Turns the openai package's and httpx2's exceptions into EndpointErrors."""
        try:
            yield
        except EndpointError:
            raise
        except Exception as exc:
            mapped = self._map(exc, url, streaming)
            if mapped is None:
                raise
            raise mapped from exc

    def _map(self, exc: Exception, url: str, streaming: bool) -> EndpointError | None:
        import httpx2
        import openai

        attempts = self.retries + 1
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        if isinstance(exc, openai.APITimeoutError) or isinstance(cause, httpx2.TimeoutException):
            if streaming and not isinstance(exc, openai.APIError):  # the request was answered, then stalled
                message = f"{url}: the stream stalled for more than {self.timeout:g} s"
            else:
                message = f"{url}: no answer within {self.timeout:g} s{tries}"
            return EndpointError(message, "the server is hung or overloaded; raise --timeout")
        if isinstance(exc, openai.APIStatusError):
            detail = exc.response.text[:300]
            return HTTPStatusError(exc.status_code, f"{url}: HTTP {exc.status_code}: {detail}")
        if isinstance(cause, httpx2.ConnectError):
            return EndpointError(
                f"cannot connect to {url}: {cause}{tries}", "start the server, or check --endpoint (scheme, host, port)"
            )
        if isinstance(cause, httpx2.RemoteProtocolError):
            what = "truncated stream" if streaming else "truncated response"
            return EndpointError(
                f"{url}: {what} ({cause})", "the server crashed or a proxy cut the body; check its log"
            )
        if isinstance(exc, (openai.APIError, httpx2.HTTPError)):
            return EndpointError(f"{url}: connection failed ({cause or exc}){tries}", "check the server log")
        return None
