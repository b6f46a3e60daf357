"""Training, from a checkout: `python train.py --help` (the same as `transformer-explained train`).
The command is model/commands/train.py, the run model/training/ (setup, run, state, choice)."""
import sys

from model.commands.train import main

if __name__ == "__main__":
    sys.exit(main())
