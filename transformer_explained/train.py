"""`transformer-explained train` and `python train.py`: the command is model/commands/train.py, the run
model/training/ (setup, run, state, choice). Kept here for code that imported it from here."""
from model.commands.train import main, parse_args  # noqa: F401
