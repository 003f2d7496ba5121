#!/usr/bin/env python
"""Evaluate a visionzoo method: ``python eval.py TASK --model NAME --pretrained CKPT [flags]`` (see --help)."""

import sys

from visionzoo.cli import eval_main

if __name__ == "__main__":
    sys.exit(eval_main())
