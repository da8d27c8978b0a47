"""``python -m llama_cpp.server`` that also writes every prompt its chat template rendered, for checks on the
server's side of what a request's messages became (a system turn as the template's system block).

Run as ``python prompt_logging_server.py LOG_FILE <llama_cpp.server flags>``: it wraps llama-cpp-python's
``Jinja2ChatFormatter.__call__`` (the GGUF template handler the server uses for SmolLM2) so each call appends
``{"messages", "prompt"}`` to ``LOG_FILE`` as one JSON line, then runs the server's own ``main``.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> None:
    from llama_cpp import llama_chat_format
    from llama_cpp.server.__main__ import main as serve

    log_path = sys.argv.pop(1)
    render = llama_chat_format.Jinja2ChatFormatter.__call__

    def logged(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = render(self, *args, **kwargs)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"messages": kwargs.get("messages"), "prompt": result.prompt}) + "\n")
        return result

    llama_chat_format.Jinja2ChatFormatter.__call__ = logged  # type: ignore[method-assign]
    serve()


if __name__ == "__main__":
    main()
