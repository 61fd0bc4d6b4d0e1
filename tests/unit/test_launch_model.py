"""The pure side of `launch`: arguments read and checked, refusals, the form and its prefill."""

from __future__ import annotations

import shlex

import pytest

from tui.model.launch import (
    LaunchError,
    LaunchForm,
    check_refusal,
    default_run_name,
    form_args,
    form_from_entry,
    form_problems,
    option_name,
    outside_roots,
    plan_launch,
    redact,
    run_name_problem,
    ssh_forward_hint,
    take_option,
)

ROOTS = ("/root/runs",)
NOW = 1_796_000_000.0  # 2026-11-30 ...


def test_options_are_read_in_every_spelling_libreyolo_accepts() -> None:
    assert [option_name(a) for a in ("--data", "--data=x", "data=x", "--exist_ok",
                                     "--no-exist-ok", "-v", "x.yaml", "a b=c")] == [
        "data", "data", "data", "exist-ok", "exist-ok", None, None, None]
    assert take_option(["--data", "a.yaml", "--epochs", "3"], "data") == (
        "a.yaml", ["--epochs", "3"], True)
    assert take_option(["data=a.yaml", "--data=b.yaml"], "data") == ("b.yaml", [], True)
    assert take_option(["--exist-ok", "data=x"], "exist-ok", flag=True) == (
        "true", ["data=x"], True)
    assert take_option(["--no-exist-ok"], "exist-ok", flag=True) == ("false", [], True)
    assert take_option(["--batch", "-1"], "batch") == ("-1", [], True)
    assert take_option(["--epochs", "3"], "data") == (None, ["--epochs", "3"], False)


def test_a_cli_plan_takes_name_and_project_from_either_side_and_refuses_two_values() -> None:
    plan = plan_launch("b", ROOTS, train_args=["--data", "d.yaml", "--name", "r1",
                                               "project=/w/runs", "--exist-ok", "--epochs", "3"])
    assert (plan.name, plan.project, plan.data, plan.kind) == ("r1", "/w/runs", "d.yaml", "cli")
    assert plan.args == ("--data", "d.yaml", "--epochs", "3")
    assert plan.run_dir == "/w/runs/r1"
    assert plan.command() == ["libreyolo", "train", "--data", "d.yaml", "--epochs", "3",
                              "--project", "/w/runs", "--name", "r1", "--exist-ok"]
    same = plan_launch("b", ROOTS, train_args=["--name", "r1", "--data", "d"], name="r1")
    assert same.name == "r1"
    with pytest.raises(LaunchError, match="given twice with different values"):
        plan_launch("b", ROOTS, train_args=["--name", "r1", "--data", "d"], name="r2")
    with pytest.raises(LaunchError, match="after `--`"):
        plan_launch("b", ROOTS, train_args=[])
    with pytest.raises(LaunchError, match="no runs_roots"):
        plan_launch("b", (), train_args=["--data", "d"])


def test_defaults_a_new_name_and_the_first_runs_root() -> None:
    plan = plan_launch("b", ROOTS, train_args=["--data", "d"], now=NOW)
    assert plan.project == "/root/runs" and plan.name == default_run_name(NOW)
    assert plan.name.startswith("run-20") and len(plan.name) == len("run-20261130-120000")
    script = plan_launch("b", ROOTS, script_name="my train.py", now=NOW)
    assert script.kind == "script" and script.name.startswith("my-train-20")
    assert script.command() == ["python", "my train.py"]


def test_hostile_names_are_kept_as_they_are_or_refused_with_a_reason() -> None:
    hostile = "run 'q' $(touch pwned) \"x\""
    assert run_name_problem(hostile) is None
    assert plan_launch("b", ROOTS, train_args=["--data", "d"], name=hostile).name == hostile
    for bad in ("", ".", "..", "a/b", "a\nb", "a\x1b[2Jb", "x" * 201):
        assert run_name_problem(bad), bad
        with pytest.raises(LaunchError):
            plan_launch("b", ROOTS, train_args=["--data", "d"], name=bad)


def test_resume_adds_libreyolos_resume_recipe_unless_the_args_say_it() -> None:
    plan = plan_launch("b", ROOTS, train_args=["--data", "d"], name="r", resume=True)
    assert plan.command()[-4:] == ["--resume", "true", "--model", "/root/runs/r/weights/last.pt"]
    own = plan_launch("b", ROOTS, train_args=["--data", "d", "--model", "m.pt", "resume=true"],
                      name="r", resume=True)
    assert own.has_model and own.has_resume
    assert own.command()[-1] == "--exist-ok"


def test_the_journal_never_gets_a_token() -> None:
    args = ["--hf-token", "hf_abcdefgh", "--api_key=xyz123", "--data", "d",
            "--note", "hf_abcdefgh-inside", "--password", "--epochs"]
    assert redact(args, ["hf_abcdefgh", ""]) == [
        "--hf-token", "***", "--api_key=***", "--data", "d", "--note", "***-inside",
        "--password", "--epochs"]


