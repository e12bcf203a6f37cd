"""Test-wide settings: no model hub, and DDS traffic isolated on this host."""

from __future__ import annotations

import os
import random

# No test may reach a model hub (weights are random inits of the real architectures).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# DDS discovery on loopback only, and a domain of this run's own so that concurrent runs
# (or a robot on the same host) never see each other's topics. Child processes inherit it.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 232)))

# the store's two backends and a real PostgreSQL server, for the tests that ask for them
from store_backends import backend, new_location, pg_server, pg_url, store_location  # noqa: F401
