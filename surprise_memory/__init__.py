"""surprise_memory: surprise-gated episodic memory for robots.

The subpackages follow the pipeline (doc/guides/layout.md):

* :mod:`.perception`: camera frames -> V-JEPA-2 embeddings of M-frame windows;
* :mod:`.surprise`: embeddings -> Bayesian surprise per frame -> gated events;
* :mod:`.memory`: events -> 8-frame episodes with pose and PE-Core embeddings in a store,
  and retrieval by text, image, time and place;
* :mod:`.agents`: the memory served to LLM agents and to other nodes.

Beside them: :mod:`.sources` and :mod:`.offline` (bags and videos through the same core,
synthetic recordings, the demo, the report), :mod:`.evaluation` (Kinetics-GEBD),
:mod:`.config` (the one settings schema), :mod:`.stamps` (int-nanosecond time) and
:mod:`.errors`. All of it is ROS-free; the ROS 2 nodes live in :mod:`.nodes` and, with
:mod:`.agents.ros_client`, are the only modules that import rclpy. In a colcon install this
package also holds the generated interfaces (``surprise_memory.msg`` / ``.srv``).
"""

__version__ = "0.1.0"
