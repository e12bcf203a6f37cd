"""Every navigation message true: what a caller is told matches what the navigator did.

Over real DDS, against the scripted rclpy navigator of ``test_navigation_action.py`` (an
rclpy ``ActionServer`` with NavigateToPose's fields) and its navigator whose answers are
held back: the words of each case the issue found false, checked against the navigator's
own log.

* An accepted goal is "accepted by the navigator": rclpy's server publishes the goal's
  status before its answer, so the status topic nearly always tells first; "its answer
  did not come" is said only where the answer did not come within the caller's wait.
* A late acceptance whose cancel the navigator refuses is said refused at once (not
  ``pending`` while the navigator sends feedback, then "unknown"), and is followed as
  running to its real result.
* ``goto --store`` promises only what its own process does: it asks the navigator to cancel
  a late acceptance while it lives, and both of its lines say the goal may run after that.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import wait_until
from rclpy.node import Node
from test_navigation_action import (  # noqa: F401 - the module fixtures, used by name
    ACTION_NAME,
    CLI_TIMEOUT_S,
    TIMEOUT_S,
    ScriptedNavigator,
    action_type_name,
    goto_store,
    lossy_sender,
    memory,
    ros,
    sent_id,
    wait_state,
    yawed,
)

from surprise_memory.agents.ros_navigation import GoToEpisodeClient
from surprise_memory.memory.navigation_goals import GoalStatus


def _follow(
    client: GoToEpisodeClient, nav: ScriptedNavigator, gid: str, until: str, timeout: float = 60
) -> list[tuple[GoalStatus, list[str]]]:
    """The goal's statuses until ``until``, each with the navigator's log read just before."""
    seen: list[tuple[GoalStatus, list[str]]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = nav.log(gid)
        status = client.navigation_status(gid)
        seen.append((status, log))
        if status.state == until:
            return seen
        time.sleep(0.05)
    pytest.fail(f"goal {gid}: not {until} within {timeout} s: {seen[-3:]}")


# --- accepted: said accepted, in either order of the status and the answer -----------------


def test_an_accepted_goal_is_said_accepted_never_lost(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
) -> None:
    nav = ros[1]
    nav.script(steps=3000, step_s=0.1)  # runs until preempted or cancelled
    client, _ = memory
    for _ in range(5):  # each preempts the one before
        result = client.go_to(episode_id="door")
        assert result.state == "running", result
        assert "running (accepted by the navigator)" in result.message, result.message
        assert "status topic" not in result.message and "lost" not in result.message
        assert client.navigation_status(result.goal_id).message == "accepted by the navigator"
        assert nav.first_event(result.goal_id) == "accepted"
    stopped, status = client.stop_navigation(result.goal_id)
    assert stopped and status.state == "canceled"


@pytest.mark.parametrize("answer_after_s", [0.3, None], ids=["answer_after_status", "lost"])
def test_the_status_topic_first_then_the_answer_or_none(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    lossy_sender: Any,  # noqa: F811
    answer_after_s: float | None,
) -> None:
    """The navigator lists the goal, then answers 0.3 s later (the order rclpy's server
    sends them in, drawn out), or never: "lost" only for the one whose answer never came."""
    from surprise_memory.nodes.goal_sender import goal_msg

    node = ros[0]
    tag = "late_answer" if answer_after_s is not None else "lost_answer"
    sender, lossy = lossy_sender(f"/{tag}/navigate_to_pose", 0.0)
    goal = goal_msg(node, yawed(1.0, 2.0, 0.0))
    if answer_after_s is not None:

        def answer_later() -> None:  # the answer a while after the status
            wait_until(lambda: lossy.log == ["accepted"], 30.0)
            time.sleep(answer_after_s)
            lossy.release()

        threading.Thread(target=answer_later, daemon=True).start()
        sent = sender.send(goal, timeout_s=10.0)  # (a loaded machine's discovery, then 0.3 s)
        assert sent.state == "running" and lossy.log == ["accepted"]
        assert sent.message == "accepted by the navigator", sent
        return
    sent = sender.send(goal, timeout_s=TIMEOUT_S)
    assert sent.state == "running" and lossy.log == ["accepted"]
    assert sent.message == (
        "accepted by the navigator (listed on its status topic; its answer did not come "
        f"within {TIMEOUT_S:g} s)"
    ), sent
    lossy.release()  # the lost answer comes after all: taken once, nothing changes
    time.sleep(0.5)
    assert sender.book.get(sent.goal_id) == sent


# --- late acceptances: cancelled, or its cancel refused ----------------------------------------


def test_a_late_acceptance_whose_cancel_is_refused_is_said_refused_at_once_and_followed(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
) -> None:
    nav = ros[1]
    nav.script(answer_delay_s=TIMEOUT_S + 1.0, refuse_cancel=True, steps=40, step_s=0.2)
    client, _ = memory
    result = client.go_to(episode_id="door")
    assert result.state == "pending", result
    seen = _follow(client, nav, result.goal_id, "succeeded")
    assert nav.log(result.goal_id) == ["accepted", "cancel refused", "succeeded"]
    states = [status.state for status, _ in seen]
    assert "unknown" not in states, states
    # pending only while the navigator had not accepted: after its refusal, never
    for status, log in seen:
        if "cancel refused" in log:
            assert status.state in ("running", "succeeded"), (status, log)
        if status.state == "pending":
            assert not math.isfinite(status.distance_remaining_m), status  # no feedback yet
    refused = "accepted after its caller was told pending; the navigator refused the cancel: "
    running = [s for s, _ in seen if s.state == "running" and s.message == refused + "it runs"]
    assert running, [s for s, _ in seen]
    assert any(math.isfinite(s.distance_remaining_m) for s in running)  # its feedback followed
    assert seen[-1][0].message == "the navigator's result"
    assert "this node asks it at once to cancel the goal" in result.message  # as it did


def test_a_late_acceptance_whose_cancel_is_answered_late_says_so_then_the_verdict(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
) -> None:
    """The navigator accepts late, then takes longer than goal_timeout_seconds to accept
    the cancel: "it may run" while it is unanswered, then cancelled."""
    nav = ros[1]
    nav.script(
        answer_delay_s=TIMEOUT_S + 1.0, cancel_delay_s=TIMEOUT_S + 2.0, steps=300, step_s=0.1
    )
    client, _ = memory
    result = client.go_to(episode_id="door")
    assert result.state == "pending", result
    seen = _follow(client, nav, result.goal_id, "cancelled_after_late_acceptance")
    why = "accepted after its caller was told pending"
    unanswered = (
        f"{why}; the navigator did not answer the cancel within {TIMEOUT_S:g} s: it may run "
        "(cancel it on the navigator)"
    )
    assert any(s.state == "running" and s.message == unanswered for s, _ in seen), seen
    accepted = f"{why}; cancelled: the navigator accepted the cancel asked at once"
    assert seen[-1][0].message == accepted
    nav.wait_for(result.goal_id, "canceled")
    assert nav.log(result.goal_id) == ["accepted", "cancel accepted", "canceled"]


def test_a_goal_preempted_before_its_late_acceptance_says_so_and_its_refused_cancel(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
) -> None:
    """Goal 1 is pending; goal 2 is accepted and takes its place; goal 1 is accepted late
    (the navigator preempts goal 2 with it) and its cancel refused: it runs, and says so."""
    nav = ros[1]
    nav.script(answer_delay_s=TIMEOUT_S + 3.0, refuse_cancel=True, steps=60, step_s=0.2)
    client, _ = memory
    first = client.go_to(episode_id="door")
    assert first.state == "pending"
    nav.answer_delay_s = 0.0
    second = client.go_to(episode_id="door", standoff_m=1.0)
    assert second.state == "running" and second.preempted == first.goal_id
    assert client.navigation_status(first.goal_id).state == "preempted"
    # the navigator accepts the first late, preempting the second (as bt_navigator does)
    nav.wait_for(first.goal_id, "cancel refused", timeout=30)
    status = wait_state(client, first.goal_id, "running")
    assert status.message == (
        f"accepted after goal {second.goal_id} took its place; the navigator refused the "
        "cancel: it runs"
    )
    wait_state(client, second.goal_id, "aborted", timeout=30)  # what the navigator did
    wait_state(client, first.goal_id, "succeeded", timeout=60)
    assert nav.log(first.goal_id) == ["accepted", "cancel refused", "succeeded"]


# --- goto --store: its own process follows the goal, and says for how long ---------------------


def test_goto_store_never_promises_a_cancel_after_it_ends(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    nav = ros[1]
    more_s = 1.0
    # accepted well after the process ended: nobody is left to cancel it, and it runs
    nav.script(answer_delay_s=CLI_TIMEOUT_S + more_s + 4.0, steps=10, step_s=0.1)
    proc = goto_store(tmp_path, memory[1], nav.action_type_name, CLI_TIMEOUT_S, more_s)
    assert proc.returncode == 1, proc.stderr
    goal_id = sent_id(proc.stdout)
    said = proc.stdout + proc.stderr
    assert "navigation_status" not in said and "cancelled at once" not in said, said
    assert f"goal {goal_id} via action {ACTION_NAME}: pending" in proc.stdout
    assert (
        f"if it accepts within {more_s:g} s more, this process asks it at once to cancel "
        "the goal; after that this process has ended, and the goal may run"
    ) in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        f"goal {goal_id}: pending: no answer within {more_s:g} s more; this process ends, "
        "so if the navigator accepts it later, the goal may run"
    )
    nav.wait_for(goal_id, "succeeded", timeout=30)  # as both lines said it might
    assert nav.log(goal_id) == ["accepted", "succeeded"]


@pytest.mark.parametrize("wait", [False, True], ids=["no_wait", "wait"])
def test_goto_store_says_a_refused_late_cancel_then_ends_or_follows(
    ros: tuple[Node, ScriptedNavigator],  # noqa: F811
    memory: tuple[GoToEpisodeClient, Path],  # noqa: F811
    tmp_path: Path,
    wait: bool,
) -> None:
    nav = ros[1]
    # a late acceptance: the navigator answers 2 s after the CLI's timeout
    nav.script(answer_delay_s=CLI_TIMEOUT_S + 2.0, refuse_cancel=True, steps=3000, step_s=0.1)
    extra = ("--wait",) if wait else ()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            goto_store, tmp_path, memory[1], nav.action_type_name, CLI_TIMEOUT_S, 20.0, *extra
        )
        # the goal runs until the test finishes it: once refused (with --wait, followed)
        wait_until(lambda: "cancel refused" in nav.log() or running.done(), 60.0)
        if "cancel refused" not in nav.log():
            ended = running.result(timeout=60)  # goto's own account of what it did
            pytest.fail(
                f"navigator saw {nav.requests()} goal request(s), {nav.log()}; "
                f"goto said {ended.stdout}{ended.stderr}"
            )
        (goal_id,) = {gid for gid, what in nav.events() if what == "cancel refused"}
        if not wait:
            proc = running.result(timeout=60)
        nav.finish(goal_id)
        proc = running.result(timeout=60)
    nav.wait_for(goal_id, "succeeded")
    assert sent_id(proc.stdout) == goal_id
    refused = (
        " (accepted after its caller was told pending; the navigator refused the cancel: it runs)"
    )
    lines = proc.stderr.strip().splitlines()
    if not wait:  # exit 1: it runs on, and this process says it stops following it
        assert proc.returncode == 1, proc.stderr
        assert lines[-1].startswith(f"goal {goal_id}: running"), lines  # (its distance)
        assert lines[-1].endswith(f"{refused}; this process ends and follows it no further")
        assert nav.log(goal_id)[:2] == ["accepted", "cancel refused"]
        return
    # --wait: the refusal said, then the goal followed to its success (exit 0)
    assert proc.returncode == 0, proc.stderr
    assert lines[-1].startswith(f"goal {goal_id}: running") and lines[-1].endswith(refused)
    assert proc.stdout.strip().splitlines()[-1].startswith(f"goal {goal_id}: succeeded")
    assert nav.log(goal_id) == ["accepted", "cancel refused", "succeeded"]
