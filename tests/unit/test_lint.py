"""`lint`'s checks, pure: each rule of the guide found where it is broken (line and
column) and not where it is kept, on the guide's own examples and on small variations,
and every unreadable script refused with its reason."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tui.model.lint import (
    CODES,
    MAX_BYTES,
    MAX_DEPTH,
    Finding,
    LintError,
    LintResult,
    lint,
)
from tui.model.lint_doc import SCHEMA, lint_document
from tui.model.lint_facts import index, read_script

DATA = Path(__file__).resolve().parents[1] / "data" / "serverless"

# A Modal script that keeps every rule; each test breaks one.
GOOD = '''\
import modal

VOL = "/vol"
app = modal.App("t")
vol = modal.Volume.from_name("runs", create_if_missing=True)
image = (modal.Image.debian_slim().apt_install("libgl1", "libglib2.0-0")
         .env({"HF_HOME": f"{VOL}/hf"}))


class Commit:
    def on_train_epoch_end(self, event):
        vol.commit()


@app.function(gpu="A100", image=image, volumes={VOL: vol}, timeout=3600)
def train():
    from libreyolo import LibreYOLO

    LibreYOLO("yolox-s.pt").train(data="d.yaml", epochs=3, project=f"{VOL}/runs",
                                  device="0,1", callbacks=[Commit()])


if __name__ == "__main__":
    train.remote()
'''


def run(source: str) -> LintResult:
    return lint(textwrap.dedent(source).encode())


def only(result: LintResult, code: str) -> list[Finding]:
    return [f for f in result.findings if f.code == code]


def line_of(source: str, needle: str) -> int:
    return next(i for i, text in enumerate(source.splitlines(), 1) if needle in text)


def test_the_good_script_is_clean() -> None:
    result = run(GOOD)
    assert result.findings == () and result.exit_code == EXIT_OK
    assert result.providers == ("modal",)


def test_the_guides_three_cases() -> None:
    """The guide's Modal example is clean; without timeout= it fails; committing only at
    the end warns (and warnings alone exit 0)."""
    assert lint((DATA / "modal_train.py").read_bytes()).findings == ()
    text = (DATA / "modal_no_timeout.py").read_text()
    result = lint(text.encode())
    assert [(f.code, f.severity) for f in result.findings] == [("GR101", "error")]
    assert (result.findings[0].line, result.findings[0].col) == \
        (line_of(text, "@app.function("), 2)
    assert result.exit_code == EXIT_FAILED
    text = (DATA / "modal_commit_at_end.py").read_text()
    result = lint(text.encode())
    assert [(f.code, f.severity) for f in result.findings] == [("GR104", "warning")]
    assert result.findings[0].line == line_of(text, "    cache.commit()")
    assert "only after train() returns" in result.findings[0].message
    assert result.exit_code == EXIT_OK


def test_the_beam_example_is_clean() -> None:
    result = lint((DATA / "beam_train.py").read_bytes())
    assert result.findings == () and result.providers == ("beam",)


@pytest.mark.parametrize(("old", "new", "says"), [
    ("timeout=3600", "timeout=None", "timeout=None"),
    ("timeout=3600", "timeout=0", "outside the 1 to 86400 s Modal documents"),
    ("timeout=3600", "timeout=100_000", "above Modal's maximum"),
    (", timeout=3600", "", "Modal's 300 s default"),
])
def test_a_gpu_function_needs_a_finite_timeout(old: str, new: str, says: str) -> None:
    source = GOOD.replace(old, new)
    [finding] = run(source).findings
    assert finding.code == "GR101" and finding.severity == "error" and says in finding.message
    assert finding.line == line_of(source, "@app.function(")


def test_timeout_rules_apply_to_gpu_functions_and_classes_only() -> None:
    cpu = GOOD.replace('gpu="A100", ', "").replace(", timeout=3600", "")
    assert not only(run(cpu), "GR101")  # no GPU: not this rule's bill
    spread = GOOD.replace("timeout=3600", "**OPTIONS")
    assert not only(run(spread), "GR101")  # cannot be seen: not claimed missing
    cls = '''\
    import modal
    stub = modal.Stub()

    @stub.cls(gpu="H100")
    class Trainer:
        pass

    @stub.function(gpu="T4", timeout=60)
    def ok():
        pass
    '''
    [finding] = only(run(cls), "GR101")
    assert finding.line == 4 and "`@stub.cls(gpu=...)` on `Trainer`" in finding.message


def test_beam_timeout_minus_one_is_no_timeout() -> None:
    source = (DATA / "beam_train.py").read_text().replace("timeout=6 * 3600", "timeout=-1")
    [finding] = run(source).findings
    assert finding.code == "GR101" and "timeout=-1" in finding.message
    gone = (DATA / "beam_train.py").read_text().replace(" timeout=6 * 3600,", "")
    [finding] = run(gone).findings
    assert "Beam's 3600 s default" in finding.message
    assert finding.line == line_of(gone, "@function(gpu=\"A100-40\"")


def test_a_run_without_project_goes_to_librelyolos_default_on_the_container_disk() -> None:
    source = GOOD.replace(' project=f"{VOL}/runs",', "")
    [finding] = run(source).findings
    assert finding.code == "GR102" and finding.severity == "error"
    assert "runs/train" in finding.message and '"/vol/runs"' in finding.fix
    assert finding.line == line_of(source, ".train(")


def test_a_project_off_the_volume_is_an_error_at_its_value() -> None:
    source = GOOD.replace('project=f"{VOL}/runs"', 'project="/root/runs"')
    [finding] = run(source).findings
    assert finding.code == "GR102" and "'/root/runs'" in finding.message
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1:].startswith('"/root/runs"')
    relative = GOOD.replace('project=f"{VOL}/runs"', 'project="runs"')
    assert [f.code for f in run(relative).findings] == ["GR102"]
    unmounted = GOOD.replace("volumes={VOL: vol}, ", "")
    assert "GR102" in [f.code for f in run(unmounted).findings]


@pytest.mark.parametrize("project", [
    'Path(VOL) / "runs"', 'os.path.join(VOL, "runs", "x")', 'VOL + "/runs"', "str(RUNS)",
    '"/vol"'])
def test_a_project_built_from_the_mount_path_is_followed(project: str) -> None:
    source = GOOD.replace('project=f"{VOL}/runs"', f"project={project}").replace(
        'VOL = "/vol"', 'VOL = "/vol"\nRUNS = VOL + "/r"')
    assert not only(run(source), "GR102") and not only(run(source), "GR103")


def test_a_project_known_only_at_run_time_is_a_warning() -> None:
    source = GOOD.replace('project=f"{VOL}/runs"', 'project=os.environ["P"]')
    [finding] = run(source).findings
    assert finding.code == "GR103" and finding.severity == "warning"
    spread = GOOD.replace('project=f"{VOL}/runs",', "**cfg,")
    assert [f.code for f in run(spread).findings] == ["GR103"]


def test_a_project_in_a_helper_is_judged_by_every_gpu_functions_volumes() -> None:
    source = GOOD.replace(
        'LibreYOLO("yolox-s.pt").train(', 'fit(') + '''
def fit(**kw):
    model.train(data="d.yaml", project="/tmp/runs", callbacks=[Commit()])
'''
    [finding] = only(run(source), "GR102")
    assert "'/tmp/runs'" in finding.message and "(/vol)" in finding.message


def test_beam_volumes_match_relative_mounts_and_their_volumes_path() -> None:
    base = (DATA / "beam_train.py").read_text()
    for project in ('"/volumes/libreyolo-runs/runs"', '"libreyolo-runs/x"'):
        source = base.replace('project=f"{MOUNT}/runs"', f"project={project}")
        assert run(source).findings == (), project
    source = base.replace('project=f"{MOUNT}/runs"', 'project="/mnt/code/runs"')
    assert [f.code for f in run(source).findings] == ["GR102"]


def test_a_commit_per_epoch_counts_only_when_train_calls_it() -> None:
    plain = GOOD.replace("callbacks=[Commit()]", "callbacks=each_epoch").replace(
        "class Commit:", "def each_epoch(event):\n    vol.commit()\n\n\nclass Commit:")
    assert not only(run(plain), "GR104")  # a plain callable: LibreYOLO calls it per epoch
    bound = GOOD.replace("callbacks=[Commit()]", "callbacks=hooks").replace(
        "    from libreyolo", "    hooks = [Commit()]\n    from libreyolo")
    assert not only(run(bound), "GR104")
    lam = GOOD.replace("callbacks=[Commit()]", "callbacks=[lambda e: vol.commit()]")
    assert not only(run(lam), "GR104")
    unwired = GOOD.replace(", callbacks=[Commit()]", "")
    [finding] = run(unwired).findings
    assert finding.code == "GR104" and "never runs" in finding.message
    assert finding.line == line_of(unwired, "        vol.commit()")
    none = unwired.replace("        vol.commit()", "        pass")
    [finding] = run(none).findings
    assert finding.code == "GR104" and "nothing calls vol.commit()" in finding.message
    assert finding.line == line_of(none, ".train(")


def test_beam_has_no_commit_to_ask_for() -> None:
    assert not only(lint((DATA / "beam_train.py").read_bytes()), "GR104")


@pytest.mark.parametrize(("setting", "says"), [
    ('', "HF_HOME is not set"),
    ('.env({"HF_HOME": "/root/.cache/hf"})', "'/root/.cache/hf' is not on a mounted volume"),
    ('.env({"HF_HOME": os.environ.get("X")})', "computed at run time"),
])
def test_hf_home_must_be_on_the_volume(setting: str, says: str) -> None:
    source = GOOD.replace('.env({"HF_HOME": f"{VOL}/hf"})', setting)
    [finding] = run(source).findings
    assert finding.code == "GR105" and finding.severity == "warning" and says in finding.message
    assert '.env({"HF_HOME": "/vol/hf"})' in finding.fix


def test_hf_home_set_in_the_environment_or_a_secret_dict_counts() -> None:
    bare = GOOD.replace('\n         .env({"HF_HOME": f"{VOL}/hf"})', "")
    for how in ('os.environ["HF_HOME"] = VOL + "/hf"', 'os.environ.setdefault("HF_HOME", "/vol")',
                'SECRET = modal.Secret.from_dict({"HF_HOME": "/vol/cache"})'):
        assert run(bare + how + "\n").findings == (), how
    named = bare + 'S = modal.Secret.from_name("hf")\n'
    [finding] = run(named).findings
    assert "a named secret" in finding.message


def test_the_image_needs_opencvs_libraries() -> None:
    source = GOOD.replace('.apt_install("libgl1", "libglib2.0-0")', '.apt_install("git")')
    [finding] = run(source).findings
    assert finding.code == "GR106" and "libgl1 and libglib2.0-0" in finding.message
    assert finding.line == line_of(source, "modal.Image.debian_slim()")
    half = GOOD.replace('"libgl1", ', "")
    [finding] = run(half).findings
    assert "install libglib2.0-0:" not in finding.message and "libgl1:" in finding.message
    shell = GOOD.replace('.apt_install("libgl1", "libglib2.0-0")',
                         '.run_commands("apt-get update && apt-get install -y libgl1-mesa-glx '
                         'libglib2.0-0t64")')
    assert run(shell).findings == ()


def test_multi_gpu_device_needs_the_main_guard() -> None:
    source = GOOD.replace('if __name__ == "__main__":\n    train.remote()', "")
    [finding] = run(source).findings
    assert finding.code == "GR107" and finding.severity == "warning"
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1:].startswith('"0,1"')
    listed = source.replace('device="0,1"', "device=[0, 1]")
    assert [f.code for f in run(listed).findings] == ["GR107"]
    one = source.replace('device="0,1"', 'device="0"')
    assert run(one).findings == ()
    reversed_guard = source + 'if "__main__" == __name__:\n    pass\n'
    assert run(reversed_guard).findings == ()


def test_a_script_without_serverless_functions_says_so_and_nothing_else() -> None:
    result = run('''\
    from libreyolo import LibreYOLO
    LibreYOLO("yolox-s.pt").train(data="d.yaml", epochs=3)
    ''')
    assert [(f.code, f.severity) for f in result.findings] == [("GR100", "warning")]
    assert result.exit_code == EXIT_OK
    torch_train = run("import modal\nmodel.train(True)\n")
    assert [f.code for f in torch_train.findings] == ["GR100"]


def test_columns_count_characters_not_bytes() -> None:
    source = GOOD.replace('project=f"{VOL}/runs"', 'project="/données/runs"').replace(
        'data="d.yaml"', 'data="é.yaml"')
    [finding] = run(source).findings
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1:].startswith('"/données/runs"')


def test_every_code_is_listed_and_findings_come_in_order() -> None:
    source = GOOD.replace(", timeout=3600", "").replace(' project=f"{VOL}/runs",', "")
    result = run(source)
    assert [f.code for f in result.findings] == ["GR101", "GR102"]
    assert {f.code for f in result.findings} <= set(CODES)
    assert result.errors == 2 and result.warnings == 0 and result.exit_code == EXIT_FAILED


@pytest.mark.parametrize(("data", "says"), [
    (b"x = 1\n" * (MAX_BYTES // 6 + 1), "too large"),
    (b"\x7fELF\x02\x01\x01\x00\x00", "binary"),
    ("x = 'é'\n".encode("latin-1"), "not UTF-8: byte 5 is 0xe9"),
    (b"def f(:\n", "not Python: line 1"),
    (b"this is not python at all\n", "not Python"),
    (b"(" * 1000 + b"1" + b")" * 1000, "too many nested parentheses"),
    (b"-" * 100_000 + b"1", "too deeply nested"),
    (b"x" + b"[0]" * 100_000, "too deeply nested"),
    (b"x = " + b"+".join([b"1"] * (MAX_DEPTH + 50)), "too deeply nested"),
    (b"".join(b" " * i + b"if x:\n" for i in range(150)) + b" " * 150 + b"pass\n",
     "not Python"),
])
def test_an_unreadable_script_says_why(data: bytes, says: str) -> None:
    with pytest.raises(LintError) as caught:
        lint(data)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_bom_and_an_empty_file_are_fine() -> None:
    assert lint(b"\xef\xbb\xbf" + GOOD.encode()).findings == ()
    assert [f.code for f in lint(b"").findings] == ["GR100"]


def test_the_json_document() -> None:
    result = run(GOOD.replace(", timeout=3600", ""))
    doc = lint_document("train.py", result)
    assert doc["schema"] == SCHEMA == "gpurent.lint/1"
    assert doc["exit_code"] == EXIT_FAILED and doc["errors"] == 1 and doc["providers"] == ["modal"]
    [finding] = doc["findings"]
    assert set(finding) == {"line", "col", "severity", "code", "message", "fix"}
    assert finding["code"] == "GR101" and finding["line"] == line_of(GOOD, "@app.function(")
    bad = lint_document("x.py", None, "binary")
    assert bad["unreadable"] == "binary" and bad["exit_code"] == EXIT_USAGE
    assert bad["findings"] == []


def test_names_are_followed_to_a_timeout_and_to_image_commands() -> None:
    named = GOOD.replace("timeout=3600", "timeout=NO_LIMIT").replace(
        'VOL = "/vol"', 'VOL = "/vol"\nNO_LIMIT = None')
    [finding] = run(named).findings
    assert finding.code == "GR101" and "timeout=None" in finding.message
    beam = (DATA / "beam_train.py").read_text().replace(
        'commands=["apt-get update && apt-get install -y libgl1 libglib2.0-0"]',
        "commands=SETUP").replace('MOUNT = "./libreyolo-runs"',
                                  'MOUNT = "./libreyolo-runs"\nSETUP = ["apt-get install -y '
                                  'libgl1 libglib2.0-0"]')
    assert run(beam).findings == ()


def test_lines_are_counted_as_the_parser_counts_them() -> None:
    """A form feed (legal at a line's start) is no line break to the parser: columns
    are taken from the right line."""
    source = "\f" + GOOD.replace('project=f"{VOL}/runs"', 'project="/root/runs"')
    [finding] = lint(source.replace("\n", "\r\n").encode()).findings
    line = source.split("\n")[finding.line - 1]
    assert line[finding.col - 1:].startswith('"/root/runs"')


def test_a_beam_secret_may_hold_hf_home_and_the_warning_says_so() -> None:
    base = (DATA / "beam_train.py").read_text().replace(
        '    env_vars=[f"HF_HOME={MOUNT}/hf"],\n', "")
    [finding] = run(base).findings
    assert finding.code == "GR105" and "named secret" not in finding.message
    assert 'Image(env_vars=["HF_HOME=./libreyolo-runs/hf"])' in finding.fix
    secret = base.replace("timeout=6 * 3600,", 'timeout=6 * 3600, secrets=["HF"],')
    [finding] = run(secret).findings
    assert "unless a named secret sets it" in finding.message


# Defect 8: a timeout written as arithmetic, through names, or not as a number.
@pytest.mark.parametrize(("timeout", "before", "severity", "says"), [
    ("25 * 3600", "", "error", "timeout=25 * 3600 = 90000, above Modal's maximum"),
    ("T2", "T2 = 25*3600\n", "error", "timeout=T2 = 90000, above Modal's maximum"),
    ("DAY + HOUR", "HOUR = 3600\nDAY = 24 * HOUR\n", "error", "= 90000, above"),
    ("2 * 86400 // 4 - 90000", "", "error", "= -46800, outside the 1 to 86400 s"),
    ('"3600"', "", "error", "timeout='3600', a str, not a number of seconds"),
    ("TEXT", 'TEXT = "3600"\n', "error", "a str, not a number"),
    ("True", "", "error", "a bool, not a number"),
    ("int(os.environ['T'])", "import os\n", "warning",
     "timeout= is set but not checked (not a constant: int(os.environ['T'])"),
    ("TWICE", "TWICE = 60\nTWICE = 100_000\n", "warning",
     "set but not checked (not a constant: TWICE is bound more than once)"),
    ("3600 // 0", "", "warning", "3600 // 0 does not fold to a number"),
    ("2 ** 20", "", "warning", "2 ** 20 does not fold to a number (only + - * // /"),
])
def test_a_timeout_is_folded_to_a_number_or_said_unchecked(
        timeout: str, before: str, severity: str, says: str) -> None:
    source = GOOD.replace("timeout=3600", f"timeout={timeout}").replace(
        'VOL = "/vol"', f'VOL = "/vol"\n{before}')
    [finding] = run(source).findings
    assert (finding.code, finding.severity) == ("GR101", severity), finding
    assert says in finding.message
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1:].startswith(timeout)  # at the value as written


@pytest.mark.parametrize("timeout", ["6 * 3600", "86400", "1", "H * 24", "100 // 2"])
def test_a_timeout_that_folds_within_bounds_is_clean(timeout: str) -> None:
    source = GOOD.replace("timeout=3600", f"timeout={timeout}").replace(
        'VOL = "/vol"', 'VOL = "/vol"\nH = 3600')
    assert run(source).findings == ()


def test_a_long_chain_of_names_is_left_unchecked_not_followed_forever() -> None:
    chain = "T0 = 1\n" + "".join(f"T{i} = T{i - 1} + T{i - 1}\n" for i in range(1, 400))
    source = GOOD.replace("timeout=3600", "timeout=T399").replace(
        'VOL = "/vol"', f'VOL = "/vol"\n{chain}')
    [finding] = run(source).findings
    assert finding.severity == "warning" and "not checked" in finding.message
    assert "T399 is more names deep than the linter follows" in finding.message
    short = GOOD.replace("timeout=3600", "timeout=T20").replace(
        'VOL = "/vol"', f'VOL = "/vol"\n{chain}')
    [finding] = run(short).findings  # 2**20 s: folded once per name, found too long
    assert "= 1.04858e+06, above Modal's maximum" in finding.message


# Defect 10: timeout=None is Modal's 300 s default, not "no bound".
def test_modal_timeout_none_is_its_300_s_default() -> None:
    [finding] = run(GOOD.replace("timeout=3600", "timeout=None")).findings
    assert finding.severity == "error" and "no bound" not in finding.message
    assert "Modal's 300 s default" in finding.message and "cut at 5 minutes" in finding.message


# Defect 9: Beam's default timeout depends on the decorator.
BEAM_BARE = (DATA / "beam_train.py").read_text().replace(" timeout=6 * 3600,", "")


@pytest.mark.parametrize(("decorator", "says"), [
    ("function", "Beam's 3600 s default for @function applies: a longer run is cut at 1 hour"),
    ("task_queue", "Beam's 3600 s default for @task_queue"),
    ("endpoint", "Beam's 180 s default for @endpoint applies: a longer run is cut at 3 "
                 "minutes"),
    ("endpoint as ep", "Beam's 180 s default for @endpoint"),
    ("asgi", "Beam's default for @asgi applies"),
])
def test_beam_default_timeout_is_the_decorators_own(decorator: str, says: str) -> None:
    local = decorator.split(" as ")[-1]
    source = BEAM_BARE.replace("from beam import Image, Volume, function",
                               f"from beam import Image, Volume, {decorator}").replace(
        '@function(gpu="A100-40"', f'@{local}(gpu="A100-40"')
    [finding] = run(source).findings
    assert finding.code == "GR101" and says in finding.message, finding.message
    assert "3600" not in finding.message or "180" not in finding.message


# Defect 11: a misspelled decorator is pointed at, not "nothing serverless".
@pytest.mark.parametrize(("written", "meant"), [
    ("app.functon", "app.function"), ("app.fucntion", "app.function"),
    ("stub.functon", "stub.function"), ("app.clss", "app.cls"),
])
def test_a_near_miss_modal_decorator_is_an_error_at_its_line(written: str, meant: str) -> None:
    source = GOOD.replace("@app.function(", f"@{written}(")
    result = run(source)
    [finding] = result.findings
    assert (finding.code, finding.severity) == ("GR108", "error")
    assert f"did you mean {meant}?" in finding.message
    assert (finding.line, finding.col) == (line_of(source, f"@{written}("), 2)
    assert result.exit_code == EXIT_FAILED


def test_a_near_miss_beam_decorator_and_what_is_no_near_miss() -> None:
    source = (DATA / "beam_train.py").read_text().replace("@function(", "@fuction(")
    [finding] = run(source).findings
    assert finding.code == "GR108" and "did you mean function?" in finding.message
    far = GOOD.replace("@app.function(", "@app.schedule(")  # no gpu= decorator of Modal's
    assert [f.code for f in run(far).findings] == ["GR100"]
    no_gpu = GOOD.replace("@app.function(", "@app.functon(").replace('gpu="A100", ', "")
    assert [f.code for f in run(no_gpu).findings] == ["GR100"]


# Defect 20: Beam's image findings belong to the function whose image lacks the thing.
TWO_BEAM = """\
from beam import Image, Volume, endpoint, function
@function(gpu="A10G", timeout=600, volumes=[Volume(name="runs", mount_path="./runs")])
def train():
    model.train(data="d.yaml", project="./runs/p")
good = Image(commands=["apt-get install -y libgl1 libglib2.0-0"], env_vars=["HF_HOME=./c/hf"])
@endpoint(gpu="A10G", timeout=60, image=good, volumes=[Volume(name="c", mount_path="./c")])
def serve():
    pass
"""


def test_beam_image_findings_sit_at_the_function_lacking_them() -> None:
    result = run(TWO_BEAM)
    assert [(f.code, f.line, f.col) for f in result.findings] == \
        [("GR105", 2, 2), ("GR106", 2, 2)]
    hf, cv = result.findings
    assert "for `train`" in hf.message and 'HF_HOME=./runs/hf' in hf.fix
    assert "`train` passes no image=" in cv.message and "of `train`" in cv.fix
    swapped = TWO_BEAM.replace('timeout=600,', 'timeout=600, image=good,').replace(
        "image=good, volumes=[Volume(name=\"c\"", "volumes=[Volume(name=\"c\"")
    hf, *serve = run(swapped).findings  # train's image sets HF_HOME off its volume
    assert (hf.code, hf.line) == ("GR105", 5) and "'./c/hf' for `train`" in hf.message
    assert 'HF_HOME=./runs/hf' in hf.fix
    assert [(f.code, f.line) for f in serve] == [("GR105", 6), ("GR106", 6)]
    assert "for `serve`" in serve[0].message and "HF_HOME=./c/hf" in serve[0].fix
    assert "`serve` passes no image=" in serve[1].message


# Defect 19: the Beam example says how to run it so the panel sees it (a deployment).
def test_the_beam_example_says_to_deploy_its_gpu_function() -> None:
    """The panel reads Beam deployments (docs/serverless-beam.md): `python app.py`
    calling .remote() is none, so the example must say `beam deploy FILE:FUNCTION`
    naming its own GPU function."""
    text = (DATA / "beam_train.py").read_text()
    assert "Run: python" not in text
    [(script, entry)] = re.findall(r"beam deploy (\S+?\.py):(\w+) --name \S+", text)
    assert script == "beam_train.py"
    tree = ast.parse(text)
    indexed = index(tree, 200)
    assert indexed is not None
    gpu = {f.name for f in read_script(tree, *indexed).gpu_functions()}
    assert entry in gpu
    remote = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr == "remote"]
    assert remote == []  # no local start that bypasses the deployment


# Re-trial G: each GR101 fix fits its case; none says "add" to a timeout already there.
@pytest.mark.parametrize(("old", "new", "fix"), [
    ("timeout=3600", "timeout=25 * 3600",
     "lower it to at most 86400 (Modal's maximum), sized to the run"),
    ("timeout=3600", "timeout=T2",
     "lower it to at most 86400 (Modal's maximum), sized to the run"),
    (", timeout=3600", "", "add timeout=SECONDS: epochs x seconds per epoch plus a margin "
     "(Modal allows 1 to 86400)"),
    ("timeout=3600", "timeout='3600'", "write it as a number, e.g. timeout=3600"),
    ("timeout=3600", "timeout=None", "replace None with a number of seconds: epochs x "
     "seconds per epoch plus a margin (Modal allows 1 to 86400)"),
    ("timeout=3600", "timeout=0", "set it to a positive number of seconds sized to the run: "
     "epochs x seconds per epoch plus a margin (Modal allows 1 to 86400)"),
])
def test_each_timeout_finding_says_its_own_fix(old: str, new: str, fix: str) -> None:
    source = GOOD.replace(old, new).replace('VOL = "/vol"', 'VOL = "/vol"\nT2 = 25 * 3600')
    [finding] = run(source).findings
    assert (finding.code, finding.fix) == ("GR101", fix)


def test_beam_timeout_off_or_zero_is_told_to_be_positive() -> None:
    text = (DATA / "beam_train.py").read_text()
    for bad in ("-1", "0"):
        [finding] = run(text.replace("timeout=6 * 3600", f"timeout={bad}")).findings
        assert finding.fix == ("set it to a positive number of seconds sized to the run: "
                               "epochs x seconds per epoch plus a margin")


# Re-trial H: Modal's SDK puts timeout= into an integer protobuf field (timeout_secs),
# whose checker refuses a float with a TypeError: a float is warned, a whole int is not.
@pytest.mark.parametrize(("timeout", "whole"), [
    ("3600.5", "3600"), ("3600.0", "3600"), ("100 / 2", "50"), ("H / 2", "1800")])
def test_a_float_timeout_on_modal_is_warned(timeout: str, whole: str) -> None:
    source = GOOD.replace("timeout=3600", f"timeout={timeout}").replace(
        'VOL = "/vol"', 'VOL = "/vol"\nH = 3600')
    [finding] = run(source).findings
    assert (finding.code, finding.severity) == ("GR101", "warning")
    assert "a float" in finding.message and "TypeError" in finding.message
    assert finding.fix == f"write it as a whole number, e.g. timeout={whole}"
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1:].startswith(timeout)


# Re-trial I: a Modal script's image warnings sit at the image, else the first GPU function.
MODAL_TWO = """\
import modal
app = modal.App("x")
vol = modal.Volume.from_name("v")
IMAGE
@app.function(gpu="H100", USEvolumes={"/v": vol}, timeout=60)
def first():
    vol.commit()
@app.function(gpu="H100", USEvolumes={"/v": vol}, timeout=60)
def second():
    vol.commit()
"""


def test_modal_image_findings_sit_at_the_image_or_the_first_gpu_function() -> None:
    bare = MODAL_TWO.replace("IMAGE\n", "").replace("USE", "")
    result = run(bare)
    assert [(f.code, f.line, f.col) for f in result.findings] == \
        [("GR105", 4, 2), ("GR106", 4, 2)]
    used = MODAL_TWO.replace("IMAGE", 'img = (\n    modal.Image.debian_slim().pip_install("x"))'
                             ).replace("USE", "image=img, ")
    result = run(used)
    assert [(f.code, f.line, f.col) for f in result.findings] == \
        [("GR105", 5, 5), ("GR106", 5, 5)]
    unused = MODAL_TWO.replace("IMAGE", 'x = 1\nimg = modal.Image.debian_slim()'
                               ).replace("USE", "")
    result = run(unused)
    assert [(f.code, f.line, f.col) for f in result.findings] == \
        [("GR105", 5, 7), ("GR106", 5, 7)]
