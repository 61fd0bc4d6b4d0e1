"""A loopback stand-in for the Hugging Face Hub: just what an upload and its check need.

Speaks the calls huggingface_hub 2.x makes for `preupload_lfs_files` and
`create_commit` without Xet (preupload, LFS batch, basic PUT upload, LFS
verify, the ndjson commit), plus `get_paths_info` and `/resolve/` for the
verification. Dataset repos too (`stage` and `fetch`): their routes carry a
`datasets/` prefix, `create_repo` makes them (private unless asked otherwise),
`list_repo_tree` lists them and `hf_hub_download` reads them (HEAD with the
X-Repo-Commit and linked ETag/size headers, then GET). Read from
huggingface_hub's own `_commit_api.py`, `lfs.py`, `hf_api.py` and
`file_download.py`. It records every Authorization header so a test can see
the token arrive, and only ever listens on 127.0.0.1. One implementation for the
demo (a box pushes to it) and the tests (tests/support/hub_server.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# A repo's key in HubState.repos is "org/name" for a model, "datasets/org/name" for a data set.
API = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)/"
                 r"(?P<op>preupload|commit|paths-info)/(?P<rev>[^/]+)$")
TREE = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)"
                  r"(?:/(?P<path>.*))?$")
INFO = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)(?:/revision/[^/]+)?$")
BATCH = re.compile(r"^/(?P<prefix>datasets/)?(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/batch$")
RESOLVE = re.compile(r"^/(?P<prefix>datasets/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/"
                     r"(?P<path>.+)$")
LFS_OVER_BYTES = 10 * 1000 * 1000  # the Hub sends bigger files to LFS whatever their name


def repo_key(kind: str | None, repo: str) -> str:
    return f"datasets/{repo}" if kind in ("datasets", "datasets/", "dataset") else repo


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class StoredFile:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class HubState:
    """What the fake Hub holds and saw; tests read it directly."""

    token: str | None  # when set, API calls without "Bearer <token>" get a 401
    repos: dict[str, dict[str, StoredFile]] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)
    authorizations: list[str | None] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    lie_about: set[str] = field(default_factory=set)  # paths whose sha256 paths-info misreports
    corrupt: set[str] = field(default_factory=set)  # paths served with one byte flipped
    private: dict[str, bool] = field(default_factory=dict)  # repos made by create_repo
    more_tokens: set[str] = field(default_factory=set)  # also accepted (a box's scoped one)
    heads: dict[str, str] = field(default_factory=dict)  # repo -> its last commit
    lock: threading.Lock = field(default_factory=threading.Lock)


def upload_mode(path: str, size: int = 0) -> str:
    """Like the Hub's default .gitattributes: weights and archives go to LFS, small text stays
    in git, and anything over 10 MB goes to LFS."""
    lfs = path.endswith((".pt", ".pth", ".bin", ".safetensors", ".tar", ".tar.gz", ".zip"))
    return "lfs" if lfs or size > LFS_OVER_BYTES else "regular"


class Handler(BaseHTTPRequestHandler):
    server: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing -------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
              raw: bytes | None = None) -> None:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if raw is None else
                         "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        state = self.server.state
        auth = self.headers.get("Authorization")
        with state.lock:
            state.authorizations.append(auth)
            state.requests.append(f"{self.command} {self.path}")
        return state.token is None or auth in {f"Bearer {t}"
                                                for t in (state.token, *state.more_tokens)}

    def _repo(self, repo: str) -> dict[str, StoredFile] | None:
        found = self.server.state.repos.get(repo)
        if found is None:
            self._send(404, {"error": "Repository not found"},
                       {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
        return found

    # -- verbs ----------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        if path == "/lfs-verify":
            self._lfs_verify(json.loads(body))
            return
        if not self._authorized():
            self._send(401, {"error": "Invalid credentials"})
            return
        if path == "/api/repos/create":
            self._create_repo(json.loads(body))
            return
        if match := BATCH.match(path):
            if self._repo(repo_key(match["prefix"], match["repo"])) is not None:
                self._lfs_batch(json.loads(body))
            return
        match = API.match(path)
        if match is None:
            self._send(404, {"error": f"no route {path}"})
            return
        key = repo_key(match["kind"], match["repo"])
        files = self._repo(key)
        if files is None:
            return
        if match["op"] == "preupload":
            self._preupload(files, json.loads(body))
        elif match["op"] == "commit":
            self._commit(key, files, body)
        else:
            self._paths_info(files, parse_qs(body.decode()))

    def do_PUT(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        if not path.startswith("/lfs-upload/"):
            self._send(404, {"error": "no route"})
            return
        oid = path.rsplit("/", 1)[1]
        if hashlib.sha256(body).hexdigest() != oid:
            self._send(400, {"error": "content does not match its oid"})
            return
        with self.server.state.lock:
            self.server.state.lfs_objects[oid] = body
        self._send(200, raw=b"")

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def _public_read(self, path: str) -> bool:
        """A read with no token of a public repo (as the Hub serves one to anyone)."""
        if self.headers.get("Authorization") is not None:
            return False
        for pattern, kind in ((INFO, "kind"), (TREE, "kind"), (RESOLVE, "prefix")):
            if match := pattern.match(path):
                key = repo_key(match[kind], match["repo"])
                state = self.server.state
                return key in state.repos and not state.private.get(key, False)
        return False

    def do_GET(self, head: bool = False) -> None:
        path = urlsplit(self.path).path
        if not self._authorized() and not self._public_read(path):
            self._send(401, {"error": "Invalid credentials"})
            return
        if match := INFO.match(path):
            key = repo_key(match["kind"], match["repo"])
            if self._repo(key) is not None:
                state = self.server.state
                self._send(200, {"id": match["repo"], "sha": state.heads.get(key, "0" * 40),
                                 "private": state.private.get(key, False)})
            return
        if match := TREE.match(path):
            files = self._repo(repo_key(match["kind"], match["repo"]))
            if files is not None:
                self._send(200, [self._entry(name, stored) for name, stored in sorted(
                    files.items()) if name.startswith(unquote(match["path"] or ""))])
            return
        match = RESOLVE.match(path)
        if match is None:
            self._send(404, {"error": "no route"})
            return
        key = repo_key(match["prefix"], match["repo"])
        files = self._repo(key)
        if files is None:
            return
        name = unquote(match["path"])
        stored = files.get(name)
        if stored is None:
            self._send(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
            return
        data = stored.data
        if name in self.server.state.corrupt and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        etag = stored.sha256 if stored.lfs else git_blob_id(stored.data)
        headers = {"X-Repo-Commit": self.server.state.heads.get(key, "0" * 40),
                   "ETag": f'"{etag}"'}
        if stored.lfs:
            headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))}
        if head:
            self.send_response(200)
            for k, v in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(k, v)
            self.end_headers()
            return
        self._send(200, raw=data, headers=headers)

    # -- endpoints ------------------------------------------------------------------

    def _create_repo(self, payload: dict[str, Any]) -> None:
        """POST /api/repos/create: a new empty repo, 409 if it exists (exist_ok handles it)."""
        state = self.server.state
        repo = f"{payload.get('organization')}/{payload['name']}"
        key = repo_key(payload.get("type"), repo)
        with state.lock:
            if key in state.repos:
                self._send(409, {"error": "You already created this repo",
                                 "url": f"{self.server.url}/{key}"})
                return
            state.repos[key] = {}
            state.private[key] = payload.get("visibility", "private" if payload.get(
                "private", True) else "public") != "public"
        self._send(200, {"url": f"{self.server.url}/{key}", "name": repo})

    @staticmethod
    def _entry(path: str, stored: StoredFile) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "path": path, "size": len(stored.data),
                                 "oid": git_blob_id(stored.data)}
        if stored.lfs:
            entry["lfs"] = {"oid": stored.sha256, "size": len(stored.data), "pointerSize": 134}
        return entry

    def _preupload(self, files: dict[str, StoredFile], payload: dict[str, Any]) -> None:
        answer = []
        for item in payload["files"]:
            mode = upload_mode(item["path"], int(item.get("size") or 0))
            stored = files.get(item["path"])
            oid = None
            if stored is not None:
                oid = stored.sha256 if stored.lfs else git_blob_id(stored.data)
            answer.append({"path": item["path"], "uploadMode": mode, "shouldIgnore": False,
                           "oid": oid})
        self._send(200, {"files": answer, "commitOid": "0" * 40})

    def _lfs_batch(self, payload: dict[str, Any]) -> None:
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        objects = []
        for obj in payload["objects"]:
            entry: dict[str, Any] = {"oid": obj["oid"], "size": obj["size"],
                                     "authenticated": True}
            if obj["oid"] not in self.server.state.lfs_objects:
                entry["actions"] = {"upload": {"href": f"{base}/lfs-upload/{obj['oid']}"},
                                    "verify": {"href": f"{base}/lfs-verify"}}
            objects.append(entry)
        self._send(200, {"transfer": "basic", "objects": objects})

    def _lfs_verify(self, payload: dict[str, Any]) -> None:
        data = self.server.state.lfs_objects.get(payload["oid"])
        if data is None or len(data) != payload["size"]:
            self._send(404, {"error": "object not uploaded"})
        else:
            self._send(200, {})

    def _commit(self, repo: str, files: dict[str, StoredFile], body: bytes) -> None:
        state = self.server.state
        staged: dict[str, StoredFile] = {}
        for line in body.splitlines():
            item = json.loads(line)
            value = item["value"]
            if item["key"] == "file":
                staged[value["path"]] = StoredFile(base64.b64decode(value["content"]), False)
            elif item["key"] == "lfsFile":
                data = state.lfs_objects.get(value["oid"])
                if data is None:
                    self._send(422, {"error": f"LFS object {value['oid']} was never uploaded"})
                    return
                staged[value["path"]] = StoredFile(data, True)
        oid = uuid.uuid4().hex + "00000000"
        with state.lock:
            files.update(staged)
            state.commits.append(oid)
            state.heads[repo] = oid
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._send(200, {"commitUrl": f"{base}/{repo}/commit/{oid}", "commitOid": oid,
                         "pullRequestUrl": None, "success": True})

    def _paths_info(self, files: dict[str, StoredFile], form: dict[str, list[str]]) -> None:
        answer = []
        for path in form.get("paths", []):
            stored = files.get(path)
            if stored is None:
                continue
            entry: dict[str, Any] = {"type": "file", "path": path, "size": len(stored.data),
                                     "oid": git_blob_id(stored.data)}
            if stored.lfs:
                sha = "0" * 64 if path in self.server.state.lie_about else stored.sha256
                entry["lfs"] = {"oid": sha, "size": len(stored.data), "pointerSize": 134}
            answer.append(entry)
        self._send(200, answer)


class HubServer(ThreadingHTTPServer):
    """`with HubServer(repos=[...], token=...) as hub:` serves at `hub.url` in a thread."""

    daemon_threads = True

    def __init__(self, repos: list[str], token: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = HubState(token=token, repos={repo: {} for repo in repos})
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)
