"""The baseline: a minimal llama.cpp loop, nothing but the model over a list of requests.

    python -m benchmarks.raw_llamacpp MODEL.gguf REQUESTS.jsonl OUT.jsonl --n-ctx 2048 --n-threads 2

``REQUESTS.jsonl`` holds ``create_chat_completion`` keyword arguments as PRISM would send them
(``benchmarks/prompts.py``). The responses are written once at the end so the loop itself does nothing but
inference; they are compared with PRISM's to show both ran the same requests.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def main() -> None:
    """Load the model, run every request in file order, write ``{question_id, condition, response}``."""
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("requests")
    parser.add_argument("out")
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--n-threads", type=int, required=True)
    parser.add_argument("--chat-format", default=None)
    args = parser.parse_args()
    from llama_cpp import Llama

    with open(args.requests, encoding="utf-8") as handle:
        requests = [json.loads(line) for line in handle]
    llm = Llama(model_path=args.model, n_ctx=args.n_ctx, n_threads=args.n_threads, chat_format=args.chat_format,
                verbose=False)
    loaded = time.perf_counter()
    answers = []
    for request in requests:
        reply: Any = llm.create_chat_completion(**request["kwargs"])
        answers.append({"question_id": request["question_id"], "condition": request["condition"],
                        "response": reply["choices"][0]["message"]["content"] or "",
                        "prompt_tokens": reply["usage"]["prompt_tokens"]})
    finished = time.perf_counter()
    with open(args.out, "w", encoding="utf-8") as handle:
        for answer in answers:
            handle.write(json.dumps(answer) + "\n")
    # Where the time went inside the process (the parent times the whole process, start-up included).
    print(json.dumps({"startup_and_load_s": loaded - started, "loop_s": finished - loaded}))


if __name__ == "__main__":
    main()
