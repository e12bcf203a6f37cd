"""Serving the memory to other code: LLM agents and nodes on other machines.

* :mod:`.tool`: :class:`~.tool.EpisodicMemoryTool`, a drop-in tool for DAAAM's agent
  (flat strict OpenAI signature, nested form too), over any episode retriever.
* :mod:`.ros_client`: :class:`~.ros_client.EpisodicMemoryClient`, the memory node's
  ``retrieve_episodes`` service from any rclpy node, and
  :class:`~.ros_client.RosEpisodeRetriever`, the same service as a retriever for the
  tool.
* :mod:`.navigation_tool`: :class:`~.navigation_tool.NavigateToEpisodeTool`, the agent's
  ``navigate_to_episode(episode_id)`` ("take me there"), through a navigator such as
  :class:`~.ros_navigation.GoToEpisodeClient` (:mod:`.ros_navigation`, the memory node's
  ``go_to_episode`` service).

:mod:`.ros_client` and :mod:`.ros_navigation` import rclpy; importing this package does not.
"""
