"""The training projection against real batches: 8 rollouts on 4 concurrent docker sandboxes,
each replaying a window of a recorded trajectory (example_trajectories/) with its recorded
think time slept, on both transports; the model, fed 5 earlier batches' rollouts, predicts
the median makespan of 5 real batches (the earlier and real batches alternate, so a shared
machine's drifting load falls on both alike). The 15% target is benchmarks/training.py
--real's, a performance figure of a quiet machine; here, beside the rest of the suite, the
prediction must be of the right size (within half), which a wrong schedule or resampling
misses by far."""

import pytest
from support.batches import TRANSPORTS, check

#: How far the prediction may be from the real median here (the benchmark's target is 15%).
PREDICTION_BOUND = 0.5


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_the_model_predicts_the_real_batches_median_makespan(sandbox_image, transport):
    found = check(transport, batch=8, slots=4, earlier=5, real=5)
    assert found.earlier_rollouts == 40 and len(found.real_s) == 5
    figures = f"real {found.real_s}, replayed {found.replayed_s}, predicted {found.predicted_s}"
    # each real batch is its own rollouts on the greedy slot schedule
    assert max(found.replay_errors) < 0.15, figures
    # and the earlier run's rollouts, resampled, predict the batches' median
    assert found.error < PREDICTION_BOUND, figures
