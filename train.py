#!/usr/bin/env python
"""Train a visionzoo method: ``python train.py TASK --model NAME [flags]`` (see --help)."""

import sys

from visionzoo.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main())
