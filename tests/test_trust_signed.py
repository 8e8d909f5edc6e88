"""Signed packs and hostile input: SSH signatures checked offline against the trust policy.

Keys are made and packs signed with the real ``ssh-keygen`` (``ongrid-skills sign``);
every refusal is checked to have changed nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clirun import run

from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import make_skill


def make_pack(base: Path, name: str = "tools", version: str = "1.0", **hello: Any) -> Path:
    pack = base / name
    make_skill(pack, "hello", **hello)
    (pack / "pack.json").write_text(json.dumps({"name": name, "version": version}))
    return pack


def keygen(tmp_path: Path, who: str) -> Path:
    key = tmp_path / f"{who}_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(key)], check=True)
    return key


def sign(capsys: pytest.CaptureFixture[str], pack: Path, key: Path, *extra: str) -> None:
    code, _out, err = run(capsys, "sign", str(pack), "--key", str(key), *extra)
    assert code == 0, err
    assert (pack / "ongrid-pack.sig").read_text().startswith("-----BEGIN SSH SIGNATURE-----")


def trust_signer(capsys: pytest.CaptureFixture[str], name: str, key: Path, *packs: str) -> None:
    extra = [a for p in packs for a in ("--packs", p)]
    code, _out, err = run(capsys, "trust", "--add-signer", name, "--key", f"{key}.pub", *extra)
    assert code == 0, err


def user_dir() -> Path:
    return Path(Settings.from_env().user_skills_dir)


def policy_path() -> Path:
    return Path(Settings.from_env().config_dir) / "trust.json"


def listed(capsys: pytest.CaptureFixture[str]) -> set[str]:
    code, out, _err = run(capsys, "list", "--json")
    assert code == 0
    return {t["name"] for t in json.loads(out)["items"]}


def snapshot() -> dict[str, bytes]:
    """Every file of the packs folder (the lock included), to show a refusal changed nothing."""
    base = user_dir()
    if not base.exists():
        return {}
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in base.rglob("*")
        if p.is_file() and ".ongrid-install.lock" not in p.name
    }


def test_a_signed_pack_installs_and_verify_names_its_signer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = keygen(tmp_path, "acme")
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, key)
    # ssh-keygen itself agrees the signature is over the message we verify
    digest = run(capsys, "sign", str(pack), "--key", str(key))[1].split("sha256:")[1].split(")")[0]
    allowed = tmp_path / "allowed"
    allowed.write_text("acme " + Path(f"{key}.pub").read_text())
    message = f"ongrid-pack-v1\nname tools\ndigest sha256:{digest}\n".encode()
    check = ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "acme", "-n", "ongrid-pack"]
    assert subprocess.run([*check, "-s", str(pack / "ongrid-pack.sig")], input=message).returncode == 0

    trust_signer(capsys, "acme", key)
    code, out, _err = run(capsys, "install", "--yes", str(pack))
    assert code == 0 and "pack tools 1.0: signed by acme (trusted)" in out
    code, out, _err = run(capsys, "verify")
    assert code == 0 and "tools 1.0: ok, 4 files match skills.lock; signed by acme; consent: sealed" in out
    code, out, _err = run(capsys, "verify", "--json")
    assert json.loads(out)["packs"][0]["signature"] == {"status": "trusted", "signer": "acme", "reason": ""}


def test_require_signed_refuses_unsigned_packs_at_install_and_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "install", "--yes", str(make_pack(tmp_path / "old")))[0] == 0
    assert "hello" in listed(capsys)
    monkeypatch.setenv("ONGRID_REQUIRE_SIGNED", "1")
    before = snapshot()
    code, _out, err = run(capsys, "install", "--yes", str(make_pack(tmp_path / "new", name="fresh")))
    assert code == 1 and "ONGRID_REQUIRE_SIGNED is on and it is unsigned" in err
    assert snapshot() == before
    assert "hello" not in listed(capsys)  # the unsigned installed pack no longer loads
    code, out, _err = run(capsys, "verify")
    assert code == 1 and "refused: ONGRID_REQUIRE_SIGNED is on" in out


# -- hostile input: a clear refusal, and nothing changed -------------------------------------------


def test_a_signature_over_other_content_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", key)
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, key)
    (pack / "hello" / "run.sh").write_text("#!/bin/sh\necho '{\"evil\": 1}'\n")
    code, _out, err = run(capsys, "install", "--yes", str(pack))
    assert code == 1 and "does not verify: the signature is not over this pack's content" in err
    assert snapshot() == {}


def test_an_unknown_signer_is_refused_where_signatures_are_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trust_signer(capsys, "acme", keygen(tmp_path, "acme"))
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, keygen(tmp_path, "stranger"))
    monkeypatch.setenv("ONGRID_REQUIRE_SIGNED", "1")
    code, _out, err = run(capsys, "install", "--yes", str(pack))
    assert code == 1 and "its signer SHA256:" in err and "is not in the trust policy" in err
    assert snapshot() == {}


def test_a_removed_signer_stops_its_packs_from_loading_where_signatures_are_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", key)
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, key)
    monkeypatch.setenv("ONGRID_REQUIRE_SIGNED", "1")
    assert run(capsys, "install", "--yes", str(pack))[0] == 0
    assert "hello" in listed(capsys)
    assert run(capsys, "trust", "--remove-signer", "acme")[0] == 0
    assert "hello" not in listed(capsys)
    _code, out, _err = run(capsys, "audit", "list", "--json")
    rows = json.loads(out)
    rows = rows["items"] if isinstance(rows, dict) else rows
    assert [r["outcome"] for r in rows if r["outcome"] == "trust_policy"] == ["trust_policy", "trust_policy"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"not a signature",
        b"-----BEGIN SSH SIGNATURE-----\n!!!!\n-----END SSH SIGNATURE-----\n",
        b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQAAADM=\n-----END SSH SIGNATURE-----\n",
        b"x" * 100_000,
    ],
    ids=["text", "bad-base64", "truncated", "huge"],
)
def test_a_malformed_signature_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], garbage: bytes
) -> None:
    pack = make_pack(tmp_path / "src")
    (pack / "ongrid-pack.sig").write_bytes(garbage)
    code, _out, err = run(capsys, "install", "--yes", str(pack))
    assert code == 1 and "pack tools is refused: its signature" in err
    assert snapshot() == {}


def test_a_symlinked_signature_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", key)
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, key)
    (pack / "real.sig").write_bytes((pack / "ongrid-pack.sig").read_bytes())
    (pack / "ongrid-pack.sig").unlink()
    (pack / "ongrid-pack.sig").symlink_to("real.sig")
    code, _out, err = run(capsys, "install", "--yes", str(pack))
    assert code == 1 and "is not a plain file" in err
    assert snapshot() == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not a readable trust policy"),
        ('{"signers": {"acme": {"key": "ssh-rsa AAAA"}}}', 'signer acme: "key" is not an OpenSSH Ed25519'),
        ('{"signers": [], "extra": 1}', 'must be an object with "signers"'),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"signers": {}, "pad": "' + "x" * 300_000 + '"}', "larger than 262144 bytes"),
    ],
    ids=["not-json", "rsa-key", "unknown-field", "deeply-nested", "huge"],
)
def test_a_malformed_policy_is_refused_with_where_and_what(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    policy_path().parent.mkdir(parents=True, exist_ok=True)
    policy_path().write_text(text)
    code, _out, err = run(capsys, "install", "--yes", str(make_pack(tmp_path / "src")))
    assert code != 0 and str(policy_path()) in err and says in err
    assert snapshot() == {}


def test_a_pack_that_takes_another_packs_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acme = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", acme, "acme-*")
    genuine = make_pack(tmp_path / "genuine", name="acme-tools")
    sign(capsys, genuine, acme)
    assert run(capsys, "install", "--yes", str(genuine))[0] == 0
    before = snapshot()
    for signed_by in (None, keygen(tmp_path, "mallory")):
        intruder = make_pack(tmp_path / f"intruder-{signed_by is None}", name="acme-tools", version="9.9")
        if signed_by is not None:
            trust_signer(capsys, "mallory", signed_by)  # trusted for other packs, not acme-*
            sign(capsys, intruder, signed_by)
        code, _out, err = run(capsys, "install", "--replace", "--yes", str(intruder))
        assert code == 1 and "requires packs named like acme-tools to be signed by acme" in err
        assert snapshot() == before
    # signed under another name, installed under this one: the signature names the pack
    other = make_pack(tmp_path / "renamed", name="acme-other")
    sign(capsys, other, acme)
    code, _out, err = run(capsys, "install", "--replace", "--yes", "--name", "acme-tools", str(other))
    assert code == 1 and "does not verify" in err
    assert snapshot() == before


def _load_refusals(capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _err = run(capsys, "verify")
    assert code == 1
    return out


def test_a_lock_edited_by_hand_to_widen_a_grant_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src", sandbox={"network": False})
    assert run(capsys, "install", "--yes", str(pack))[0] == 0
    assert "hello" in listed(capsys)
    # the whole forgery: the manifest asks for the network, the lock's digests and grant follow
    manifest = user_dir() / "tools" / "hello" / "skill.json"
    data = json.loads(manifest.read_text())
    data["sandbox"]["network"] = True
    manifest.write_text(json.dumps(data))
    lock_file = user_dir() / "skills.lock"
    lock = json.loads(lock_file.read_text())
    import hashlib

    entry = lock["packs"]["tools"]
    entry["files"]["hello/skill.json"]["sha256"] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    entry["consent"]["capabilities"]["tools"]["hello"]["network"] = True
    lock_file.write_text(json.dumps(lock))
    assert "hello" not in listed(capsys)
    assert "consent: missing or broken" in _load_refusals(capsys)
    _code, out, _err = run(capsys, "inspect", "tools")
    assert "does not match its seal (edited by hand" in out


def test_a_consent_for_version_1_replayed_for_version_2_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "install", "--yes", str(make_pack(tmp_path / "v1")))[0] == 0
    v1_consent = json.loads((user_dir() / "skills.lock").read_text())["packs"]["tools"]["consent"]
    v2 = make_pack(tmp_path / "v2", version="2.0", sandbox={"network": True})
    assert run(capsys, "install", "--replace", "--yes", str(v2))[0] == 0
    lock_file = user_dir() / "skills.lock"
    lock = json.loads(lock_file.read_text())
    lock["packs"]["tools"]["consent"] = v1_consent  # sealed, but for 1.0
    lock_file.write_text(json.dumps(lock))
    assert "hello" not in listed(capsys)
    _code, out, _err = run(capsys, "inspect", "tools")
    assert "was given for version 1.0 of other content, not for 2.0" in out
    assert run(capsys, "trust", "tools", "--yes")[0] == 0  # consenting again mends it
    assert "hello" in listed(capsys)


def test_a_consent_key_that_others_can_read_seals_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "install", "--yes", str(make_pack(tmp_path / "src")))[0] == 0
    key = Path(Settings.from_env().state_dir) / "consent.key"
    assert key.stat().st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)
    assert "hello" not in listed(capsys)


def test_rest_and_the_console_show_each_packs_signer_and_consent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import httpserve
    import httpx
    from consolekit import csrf_of

    from ongrid_plugins import SkillHost
    from ongrid_plugins.server.rest import close_event_streams, create_app
    from ongrid_plugins.server.tokens import Principal, TokenStore, hash_token

    key = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", key)
    signed = make_pack(tmp_path / "a", name="signed-pack")
    sign(capsys, signed, key)
    assert run(capsys, "install", "--yes", str(signed))[0] == 0
    make_skill(tmp_path / "b" / "plain", "other")
    assert run(capsys, "install", "--yes", str(tmp_path / "b" / "plain"))[0] == 0
    host = SkillHost(Settings.from_env())
    store = TokenStore([(hash_token("tok"), Principal("alice", "admin"))])
    with httpserve.running(create_app(host, store), before_stop=close_event_streams) as url:
        items = httpx.get(f"{url}/v1/skills", headers={"Authorization": "Bearer tok"}).json()["items"]
        packs = {i["name"]: i["pack"] for i in items}
        assert packs["hello"]["signer"] == "acme" and packs["hello"]["consent"] == "given"
        assert packs["other"]["signer"] == "" and packs["other"]["name"] == "plain"
        assert packs["disk_usage"] is None  # built in: no pack
        one = httpx.get(f"{url}/v1/skills/hello", headers={"Authorization": "Bearer tok"}).json()
        assert one["pack"]["consent_version"] == "1.0"
        with httpx.Client(base_url=url) as browser:
            nonce = csrf_of(browser.get("/login").text)
            browser.post("/login", data={"token": "tok", "csrf": nonce, "next": "/"})
            page = browser.get("/").text
    assert "signed by acme · consented" in page and "unsigned · consented" in page
    host.audit.close()


def test_a_start_does_not_verify_again_a_signature_verified_at_consent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    key = keygen(tmp_path, "acme")
    trust_signer(capsys, "acme", key)
    pack = make_pack(tmp_path / "src")
    sign(capsys, pack, key)
    monkeypatch.setenv("ONGRID_REQUIRE_SIGNED", "1")
    assert run(capsys, "install", "--yes", str(pack))[0] == 0
    probe = (
        "import sys; from ongrid_plugins import SkillHost; from ongrid_plugins.settings import Settings; "
        "h = SkillHost(Settings.from_env()); h.load(); "
        "print(h.get('hello').provenance, 'cryptography' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["tools", "1.0", "(installed)", "False"]  # loaded, parsed, not re-verified
