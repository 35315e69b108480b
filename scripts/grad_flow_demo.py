#!/usr/bin/env python3
"""Show that detaching a complex channel starves the encoder of gradients.

Usage: python scripts/grad_flow_demo.py   (same as `hil gradflow`)
"""

import sys

from hil.demos.grad_flow import main

if __name__ == "__main__":
    sys.exit(main())
