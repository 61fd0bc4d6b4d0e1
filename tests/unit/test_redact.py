"""The one redaction (tui/model/redact.py): every form of secret a box or a provider may
echo back, in text and in a command line."""

from __future__ import annotations

import pytest

from tui.model.redact import redact, redact_args, redact_tree, secrets_in_env

HF = "hf_" + "Q" * 34
WANDB = "0123456789abcdef" * 2 + "01234567"  # 40 hex, a W&B API key's shape
KEY = "Zk3rT9pLmQ2vX8"  # a provider key with no telling shape


@pytest.mark.parametrize("said", [
    f"error: train.py --wandb-key {KEY} --data d.yaml",
    f"argv: ['--wandb-key={KEY}']",
    f"WANDB_API_KEY={KEY} python3 train.py",
    f"GET https://api.example.com/x?api_key={KEY}&page=2",
    f'{{"api_key": "{KEY}", "ok": false}}',
    f"curl -k {KEY} https://host",
    f"tool --auth {KEY}",
    f"tool --credentials {KEY}",
    f"tool --pass {KEY}",
    f"tool --password={KEY}",
    f"fatal: could not read from https://alice:{KEY}@git.example.com/repo.git",
    f"Authorization: Bearer {KEY}",
    f"stand-in trainer ['crash', '--wandb-key', '{KEY}', '-k', \"{KEY}\"]",
])
def test_secret_named_values_and_url_passwords_go(said: str) -> None:
    out = redact(said)
    assert KEY not in out and "***" in out


@pytest.mark.parametrize("said", [
    f"token {HF} refused", f"key={WANDB}", f"see {WANDB}.", f"ghp_{'a' * 36} leaked"])
def test_token_shaped_words_go_wherever_they_stand(said: str) -> None:
    assert "***" in redact(said)
    assert HF not in redact(said) and WANDB not in redact(said)


@pytest.mark.parametrize("cut", [
    KEY[:6] + "\n" + KEY[6:], KEY[:6] + "\r\n  " + KEY[6:], KEY[:6] + "\\n" + KEY[6:],
    KEY[:6] + "\ufffd" + KEY[6:], " ".join(KEY)])
def test_a_known_secret_goes_even_split_by_the_senders_wrapping(cut: str) -> None:
    out = redact(f"refused key {cut} (bad)", [KEY])
    folded = " ".join(out.split())
    assert "***" in out
    for fragment in (KEY[:6], KEY[6:], KEY[3:9]):
        assert fragment not in folded and fragment not in folded.replace(" ", "")


def test_what_is_ours_stays() -> None:
    sha = "ab" * 32
    kept = (f"weights/best.pt sha256 {sha}, commit {'c' * 40}; --epochs 10 --data d.yaml; "
            "ssh root@1.2.3.4; token_env in [box.push]; the Hub refused the token "
            "(set HF_TOKEN); hf_run; 0123abc; https://huggingface.co/org/repo; "
            "argv ['--auth', '--epochs', '3']")
    assert redact(kept) == kept
    assert redact("short secret abc here", ["abc"]) == "short secret abc here"


def test_a_command_line_keeps_its_shape() -> None:
    args = ["train", "--wandb-key", KEY, "-k", "v", "--credentials=c", "--auth", "--epochs",
            "3", "--url", f"https://u:{KEY}@h/x", "--pass", "p4"]
    assert redact_args(args) == [
        "train", "--wandb-key", "***", "-k", "***", "--credentials=***", "--auth",
        "--epochs", "3", "--url", "https://***@h/x", "--pass", "***"]


def test_secrets_in_env_are_the_secret_named_and_long_enough() -> None:
    env = {"HF_TOKEN": HF, "WANDB_API_KEY": WANDB, "KEYTIMEOUT": "1", "HOME": "/root",
           "BOX_TOKEN": "box-scoped-123", "MINE": "m1"}
    assert sorted(secrets_in_env(env, ["MINE"])) == sorted([HF, WANDB, "box-scoped-123", "m1"])


def test_a_tree_is_redacted_but_its_hashes() -> None:
    sha = WANDB + "abcdef"
    tree = {"message": f"--wandb-key {KEY}", "files": [{"sha256": sha, "name": f"x {KEY}"}]}
    assert redact_tree(tree, [KEY], frozenset({"sha256"})) == {
        "message": "--wandb-key ***", "files": [{"sha256": sha, "name": "x ***"}]}
