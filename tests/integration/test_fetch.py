"""`scalebench fetch` and the checks of cached files, against a real HTTP server on loopback
(started here, in a thread) serving fixture files: good, truncated, wrong checksum, missing,
a broken transfer; offline mode; the packaged manifest; the benchopt prepare hook."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from scalebench.data import walnut
from scalebench.data.fetch import (
    FetchError,
    destination,
    fetch,
    fetch_data,
    require_file,
)
from scalebench.data.manifest import Entry, load_manifest
from scalebench.denoisers.catalog import hub_weights_entry
from scalebench.denoisers.networks import build_denoiser
from scalebench.errors import ConfigError, MissingFileError
from tests.support import walnut_fixture
from tests.support.paths import REPO

GOOD = b"good weights " * 1000


FILES = {"/good.pth": GOOD, "/short.pth": GOOD[:5000], "/other.pth": b"x" * len(GOOD)}


class Server:
    """Serves FILES (and whatever tests add) on 127.0.0.1; counts requests per path."""

    def __init__(self) -> None:
        self.files = dict(FILES)
        self.hits: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                if self.path == "/broken.pth":  # announces more than it sends
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(GOOD)))
                    self.end_headers()
                    self.wfile.write(GOOD[:100])
                    self.close_connection = True
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.close()


@pytest.fixture(autouse=True)
def online(monkeypatch):
    monkeypatch.delenv("SCALEBENCH_OFFLINE", raising=False)


def entry(server: Server, path: str, size: int | None = len(GOOD),
          checksum: str | None = hashlib.sha256(GOOD).hexdigest(), kind: str = "weights",
          name: str = "test") -> Entry:
    algorithm = "sha256" if checksum else None
    return Entry(name, kind, Path(path).name, server.url + path, size, algorithm, checksum,
                 "the test", "test")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_good_file_is_downloaded_verified_and_kept(server, tmp_path):
    path = tmp_path / "good.pth"
    previous = os.umask(0o022)
    try:
        assert fetch(entry(server, "/good.pth"), path) is True
    finally:
        os.umask(previous)
    assert path.read_bytes() == GOOD
    assert path.stat().st_mode & 0o777 == 0o644  # readable by the users of a shared cache
    hits = server.hits["/good.pth"]
    assert fetch(entry(server, "/good.pth"), path) is False  # verified copy: no download
    assert server.hits["/good.pth"] == hits
    assert require_file(entry(server, "/good.pth"), path) == path


def test_md5_checksums_are_verified(server, tmp_path):
    md5 = Entry("m", "data", "good.pth", server.url + "/good.pth", len(GOOD), "md5",
                hashlib.md5(GOOD).hexdigest(), "", "")
    assert fetch(md5, tmp_path / "good.pth") is True
    wrong = Entry("m", "data", "good.pth", server.url + "/other.pth", len(GOOD), "md5",
                  hashlib.md5(GOOD).hexdigest(), "", "")
    with pytest.raises(FetchError, match="has md5 .* the manifest says"):
        fetch(wrong, tmp_path / "other.pth")


def test_truncated_file_is_rejected_and_never_left_under_its_name(server, tmp_path):
    path = tmp_path / "short.pth"
    with pytest.raises(FetchError, match="gave 5000 bytes, the manifest says 13000"):
        fetch(entry(server, "/short.pth"), path)
    assert not path.exists() and leftovers(tmp_path) == []


def test_broken_transfer_is_rejected(server, tmp_path):
    path = tmp_path / "broken.pth"
    with pytest.raises(FetchError, match="broken: .*(broke off|received 100 of the 13000)"):
        fetch(entry(server, "/broken.pth", name="broken"), path)
    assert not path.exists() and leftovers(tmp_path) == []


def test_wrong_checksum_is_rejected_and_the_old_file_kept(server, tmp_path):
    path = tmp_path / "other.pth"
    path.write_bytes(b"an older, corrupt copy")
    with pytest.raises(FetchError, match="has sha256 .*, the manifest says"):
        fetch(entry(server, "/other.pth"), path)
    assert path.read_bytes() == b"an older, corrupt copy" and leftovers(tmp_path) == []
    with pytest.raises(MissingFileError, match=r"not a verified copy .*run `scalebench fetch"):
        require_file(entry(server, "/other.pth"), path)


def test_missing_file_is_an_http_error(server, tmp_path):
    with pytest.raises(FetchError, match="HTTP 404"):
        fetch(entry(server, "/absent.pth"), tmp_path / "absent.pth")
    assert list(tmp_path.iterdir()) == []


def test_unknown_checksum_needs_explicit_acceptance(server, tmp_path):
    unknown = entry(server, "/good.pth", size=None, checksum=None)
    path = tmp_path / "good.pth"
    with pytest.raises(FetchError, match="no published checksum .*--allow-unverified"):
        fetch(unknown, path)
    assert not path.exists()
    with pytest.raises(MissingFileError, match="not found"):
        require_file(unknown, path)
    assert fetch(unknown, path, allow_unverified=True) is True
    record = tmp_path / "good.pth.accepted-sha256"
    assert record.read_text().strip() == hashlib.sha256(GOOD).hexdigest()
    assert require_file(unknown, path) == path
    path.write_bytes(GOOD + b"changed later")
    with pytest.raises(MissingFileError, match="differs from the one accepted"):
        require_file(unknown, path)


def test_offline_mode_downloads_nothing(server, tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_OFFLINE", "1")
    before = dict(server.hits)
    with pytest.raises(FetchError, match=r"SCALEBENCH_OFFLINE .*run `scalebench fetch"):
        fetch(entry(server, "/good.pth"), tmp_path / "good.pth")
    assert server.hits == before and list(tmp_path.iterdir()) == []


def test_packaged_manifest_lists_every_weights_file_and_the_walnut():
    manifest = load_manifest()
    files = {e.file for e in manifest.values() if e.kind == "weights"}
    assert files == {hub_weights_entry(name, channels).file
                     for name in ("drunet", "dncnn") for channels in (1, 3)}
    assert manifest["walnut"].kind == "data" and manifest["walnut"].file == "Walnut1.zip"
    for item in manifest.values():
        assert item.licence and item.checksum_source
        # Bundled weights ship inside the package (tests/unit/test_bundled.py): nothing to download.
        assert item.url.startswith("https://") if item.kind != "bundled" else item.url == ""
    assert manifest["drunet_color"].size == 130585443 and manifest["drunet_color"].verifiable


def test_bad_manifest_is_a_one_line_error(tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text('[w]\nkind = "weights"\nfile = "a"\nurl = "u"\nsize = 3\n'
                   'checksum = "crc:12"\nlicence = "x"\n')
    with pytest.raises(ConfigError, match=r"checksum must be 'sha256:HEX'"):
        load_manifest(bad)


def scalebench(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalebench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def write_manifest(path: Path, entries: dict[str, dict]) -> Path:
    lines = []
    for name, table in entries.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {value!r}".replace("'", '"') for key, value in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fetch_weights_fills_the_hub_cache_that_pretrained_hub_reads(server, tmp_path):
    torch.manual_seed(0)
    model = build_denoiser("dncnn", 1, "none", "cpu", seed=3)
    served = tmp_path / "served.pth"
    torch.save(model.state_dict(), served)
    server.files["/dncnn_sigma2_gray.pth"] = served.read_bytes()
    manifest = write_manifest(tmp_path / "mirror.toml", {"dncnn_gray": {
        "kind": "weights", "file": "dncnn_sigma2_gray.pth",
        "url": server.url + "/dncnn_sigma2_gray.pth", "size": "unknown",
        "checksum": "unknown", "licence": "test"}})
    env = {**os.environ, "TORCH_HOME": str(tmp_path / "torch")}
    env.pop("SCALEBENCH_OFFLINE", None)
    refused = scalebench("fetch", "--weights", "--manifest", str(manifest), env=env)
    assert refused.returncode == 1 and "--allow-unverified" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    done = scalebench("fetch", "--weights", "--manifest", str(manifest), "--allow-unverified",
                      env=env)
    assert done.returncode == 0, done.stderr
    checkpoint = tmp_path / "torch/hub/checkpoints/dncnn_sigma2_gray.pth"
    assert checkpoint.read_bytes() == served.read_bytes()
    # The packaged manifest has no checksum for this file: the recorded acceptance lets the
    # denoiser load it with pretrained: hub.
    os.environ["TORCH_HOME"], before = str(tmp_path / "torch"), os.environ.get("TORCH_HOME")
    try:
        torch.hub._hub_dir = None
        loaded = build_denoiser("dncnn", 1, "hub", "cpu")
        checkpoint.write_bytes(served.read_bytes()[:-10])  # corrupted after the fetch
        with pytest.raises(MissingFileError, match=r"run `scalebench fetch --weights`"):
            build_denoiser("dncnn", 1, "hub", "cpu")
    finally:
        if before is None:
            os.environ.pop("TORCH_HOME")
        else:
            os.environ["TORCH_HOME"] = before
    first = next(iter(model.state_dict()))
    assert torch.equal(loaded.state_dict()[first], model.state_dict()[first])


def test_offline_cli_fails_in_one_line_naming_the_fetch_command(tmp_path):
    env = {**os.environ, "TORCH_HOME": str(tmp_path), "SCALEBENCH_OFFLINE": "1",
           "SCALEBENCH_CACHE": str(tmp_path / "cache")}
    for args, command in ((["--weights"], "scalebench fetch --weights"),
                          (["--data", "walnut"], "scalebench fetch --data walnut")):
        result = scalebench("fetch", *args, env=env)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and command in result.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.zip"))
    assert scalebench("fetch", env=env).returncode == 2


@pytest.fixture(scope="module")
def walnut_archive(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("walnut")
    archive = walnut_fixture.zip_walnut(walnut_fixture.write_walnut(folder / "src"),
                                        folder / "Walnut1.zip")
    return archive.read_bytes()


def test_fetch_data_walnut_downloads_verifies_and_unpacks(server, tmp_path, walnut_archive):
    server.files["/Walnut1.zip"] = walnut_archive
    manifest = write_manifest(tmp_path / "mirror.toml", {"walnut": {
        "kind": "data", "file": "Walnut1.zip", "url": server.url + "/Walnut1.zip",
        "size": len(walnut_archive), "checksum": "md5:" + hashlib.md5(walnut_archive).hexdigest(),
        "licence": "CC-BY-4.0"}})
    cache = tmp_path / "cache"
    env = {**os.environ}
    env.pop("SCALEBENCH_OFFLINE", None)
    done = scalebench("fetch", "--data", "walnut", "--cache", str(cache), "--manifest",
                      str(manifest), env=env)
    assert done.returncode == 0, done.stderr
    assert walnut.is_unpacked(cache)
    assert not destination(load_manifest(manifest)["walnut"], cache).exists()  # archive gone
    hits = server.hits["/Walnut1.zip"]
    assert "already" in fetch_data("walnut", cache, manifest=manifest)
    assert server.hits["/Walnut1.zip"] == hits
    assert walnut.load_prepared(walnut.prepare(cache, 2, 2, 8)).projections.shape == (8, 16, 16)


def test_fetch_data_rejects_a_corrupt_archive(server, tmp_path, walnut_archive):
    corrupt = bytearray(walnut_archive)
    corrupt[1000] ^= 0xFF  # one flipped byte, same size
    server.files["/Bad.zip"] = bytes(corrupt)
    manifest = write_manifest(tmp_path / "mirror.toml", {"walnut": {
        "kind": "data", "file": "Walnut1.zip", "url": server.url + "/Bad.zip",
        "size": len(walnut_archive), "checksum": "md5:" + hashlib.md5(walnut_archive).hexdigest(),
        "licence": "CC-BY-4.0"}})
    with pytest.raises(FetchError, match="has md5"):
        fetch_data("walnut", tmp_path, manifest=manifest)
    assert not walnut.is_unpacked(tmp_path)
    assert not any(tmp_path.rglob("*.zip"))


def load_dataset_class():
    path = REPO / "benchmark_inference/datasets/walnut_conebeam.py"
    spec = importlib.util.spec_from_file_location("walnut_conebeam_dataset", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Dataset


def test_benchopt_prepare_fetches_into_the_same_cache(tmp_path, monkeypatch):
    """`benchopt install --prepare` / `benchopt prepare` call Dataset.prepare(): it uses the
    scalebench cache, downloads nothing when the walnut is there, and offline says which
    command fills it."""
    dataset = load_dataset_class()
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("SCALEBENCH_OFFLINE", "1")
    with pytest.raises(FetchError, match=r"run `scalebench fetch --data walnut`"):
        dataset().prepare()
    filled = walnut_fixture.walnut_cache(tmp_path / "filled")
    monkeypatch.setenv("SCALEBENCH_CACHE", str(filled))
    dataset().prepare()  # offline, but nothing to download
