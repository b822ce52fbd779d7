"""The finalists' hardware: a warning when they were not measured on the same kind of machine."""
import optuna
import pytest

from tuner.study import hardware_mismatch, open_study

H100 = {"host": "gpu-a", "device_name": "NVIDIA H100", "torch": "2.13.0"}


def add(study, role, value, env, label):
    study.add_trial(optuna.trial.create_trial(
        value=value, user_attrs={"role": role, "environment": env, "config_label": label}))


@pytest.fixture
def study(tmp_path):
    s = open_study(f"sqlite:///{tmp_path / 'study.db'}", "s", seed=0)
    add(s, "eager", 10.0, H100, "eager")
    add(s, "plain", 8.0, H100, "plain")
    for i, value in enumerate((5.0, 6.0, 7.0)):
        add(s, "search", value, H100, f"c{i}")
    return s


def test_finalists_on_one_kind_of_machine_get_no_warning(study):
    add(study, "search", 9.0, {**H100, "host": "gpu-b"}, "slow one elsewhere")  # not a finalist
    assert hardware_mismatch(study) is None


@pytest.mark.parametrize("where", [{"host": "gpu-b"}, {"device_name": "NVIDIA A100"}, {"torch": "2.14.0"}])
def test_a_finalist_measured_elsewhere_is_named_in_the_warning(study, where):
    add(study, "search", 4.0, {**H100, **where}, "fastest, elsewhere")
    warning = hardware_mismatch(study)
    assert warning.startswith("finalists were measured on different hardware: #0, #1, #2, #3 on gpu-a "
                              "(NVIDIA H100, torch 2.13.0); #5 on ")
    assert "confirm the winner on the machine you will run on" in warning
