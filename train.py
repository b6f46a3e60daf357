"""Training, from a checkout: `python train.py --help` (the same as `transformer-explained train`).
The code is transformer_explained/train.py."""
import sys

from transformer_explained.train import main

if __name__ == "__main__":
    sys.exit(main())