def test_secret_looking_options_and_token_shaped_values_never_reach_the_journal() -> None:
    hf = "hf_" + "Q" * 34
    wandb = "0123456789abcdef" * 2 + "01234567"  # 40 hex, a W&B API key's shape
    args = ["--wandb-key", "w123", "--WANDB_KEY=w456", "--auth", hf, "--hub-token=t0k3n",
            "--my_secret", "s3", "--db-password=pw", "keyfile=/k", "--note", f"see {wandb}!",
            "--x", f"{hf}-tail", "--data", "d.yaml", "--epochs", "3", "--api-key", "--batch"]
    assert redact(args) == [
        "--wandb-key", "***", "--WANDB_KEY=***", "--auth", "***", "--hub-token=***",
        "--my_secret", "***", "--db-password=***", "keyfile=***", "--note", "see ***!",
        "--x", "***-tail", "--data", "d.yaml", "--epochs", "3", "--api-key", "--batch"]
    # Short hex (a commit, a colour) and words that only start like a token stay.
    assert redact(["--rev", "0123abc", "--name", "hf_run", "--tag", "a" * 39]) == [
        "--rev", "0123abc", "--name", "hf_run", "--tag", "a" * 39]


def test_a_failed_check_refuses_until_a_later_check_passes() -> None:
    entries = [{"box": "b", "action": "check", "outcome": "problems", "time": NOW,
                "error": "CUDA not available: no GPU visible"},
               {"box": "other", "action": "check", "outcome": "ok"},
               {"box": "b", "action": "push", "outcome": "done"}]
    refusal = check_refusal(entries, "b")
    assert refusal and "CUDA not available" in refusal and "--force" in refusal
    assert "gpurent-tui check b" in refusal
    assert check_refusal(entries, "other") is None
    assert check_refusal([*entries, {"box": "b", "action": "check", "outcome": "ok"}],
                         "b") is None
    assert check_refusal([], "b") is None


def test_the_form_builds_train_arguments_and_names_each_bad_field() -> None:
    form = LaunchForm(model="yolox-n", data="/d/data.yaml", epochs="5", batch="-1",
                      imgsz="64", device="cpu", save_period="2",
                      extra="--no-pretrained --workers 0 --name-note 'a b'")
    assert form_problems(form) == []
    assert form_args(form) == ["--model", "yolox-n", "--data", "/d/data.yaml", "--epochs", "5",
                               "--batch", "-1", "--imgsz", "64", "--device", "cpu",
                               "--save-period", "2", "--no-pretrained", "--workers", "0",
                               "--name-note", "a b"]
    bad = LaunchForm(data="", epochs="x", batch="-2", extra="'open", name="a/b")
    problems = "\n".join(form_problems(bad))
    for word in ("data:", "epochs: a whole number", "batch: at least -1", "more arguments",
                 "run name"):
        assert word in problems
    assert form_problems(LaunchForm(script="/home/me/train.py", data="")) == []


def test_the_form_starts_from_the_boxs_last_launch() -> None:
    plan = plan_launch("b", ROOTS, train_args=[
        "--data", "/d/x.yaml", "--model", "yolox-s", "--epochs", "50", "--batch", "16",
        "--no-pretrained", "--lr0", "0.02"], name="r1", project="/w/runs")
    entry = {"box": "b", "action": "launch", "outcome": "started", "run": "r1",
             "run_path": "/w/runs/r1", "files": [], "message": shlex.join(plan.command())}
    form = form_from_entry(entry)
    assert (form.model, form.data, form.epochs, form.batch, form.project) == (
        "yolox-s", "/d/x.yaml", "50", "16", "/w/runs")
    assert shlex.split(form.extra) == ["--no-pretrained", "--lr0", "0.02"]
    assert form.name == "" and form.imgsz == LaunchForm().imgsz
    script = form_from_entry({"files": [{"name": "t.py", "path": "/home/me/t.py"}],
                              "message": "python t.py --lr '0.1 x'",
                              "run_path": "/root/runs/t"})
    assert script.script == "/home/me/t.py" and script.project == "/root/runs"
    assert shlex.split(script.extra) == ["--lr", "0.1 x"]
    assert form_from_entry(None) == LaunchForm()
    assert form_from_entry({"message": "'unbalanced"}).model == LaunchForm().model


def test_outside_roots_and_the_ssh_line_for_a_jump_host() -> None:
    assert not outside_roots("/root/runs/exp", ["/root/runs"])
    assert outside_roots("/root/runsX", ["/root/runs"])
    assert ssh_forward_hint(8420, None, "me") is None
    assert ssh_forward_hint(8420, "10.0.0.5 51000 203.0.113.7 22", "me") == \
        "ssh -N -L 8420:127.0.0.1:8420 me@203.0.113.7"
    assert ssh_forward_hint(8421, "10.0.0.5 51000 203.0.113.7 2222", "me") == \
        "ssh -N -L 8421:127.0.0.1:8421 -p 2222 me@203.0.113.7"
