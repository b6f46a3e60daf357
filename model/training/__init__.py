"""Training, as a library: the loop (loop.py: schedule, loss, one step, an epoch), its data (data.py),
the lab's tasks and runs (tasks.py, lab.py), BLEU and chrF (metrics.py). The package re-exports loop.py,
where `from model.training import train_step` always found it."""
from model.training.loop import (  # noqa: F401
    NonFiniteLoss,
    Progress,
    Schedule,
    StepSettings,
    autocast,
    cooldown_factor,
    learning_rate,
    loss_and_tokens,
    own_predictions,
    rewarm_factor,
    train_epoch,
    train_step,
    validation_loss,
)
