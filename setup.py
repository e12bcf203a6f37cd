"""pip entry point of the ROS-free core; metadata lives in setup.cfg.

The ROS package itself is built by colcon from CMakeLists.txt (ament_cmake), which
generates the interfaces and installs this Python package over the generated one.
"""

from setuptools import setup

setup()
