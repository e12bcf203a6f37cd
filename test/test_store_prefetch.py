"""The index prefetch reads only what fits in the memory free for the page cache.

Held to 2 GiB on a robot-year, a prefetch of all 3.2 GiB of index files pushed out what it
had just read and queries beside it took p99 1.0-1.5 s (RESULTS.md, "The prefetch sized
to the memory"). The cgroup files below are written as the kernel shows them (cgroup v1's
``memory.stat``, v2's ``memory.max``), in folders laid out as ``/sys/fs/cgroup`` is.
"""

from __future__ import annotations

from pathlib import Path

from surprise_memory.memory.store.prefetch import IndexPrefetch, page_cache_room, plan_prefetch

GIB = 2**30
MIB = 2**20


def _file(path: Path, size: int) -> Path:
    path.write_bytes(b"\1" * size)
    return path


def _meminfo(tmp_path: Path, available: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(
        f"MemTotal:       24000000 kB\nMemFree:         1000000 kB\n"
        f"MemAvailable:   {available // 1024} kB\nBuffers:           0 kB\n"
    )
    return path


def _v1(tmp_path: Path, group: str, limit: int, rss: int, shmem: int = 0) -> tuple[Path, Path]:
    """A cgroup v1 layout with this process in ``group``; (proc cgroup file, root)."""
    root = tmp_path / "cgroup"
    folder = root / "memory" / group.lstrip("/")
    folder.mkdir(parents=True)
    (folder / "memory.stat").write_text(
        f"cache 5000\nrss {rss}\nhierarchical_memory_limit {limit}\n"
        f"total_cache 9999999\ntotal_rss {rss}\ntotal_shmem {shmem}\n"
    )
    proc = tmp_path / "proc_cgroup"
    proc.write_text(f"9:name=systemd:/\n4:memory:{group}\n3:cpuset:/\n0::/\n")
    return proc, root


def test_the_plan_takes_the_files_in_order_while_they_fit(tmp_path: Path) -> None:
    graph_a = _file(tmp_path / "a.usearch", 300)
    graph_b = _file(tmp_path / "b.usearch", 300)
    keys_a = _file(tmp_path / "a.keys", 10)
    vecs_a = _file(tmp_path / "a.f32", 1000)
    keys_b = _file(tmp_path / "b.keys", 10)
    files = [graph_a, graph_b, keys_a, vecs_a, keys_b, tmp_path / "merged-away.f32"]
    # the vectors do not fit; the keys after them do; a file gone meanwhile is no file
    assert plan_prefetch(files, 700) == ([graph_a, graph_b, keys_a, keys_b], [vecs_a])
    assert plan_prefetch(files, 620) == ([graph_a, graph_b, keys_a, keys_b], [vecs_a])
    assert plan_prefetch(files, 619) == ([graph_a, graph_b, keys_a], [vecs_a, keys_b])
    assert plan_prefetch(files, 0) == ([], files[:5])
    assert plan_prefetch(files, None) == (files[:5], [])


def test_a_budgeted_prefetch_reads_only_the_planned_files(tmp_path: Path) -> None:
    graph = _file(tmp_path / "a.usearch", 3 * MIB)
    vectors = _file(tmp_path / "a.f32", 5 * MIB)
    keys = _file(tmp_path / "a.keys", MIB // 2)
    prefetch = IndexPrefetch([graph, vectors, keys], budget=4 * MIB)
    assert prefetch.wait(30)
    assert prefetch.left == [vectors]
    assert prefetch.bytes_read == 3 * MIB + MIB // 2
    whole = IndexPrefetch([graph, vectors, keys])
    assert whole.wait(30) and whole.left == [] and whole.bytes_read == 8 * MIB + MIB // 2


def test_the_room_is_the_cgroup_limit_less_its_programs_memory(tmp_path: Path) -> None:
    meminfo = _meminfo(tmp_path, 20 * GIB)
    proc, root = _v1(tmp_path, "/robot/memory_node", 2 * GIB, rss=400 * MIB, shmem=100 * MIB)
    # the page cache the group holds (total_cache) is room: the kernel reclaims it
    assert page_cache_room(meminfo, proc, root) == 2 * GIB - 500 * MIB


def test_the_room_is_the_systems_available_memory_when_smaller(tmp_path: Path) -> None:
    proc, root = _v1(tmp_path, "/robot", 8 * GIB, rss=GIB)
    assert page_cache_room(_meminfo(tmp_path, 3 * GIB), proc, root) == 3 * GIB


def test_an_unlimited_v1_group_leaves_the_systems_memory(tmp_path: Path) -> None:
    proc, root = _v1(tmp_path, "/", 9223372036854771712, rss=GIB)
    assert page_cache_room(_meminfo(tmp_path, 5 * GIB), proc, root) == 5 * GIB


def test_a_v1_group_named_outside_the_namespace_reads_the_mount(tmp_path: Path) -> None:
    # in a container with its own cgroup namespace, /proc/self/cgroup may name a path the
    # mount does not have; the mount's root is then the container's group
    proc, root = _v1(tmp_path, "/", 1 * GIB, rss=256 * MIB)
    proc.write_text("a line of no cgroup\n4:memory:/docker/0123abcd\n")
    assert page_cache_room(_meminfo(tmp_path, 20 * GIB), proc, root) == GIB - 256 * MIB


def test_the_tightest_v2_level_bounds_the_room(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    leaf = root / "robot.slice" / "memory_node.service"
    leaf.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "memory.stat").write_text("anon 99999999999\n")  # the root group has no limit
    (root / "robot.slice" / "memory.max").write_text(f"{4 * GIB}\n")
    (root / "robot.slice" / "memory.stat").write_text(f"anon {3 * GIB}\nfile 7\nshmem 0\n")
    (leaf / "memory.max").write_text("max\n")
    (leaf / "memory.stat").write_text(f"anon {GIB}\nfile {2 * GIB}\nshmem 0\n")
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/robot.slice/memory_node.service\n")
    meminfo = _meminfo(tmp_path, 20 * GIB)
    assert page_cache_room(meminfo, proc, root) == GIB  # the slice: 4 GiB, 3 of them used
    (leaf / "memory.max").write_text(f"{GIB + 512 * MIB}\n")
    assert page_cache_room(meminfo, proc, root) == 512 * MIB
    (leaf / "memory.stat").write_text(f"anon {2 * GIB}\nshmem 0\n")  # over: no room, not < 0
    assert page_cache_room(meminfo, proc, root) == 0


def test_nothing_readable_means_no_bound(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    assert page_cache_room(missing, missing, missing) is None
    assert page_cache_room(_meminfo(tmp_path, 6 * GIB), missing, missing) == 6 * GIB


def test_this_machine_has_room_within_its_available_memory() -> None:
    # the real /proc and /sys of the machine the tests run on
    room = page_cache_room()
    assert room is not None
    available = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemAvailable:")
    )
    assert 0 < room <= available * 1.1  # MemAvailable moves between the two reads
