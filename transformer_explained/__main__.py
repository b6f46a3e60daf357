import sys

from transformer_explained.cli import main

sys.exit(main())
