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
if os.environ.get("ROS_DISTRO") == "humble":  # Humble ignores the line above
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(1, 232)))
# Under pytest-xdist (`pytest -n N`) each worker inherits the controller's domain; the next
# domains up, one per worker, keep two tests running at once from seeing each other's nodes.
if os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):  # "gw0", "gw1", ...
    os.environ["ROS_DOMAIN_ID"] = str(
        1
        + (int(os.environ["ROS_DOMAIN_ID"]) - 1 + int(os.environ["PYTEST_XDIST_WORKER"][2:])) % 232
    )

# `pytest --ros-free`: the tests that need no ROS 2 (the robot stage, tools/test_robot.sh);
# the store's two backends and a real PostgreSQL server, for the tests that ask for them
# a short synthetic QA world processed once, for the question-answering tests;
# the face detector of the redaction tests
from face_photos import detector, faint  # noqa: F401
from qa_helpers import qa_world_store  # noqa: F401
from ros_free import (  # noqa: F401
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_report_collectionfinish,
)
from store_backends import backend, new_location, pg_server, pg_url, store_location  # noqa: F401
