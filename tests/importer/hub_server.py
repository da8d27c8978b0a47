"""A loopback stand-in for the Hugging Face Hub's HTTP API, run as a process of its own (``prism-export push=``).

It answers the requests ``huggingface_hub`` (2.x) makes for ``HfApi.create_repo(repo_type="dataset",
exist_ok=True)`` followed by ``HfApi.upload_folder``, in the shapes that client sends and reads:

- ``POST /api/repos/create`` ``{"name", "organization", "type"}`` -> ``{"url"}``; 409 when the repo exists
  (the client's ``exist_ok`` accepts that status).
- ``POST /api/validate-yaml`` ``{"content", "repoType"}`` -> ``{"errors": [], "warnings": []}``; 400 with
  ``errors`` when the README's YAML header does not parse. The client sends it before committing a README.md.
- ``POST /api/datasets/{repo}/preupload/{revision}`` ``{"files": [{"path", "sample" (base64 of the first
  512 bytes), "size"}]}`` -> ``{"files": [{"path", "uploadMode": "lfs" | "regular", "shouldIgnore", "oid"}]}``.
  Like the Hub, a binary sample (a NUL byte, or not UTF-8) or a file over 10 MB is ``lfs``; ``oid`` is the
  file already in the repo (sha256 for an LFS file, the git blob sha1 otherwise), so an unchanged file is skipped.
- ``POST /datasets/{repo}.git/info/lfs/objects/batch``: the git-lfs Batch API (``operation: upload``,
  ``transfers``, ``objects: [{"oid", "size"}]``, ``hash_algo: sha256``) -> ``transfer: basic`` and, per object
  not yet stored, an ``upload`` action (``PUT href`` of the bytes) and a ``verify`` action
  (``POST href {"oid", "size"}``); an object already stored gets no actions.
- ``POST /api/datasets/{repo}/commit/{revision}``: NDJSON lines ``{"key": "header", "value": {"summary",
  "description"}}``, ``{"key": "file", "value": {"path", "content" (base64), "encoding": "base64"}}`` and
  ``{"key": "lfsFile", "value": {"path", "algo": "sha256", "oid", "size"}}`` -> ``{"commitUrl", "commitOid",
  "success", "pullRequestUrl"}``; 422 when an ``lfsFile`` names an object never uploaded.
- ``GET /api/datasets/{repo}`` (and ``/revision/{revision}``): ``{"id", "sha", "siblings"}``, which the
  client reads when a push changes nothing.

Every ``/api/`` and LFS batch request needs ``Authorization: Bearer <token>`` (else 401 ``{"error"}``, with
the ``X-Error-Message`` header the client shows). The upload and verify hrefs stand in for the Hub's presigned
storage URLs and take no token. Errors carry ``X-Error-Code`` (``RepoNotFound``) as the Hub's do.

Not the Hub's API (the client never calls it): ``GET /_stand-in/repos/{repo}`` returns the repo's files
(base64), its commits and the upload mode each file got, for the test to compare with the folder pushed.
Every request is appended to ``--log`` (method, path, whether its token was right) before it is answered.

Xet storage, the upload path ``huggingface_hub`` takes when ``hf_xet`` is installed, is not stood in for: its
CAS protocol moves chunked, compressed xorbs and binary shards that only ``hf_xet`` writes. The tests set
``HF_HUB_DISABLE_XET=1``, so the client takes the git-lfs path the Hub also accepts.

Run: ``python tests/importer/hub_server.py --port P --token T --log FILE``; tests use :class:`HubServer`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import yaml

LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub's size above which a text file still goes to LFS
REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
REVISION = r"(?P<revision>[^/]+)"


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob (what the Hub reports as a regular file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_binary(sample: bytes) -> bool:
    """Binary by the Hub's rule of thumb: a NUL byte, or not UTF-8."""
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        # The sample is cut at 512 bytes and may end inside a character: only a bad byte earlier counts.
        try:
            sample[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return True
    return False


class Hub:
    """The stand-in's state: repos (files, commits), LFS objects, and the request log."""

    def __init__(self, token: str, log: Path, base: str) -> None:
        self.token, self.log, self.base = token, log, base
        self.repos: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def record(self, method: str, path: str, authorized: bool) -> None:
        with self.lock, self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"method": method, "path": path, "authorized": authorized}) + "\n")

    # ---- the Hub's endpoints: each returns (status, body, headers) --------------------------------------

    def create_repo(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        name, organization = body.get("name"), body.get("organization")
        if not isinstance(name, str) or not name:
            return 400, {"error": "name is required"}, {}
        repo_id = f"{organization or 'standin-user'}/{name}"
        kind = body.get("type") or "model"
        url = f"{self.base}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
        with self.lock:
            if repo_id in self.repos:
                return 409, {"error": "You already created this dataset repo", "url": url}, {}
            self.repos[repo_id] = {"type": kind, "files": {}, "modes": {}, "commits": []}
        return 200, {"url": url, "name": repo_id}, {}

    def validate_yaml(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        content = str(body.get("content", ""))
        match = re.match(r"---\n(.*?)\n---\n", content, flags=re.S)
        if match:
            try:
                header = yaml.safe_load(match.group(1))
            except yaml.YAMLError as exc:
                return 400, {"errors": [{"message": f"YAML header does not parse: {exc}"}], "warnings": []}, {}
            if header is not None and not isinstance(header, dict):
                return 400, {"errors": [{"message": "YAML header is not a mapping"}], "warnings": []}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def repo(self, repo_id: str, kind: str) -> dict[str, Any] | None:
        found = self.repos.get(repo_id)
        return found if found is not None and found["type"] == kind else None

    def preupload(self, repo_id: str, kind: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        repo = self.repo(repo_id, kind)
        if repo is None:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        files = []
        for entry in body.get("files", []):
            sample = base64.b64decode(entry["sample"])
            mode = "lfs" if is_binary(sample) or int(entry["size"]) > LFS_THRESHOLD else "regular"
            existing = repo["files"].get(entry["path"])
            oid = None
            if existing is not None:
                oid = (hashlib.sha256(existing).hexdigest() if repo["modes"][entry["path"]] == "lfs"
                       else git_blob_sha1(existing))
            files.append({"path": entry["path"], "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        return 200, {"files": files, "commitOid": self.head(repo)}, {}

    def lfs_batch(self, repo_id: str, kind: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if self.repo(repo_id, kind) is None:
            return 404, {"message": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        if body.get("operation") != "upload" or "basic" not in body.get("transfers", ["basic"]):
            return 422, {"message": "only basic uploads are served here"}, {}
        if body.get("hash_algo", "sha256") != "sha256":
            return 422, {"message": "hash_algo must be sha256"}, {}
        objects = []
        for entry in body.get("objects", []):
            oid, size = str(entry["oid"]), int(entry["size"])
            item: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if oid not in self.objects:
                item["actions"] = {"upload": {"href": f"{self.base}/_storage/{oid}?size={size}", "header": {}},
                                   "verify": {"href": f"{self.base}/_storage/{oid}/verify", "header": {}}}
            objects.append(item)
        return 200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, \
            {"Content-Type": "application/vnd.git-lfs+json"}

    def store(self, oid: str, size: int, data: bytes) -> tuple[int, Any, dict[str, str]]:
        if hashlib.sha256(data).hexdigest() != oid or len(data) != size:
            return 400, {"error": f"content does not match oid {oid} and size {size}"}, {}
        with self.lock:
            self.objects[oid] = data
        return 200, {}, {}

    def verify(self, oid: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        data = self.objects.get(oid)
        if data is None or body.get("oid") != oid or int(body.get("size", -1)) != len(data):
            return 404, {"message": f"object {oid} was not uploaded"}, {}
        return 200, {"message": "ok"}, {}

    def commit(self, repo_id: str, kind: str, revision: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        repo = self.repo(repo_id, kind)
        if repo is None:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        lines = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header" or not lines[0]["value"].get("summary"):
            return 400, {"error": "the first line must be the header, with a summary"}, {}
        changes: dict[str, tuple[bytes, str]] = {}
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value", {})
            if key == "file":
                if value.get("encoding") != "base64":
                    return 400, {"error": "file content must be base64"}, {}
                changes[value["path"]] = (base64.b64decode(value["content"]), "regular")
            elif key == "lfsFile":
                data = self.objects.get(value.get("oid", ""))
                if value.get("algo") != "sha256" or data is None:
                    return 422, {"error": f"LFS object of {value.get('path')} was never uploaded"}, {}
                changes[value["path"]] = (data, "lfs")
            else:
                return 400, {"error": f"operation {key!r} is not served here"}, {}
        with self.lock:
            for path, (data, mode) in changes.items():
                repo["files"][path] = data
                repo["modes"][path] = mode
            oid = hashlib.sha1(json.dumps([self.head(repo), lines]).encode(), usedforsecurity=False).hexdigest()
            repo["commits"].append({"oid": oid, "revision": revision, **lines[0]["value"],
                                    "paths": sorted(changes)})
        url = f"{self.base}/{'' if kind == 'model' else kind + 's/'}{repo_id}/commit/{oid}"
        return 200, {"commitUrl": url, "commitOid": oid, "success": True, "pullRequestUrl": None}, {}

    def head(self, repo: dict[str, Any]) -> str | None:
        return repo["commits"][-1]["oid"] if repo["commits"] else None

    def info(self, repo_id: str, kind: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repo(repo_id, kind)
        if repo is None:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        return 200, {"id": repo_id, "sha": self.head(repo), "private": False,
                     "siblings": [{"rfilename": path} for path in sorted(repo["files"])]}, {}

    def dump(self, repo_id: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        if repo is None:
            return 404, {"error": "no such repo"}, {}
        return 200, {"type": repo["type"], "commits": repo["commits"], "modes": repo["modes"],
                     "files": {p: base64.b64encode(d).decode("ascii") for p, d in repo["files"].items()}}, {}


def handler_for(hub: Hub) -> type[BaseHTTPRequestHandler]:
    """The request handler, bound to ``hub``."""

    routes: list[tuple[str, re.Pattern[str], str]] = [
        ("POST", re.compile(r"/api/repos/create"), "create"),
        ("POST", re.compile(r"/api/validate-yaml"), "validate"),
        ("POST", re.compile(rf"/api/(?P<kind>\w+)s/{REPO}/preupload/{REVISION}"), "preupload"),
        ("POST", re.compile(rf"/(?P<kind>\w+)s/{REPO}\.git/info/lfs/objects/batch"), "batch"),
        ("PUT", re.compile(r"/_storage/(?P<oid>[0-9a-f]{64})"), "store"),
        ("POST", re.compile(r"/_storage/(?P<oid>[0-9a-f]{64})/verify"), "verify"),
        ("POST", re.compile(rf"/api/(?P<kind>\w+)s/{REPO}/commit/{REVISION}"), "commit"),
        ("GET", re.compile(rf"/api/(?P<kind>\w+)s/{REPO}(/revision/{REVISION})?"), "info"),
        ("GET", re.compile(rf"/_stand-in/repos/{REPO}"), "dump"),
    ]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            authorized = self.headers.get("Authorization") == f"Bearer {hub.token}"
            if not path.startswith("/_stand-in/"):  # the test's own reads are not the client's requests
                hub.record(method, path, authorized)
            found = next(((name, match) for verb, pattern, name in routes if verb == method
                          and (match := pattern.fullmatch(urllib.request.unquote(path)))), None)
            if found is None:
                return self._reply(404, {"error": f"{method} {path} is not served by this stand-in"}, {})
            name, match = found
            needs_token = name not in ("store", "verify", "dump")
            if needs_token and not authorized:
                return self._reply(401, {"error": "Invalid credentials in Authorization header"}, {})
            groups = match.groupdict()
            try:
                body = json.loads(raw) if raw and name not in ("store", "commit") else {}
            except json.JSONDecodeError:
                return self._reply(400, {"error": "the body is not JSON"}, {})
            if name == "create":
                reply = hub.create_repo(body)
            elif name == "validate":
                reply = hub.validate_yaml(body)
            elif name == "preupload":
                reply = hub.preupload(groups["repo"], groups["kind"], body)
            elif name == "batch":
                reply = hub.lfs_batch(groups["repo"], groups["kind"], body)
            elif name == "store":
                size = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("size", -1))
                reply = hub.store(groups["oid"], size, raw)
            elif name == "verify":
                reply = hub.verify(groups["oid"], body)
            elif name == "commit":
                reply = hub.commit(groups["repo"], groups["kind"], groups["revision"], raw)
            elif name == "info":
                reply = hub.info(groups["repo"], groups["kind"])
            else:
                reply = hub.dump(groups["repo"])
            return self._reply(*reply)

        def _reply(self, status: int, body: Any, headers: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            if status >= 400:
                self.send_header("X-Error-Message", str(body.get("error") or body.get("message") or ""))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

    return Handler


class HubServer:
    """The stand-in as a child process on a loopback port: ``with HubServer(tmp, token) as hub: hub.url``."""

    def __init__(self, folder: Path, token: str) -> None:
        self.token, self.log = token, folder / "hub-requests.jsonl"
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Self:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._proc = subprocess.Popen([sys.executable, __file__, "--port", str(port), "--token", self.token,
                                       "--log", str(self.log)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      text=True)
        first = self._proc.stdout.readline() if self._proc.stdout else ""
        if not first:
            raise RuntimeError(f"the Hub stand-in exited ({self._proc.wait()}) before it listened")
        self.url = str(json.loads(first)["url"])
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)

    def repo(self, repo_id: str) -> dict[str, Any]:
        """The repo's files (bytes), commits and upload modes, as the stand-in holds them."""
        with urllib.request.urlopen(f"{self.url}/_stand-in/repos/{repo_id}", timeout=30) as reply:
            state: dict[str, Any] = json.loads(reply.read())
        state["files"] = {path: base64.b64decode(data) for path, data in state["files"].items()}
        return state

    def requests(self) -> list[dict[str, Any]]:
        """Every request it received, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


def main() -> None:
    """Serve until terminated; the first line of output says where."""
    parser = argparse.ArgumentParser(description="A loopback stand-in for the Hugging Face Hub's HTTP API.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(Hub(args.token, args.log, base)))
    server.daemon_threads = True
    print(json.dumps({"url": base}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
