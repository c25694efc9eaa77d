"""--rollout-train's model: every key parsed, every default kept and stated, bad values named."""

import pytest

from pytest_rollout_tax.report.train_model import TrainModel


def test_the_issues_example_parses_to_its_values():
    model = TrainModel.parse("batch=512,slots=256,mode=sync,train=60")
    assert (model.batch, model.slots, model.mode, model.train_s) == (512, 256, "sync", 60.0)
    assert model.given == ("batch", "slots", "mode", "train")
    assert (model.gpus, model.gpu_price, model.failed) == (8, None, "retry")


def test_every_key_parses_and_the_rest_keep_their_defaults():
    model = TrainModel.parse(
        "batch=1e3, slots=10 ,mode=ASYNC,lag=2,gpus=16,gpu_price=2.5,failed=drop"
    )
    assert model == TrainModel(
        batch=1000, slots=10, mode="async", lag=2, gpus=16, gpu_price=2.5, failed="drop",
        given=("batch", "slots", "mode", "lag", "gpus", "gpu_price", "failed"),
    )  # fmt: skip
    assert model.train_s == 60.0


def test_default_takes_every_default_and_slots_default_to_the_batch():
    model = TrainModel.parse("default")
    assert model == TrainModel() and model.given == ()
    assert model.concurrency == model.batch == 512
    assert TrainModel.parse("batch=64").concurrency == 64


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("batch=0", "batch=0: expected a whole number from 1 to 65,536"),
        ("batch=64,slots=65", "slots=65: more sandboxes than the batch's 64 rollouts"),
        ("mode=maybe", "mode=maybe: expected sync or async"),
        ("train=-1", "train=-1: expected a number from 0 to 86400"),
        ("train=nan", "train=nan: expected a number from 0 to 86400"),
        ("failed=ignore", "failed=ignore: expected retry or drop"),
        ("lag=2", "lag=2: only mode=async runs generation ahead"),
        ("gpus=1.5", "gpus=1.5: expected a whole number from 1 to 1,000,000"),
        ("batch", "expected KEY=VALUE pairs"),
        ("size=3", "unknown key 'size'"),
        ("batch=2,batch=3", "batch given twice"),
    ],
)
def test_a_bad_value_is_named(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        TrainModel.parse(text)


def test_the_model_comes_back_from_its_json():
    model = TrainModel.parse("batch=8,slots=4,mode=async,gpu_price=3")
    assert TrainModel.from_dict(model.to_dict()) == model
    assert TrainModel.from_dict({"batch": 8, "future_key": 1}) == TrainModel(batch=8)
