"""surprise_memory: surprise-gated episodic memory for robots.

The modules of this package form a ROS-free core (frames, encoders, surprise scorer, gate,
episode store, retrieval, offline sources, evaluation, reports); the ROS 2 nodes live in
``surprise_memory.nodes`` and are the only modules that import rclpy. In a colcon install
this package also holds the generated interfaces (``surprise_memory.msg``/``.srv``).
"""

__version__ = "0.1.0"
