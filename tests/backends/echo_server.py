"""A loopback stand-in for an OpenAI-compatible server whose ``/v1/completions`` echo is aligned as vLLM's is.

It serves the real SmolLM2 GGUF through llama-cpp-python loaded with ``logits_all=True``: an echoed position
holds the log-probability of its token given the tokens before it (the previous position's row), the first
token's is null, and the one generated token (greedy) follows the prompt with its own row's value. That is
the OpenAI legacy format that ``python -m llama_cpp.server`` 0.3 gets wrong by one position for a model
without a BOS token (``prism.backends.openai_cloze``). A plain completion (no ``echo``) is the library's own
``create_completion``. ``/v1/models`` lists the model as ``smollm2``.

Usage::

    with EchoServer(gguf_path) as server:
        ... model.base_url=server.url ...
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ALIAS = "smollm2"


def _log_softmax(row: np.ndarray) -> np.ndarray:
    row = row.astype(np.float64) - row.max()
    return row - np.log(np.exp(row).sum())


class EchoServer:
    """The stand-in on a free loopback port, one request at a time (one llama.cpp context)."""

    def __init__(self, gguf: Path) -> None:
        """Load the model (``logits_all=True``: every echoed position's row is kept)."""
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=1, logits_all=True, verbose=False)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply({"object": "list", "data": [{"id": ALIAS, "object": "model", "owned_by": "stand-in"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                with server._lock:
                    self._reply(server.completion(body))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The API root, as ``model.base_url`` takes it."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self.llm.close()

    def encode(self, text: str) -> list[int]:
        """The prompt's tokens as ``create_completion`` makes them."""
        bos = [self.llm.token_bos()] if self.llm._model.add_bos_token() else []
        return bos + self.llm.tokenize(text.encode(), add_bos=False, special=True)

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """A ``/completions`` reply: the library's own for a plain request, an aligned echo otherwise."""
        prompt = body.get("prompt")
        if "messages" in body:  # the identity probe of a chat run: one token, no log-probabilities
            prompt = body["messages"][-1]["content"]
        if not body.get("echo"):
            reply = self.llm.create_completion(prompt, max_tokens=int(body.get("max_tokens", 16)),
                                               temperature=float(body.get("temperature", 0.0)),
                                               seed=body.get("seed"))
            return {**reply, "model": ALIAS}
        tokens = self.encode(prompt)
        self.llm.reset()
        self.llm.eval(tokens)
        rows = np.array(self.llm.scores[:len(tokens)], dtype=np.float64)
        skip = 1 if self.llm._model.add_bos_token() else 0
        texts, offsets, values, tops = [], [], [], []
        for i in range(skip, len(tokens)):
            piece = self.llm.detokenize([tokens[i]], prev_tokens=tokens[skip:i]).decode("utf-8", errors="ignore")
            offsets.append(len(self.llm.detokenize(tokens[skip:i]).decode("utf-8", errors="ignore")))
            value = None if i == 0 else float(_log_softmax(rows[i - 1])[tokens[i]])
            texts.append(piece)
            values.append(value)
            tops.append(None if value is None else {piece: value})
        last = _log_softmax(rows[len(tokens) - 1])
        generated = int(np.argmax(last))
        piece = self.llm.detokenize([generated], prev_tokens=tokens[skip:]).decode("utf-8", errors="ignore")
        texts.append(piece)
        offsets.append(len(prompt))
        values.append(float(last[generated]))
        tops.append({piece: float(last[generated])})
        return {"id": "cmpl-stand-in", "object": "text_completion", "model": ALIAS,
                "choices": [{"index": 0, "text": prompt + piece, "finish_reason": "length",
                             "logprobs": {"tokens": texts, "text_offset": offsets, "token_logprobs": values,
                                          "top_logprobs": tops}}],
                "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1}}
