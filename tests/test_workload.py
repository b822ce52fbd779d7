import pytest

from tuner.core.errors import WorkloadError
from tuner.user.workload import call_model, load_workload, validate_workload


def test_clean_workload_loads_and_runs(workloads):
    w = load_workload(workloads / "mlp.py")
    assert w.name == "mlp"
    assert w.loss_fn is not None and w.input_schedule is not None
    model, inputs = w.make_model(), w.make_inputs()
    assert call_model(model, inputs).shape == (8, 4)
    validate_workload(w, task="train")
    assert len(w.make_schedule()) == 4


def test_keyword_inputs_are_passed_as_kwargs(workloads):
    w = load_workload(workloads / "kwargs_dict_output.py")
    out = call_model(w.make_model(), w.make_inputs())
    assert out.logits.shape == (4, 3)


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing.py", "no such model file"),
        ("syntax_error.py", "syntax_error.py:3: syntax error"),
        ("import_error.py", "importing the file raised ModuleNotFoundError"),
        ("no_build_model.py", "missing function `build_model()`"),
    ],
)
def test_broken_files_give_one_clear_error(workloads, name, message):
    with pytest.raises(WorkloadError) as info:
        load_workload(workloads / name)
    assert message in str(info.value)
    assert name in info.value.message


def test_build_model_must_return_a_module(workloads):
    w = load_workload(workloads / "not_a_module.py")
    with pytest.raises(WorkloadError, match="build_model\\(\\) returned function, not a torch.nn.Module"):
        validate_workload(w)


def test_model_that_fails_eagerly_is_rejected_before_tuning(workloads):
    w = load_workload(workloads / "eager_fails.py")
    with pytest.raises(WorkloadError, match="fails in eager mode on example_inputs\\(\\)"):
        validate_workload(w)


def test_train_task_needs_a_loss_fn(workloads):
    w = load_workload(workloads / "bad_backends.py")
    with pytest.raises(WorkloadError, match="--task train needs a `loss_fn"):
        validate_workload(w, task="train")


@pytest.mark.parametrize("name", ["syntax_error.py", "no_build_model.py", "not_a_module.py", "eager_fails.py", "missing.py"])
def test_cli_exits_2_with_one_error_line_and_no_traceback(cli, workloads, name):
    proc = cli(str(workloads / name), "--trials", "1")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and name in lines[0]
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in proc.stderr


def test_verbose_shows_the_traceback(cli, workloads):
    proc = cli(str(workloads / "import_error.py"), "--verbose")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr
