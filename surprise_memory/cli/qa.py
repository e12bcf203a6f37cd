"""``surprise-memory eval-qa``: ask a memory a question file's questions, score the answers.

The question file is OC-NaVQA's CSV as DAAAM ships it (``data/oc-navqa_data.csv``) or
our JSON Lines format (:mod:`surprise_memory.evaluation.qa.questions`). Each sequence's
memory is a store (``--store SEQ=PATH``: a folder or a ``postgresql://`` URI, opened
read-only) or a running memory node (``--service SEQ=NAME``: its ``retrieve_episodes``
service, over DDS). The run folder (``--out``) gets every answer, score and transcript,
the summary and the settings (:mod:`surprise_memory.evaluation.qa.run`); ``--resume RUN``
asks what a stopped run left, from the run's own settings. ``--dry-run`` reads the
question file only and prints its counts and the questions that disagree with themselves
(an answer seen outside the question's window or after it is asked, units that disagree:
:mod:`surprise_memory.evaluation.qa.consistency`); ``--skip-inconsistent`` leaves those
out of the run, and the summary says how many.

Exit status: 0 when every question got an answer (right or wrong), 3 when some failed (an
endpoint down, a timeout: listed in the summary; ``--resume`` asks them again), 1 on an
error before any question was asked.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from surprise_memory.cli.options import EXIT_INCOMPLETE, add_config_options, given, note
from surprise_memory.config.qa import QaConfig
from surprise_memory.errors import InputError

__all__ = ["add_qa_command"]


def add_qa_command(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``eval-qa`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    p = sub.add_parser(
        "eval-qa",
        help="ask stores a question file's questions (OC-NaVQA, ours) and score the answers",
        formatter_class=fmt,
        description="The paper's question-answering experiment. QUESTIONS is OC-NaVQA's "
        "CSV as DAAAM ships it (data/oc-navqa_data.csv; times count from DAAAM's start time "
        "of each CODa sequence) or our .jsonl format. Each question is asked of its "
        "sequence's memory through the package's agent tool, cut at the question's current "
        "time, and scored as ReMEmbR's eval.py scores it: binary right or wrong, position "
        "L2 error in metres, time and duration absolute error in minutes, text judged by "
        "the LLM (or unscored). The summary has the paper's three columns (question "
        "accuracy, positional error, temporal error) per type, category and sequence.",
    )
    p.add_argument(
        "questions", nargs="?", metavar="QUESTIONS", help="question file (.csv or .jsonl)"
    )
    p.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="[SEQ=]PATH",
        help="the store of sequence SEQ (folder or postgresql:// URI); repeat per sequence; "
        "SEQ= may be left out when the file asks about one sequence",
    )
    p.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="[SEQ=]NAME",
        help="instead of a store: a running memory node's retrieve_episodes service "
        "(e.g. /surprise_memory/retrieve_episodes), which embeds the text itself",
    )
    p.add_argument("--out", metavar="RUN", help="new run folder")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="ask what the run in RUN has not answered yet (its questions, memories and "
        "settings come from RUN/settings.json; settings given here replace them)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read and check QUESTIONS only: counts per type and sequence, rows rejected, "
        "questions whose answer time lies outside their window or after their asking, or "
        "whose units disagree",
    )
    p.add_argument(
        "--skip-inconsistent",
        action="store_true",
        help="leave out the questions --dry-run lists as inconsistent (the summary says how "
        "many, settings.json which and why)",
    )
    p.add_argument(
        "--sequence",
        action="append",
        default=[],
        metavar="SEQ",
        help="ask only the questions of these sequences (repeat)",
    )
    p.add_argument(
        "--question-times",
        metavar="DIR",
        help="OC-NaVQA: ReMEmbR's remembr/data/navqa folder, whose <seq>/qa_unfilled.json "
        "end_time is each question's current time (default: after the whole sequence) and "
        "start_time its window's start (both checked against the answer's time)",
    )
    add_config_options(p, [QaConfig])
    p.set_defaults(func=_cmd_eval_qa)


def _read(args: argparse.Namespace) -> Any:
    from surprise_memory.evaluation.qa.oc_navqa import read_remembr_question_windows
    from surprise_memory.evaluation.qa.question_files import read_questions

    if not args.questions:
        raise InputError("give the question file (QUESTIONS), or --resume RUN")
    options: dict[str, Any] = {}
    if args.question_times:
        if not args.questions.lower().endswith(".csv"):
            raise InputError("--question-times applies to OC-NaVQA's CSV only")
        options["question_windows"] = read_remembr_question_windows(args.question_times)
    read = read_questions(args.questions, **options)
    if args.sequence:
        unknown = sorted(set(args.sequence) - set(read.sequences))
        if unknown:
            raise InputError(f"--sequence {unknown}: the file asks about {read.sequences}")
        read.questions = [q for q in read.questions if q.sequence in args.sequence]
        kept = {q.id for q in read.questions}
        read.inconsistent = {k: v for k, v in read.inconsistent.items() if k in kept}
    return read


def _print_counts(read: Any) -> None:
    print(f"{read.path}: {len(read.questions)} questions, {len(read.rejected)} rows rejected")
    for key in ("type", "sequence", "category", "horizon"):
        counts = {k: v for k, v in read.counts(key).items() if k}
        if counts:
            print(f"  by {key}: " + "; ".join(f"{k}: {v}" for k, v in counts.items()))
    for line, reason in read.rejected:
        print(f"  rejected: line {line}: {reason}")
    for text in read.notes:
        print(f"  note: {text}")
    _print_inconsistent(read)


def _print_inconsistent(read: Any) -> None:
    from surprise_memory.evaluation.qa.consistency import problem_kinds

    if not read.inconsistent:
        print("  inconsistent: none (answer times within their windows, units agree)")
        return
    kinds = "; ".join(f"{k}: {n}" for k, n in problem_kinds(read).items() if n)
    print(
        f"  inconsistent: {len(read.inconsistent)} of {len(read.questions)} questions "
        f"({kinds}); --skip-inconsistent leaves them out"
    )
    sources = {q.id: q.source for q in read.questions}
    for qid, reasons in read.inconsistent.items():
        for reason in reasons:
            print(f"    {qid} ({sources[qid]}): {reason}")


def _memory_specs(args: argparse.Namespace, sequences: list[str]) -> dict[str, dict[str, str]]:
    specs: dict[str, dict[str, str]] = {}
    for kind, values in (("store", args.store), ("service", args.service)):
        for value in values:
            seq, where = _split_sequence(value)
            if seq is None:
                if len(sequences) != 1:
                    raise InputError(
                        f"--{kind} {value!r}: name its sequence (SEQ=...); the file asks "
                        f"about {sequences}"
                    )
                seq = sequences[0]
            if seq in specs:
                raise InputError(f"sequence {seq!r} is given two memories")
            if kind == "store":
                where = _store_location(where)
            specs[seq] = {kind: where}
    return specs


def _split_sequence(value: str) -> tuple[str | None, str]:
    head, sep, rest = value.partition("=")
    if sep and head and not any(c in head for c in "/:\\"):
        return head, rest
    return None, value


def _store_location(where: str) -> str:
    from surprise_memory.memory.store import is_postgres_url

    if is_postgres_url(where):
        return where
    path = Path(where).expanduser()
    if not path.is_dir():
        raise InputError(f"store {where!r} does not exist")
    return str(path.resolve())


def _cmd_eval_qa(args: argparse.Namespace) -> int:
    from surprise_memory.evaluation.qa.run import QaRun, file_sha256, run_questions

    changes = given(args, [QaConfig])
    if args.resume:
        if (
            args.questions
            or args.store
            or args.service
            or args.out
            or args.sequence
            or args.skip_inconsistent
        ):
            raise InputError(
                "--resume RUN takes its questions and memories from RUN/settings.json; give "
                "only the settings to change"
            )
        run: Any = QaRun.open(args.resume)
        config = QaConfig.from_mapping({**run.settings["config"], **changes})
        specs = run.settings["memories"]
    else:
        read = _read(args)
        if args.dry_run:
            _print_counts(read)
            return 0
        if not args.out:
            raise InputError("give --out RUN, a new folder for the run (or --dry-run)")
        inconsistent = _leave_out(read, args.skip_inconsistent)
        config = QaConfig.from_mapping(changes)
        specs = _memory_specs(args, sorted({q.sequence for q in read.questions}))
        missing = sorted({q.sequence for q in read.questions} - set(specs))
        if missing:
            raise InputError(f"no memory for sequence(s) {missing}: give --store SEQ=PATH")
    with contextlib.ExitStack() as stack:
        # memories and answerer first: a setting or a store that cannot be used is refused
        # before a run folder is written
        memories = _open_memories(stack, specs, config)
        folder = Path(args.resume or args.out).expanduser()
        answerer = _answerer(config, folder)
        if args.resume:
            run.note_resume(changes)
        else:
            settings = {
                "question_file": {
                    "path": str(read.path.resolve()),
                    "sha256": file_sha256(read.path),
                },
                "memories": specs,
                "inconsistent": {"left_out": args.skip_inconsistent, "questions": inconsistent},
                "config": config.as_dict(),
                "answerer": {"name": answerer.name, **answerer.settings()},
                "embedders": {
                    seq: m.embedder_model for seq, m in memories.items() if m.embedder_model
                },
            }
            run = QaRun.create(args.out, read.questions, settings)
            _record_versions(run)
        total = len(run.questions) * config.qa_repeats

        def progress(question: Any, index: int, record: Mapping[str, Any]) -> None:
            score = record["score"]
            value = "" if score["value"] is None else f" {score['measure']}={score['value']:.3g}"
            why = f": {record['error']}" if record["error"] else ""
            note(f"run {index} {question.id} ({question.type}): {score['status']}{value}{why}")

        note(f"{total} question(s) in {run.folder}, answerer {answerer.name}")
        summary = run_questions(
            run, answerer, memories, repeats=config.qa_repeats, progress=progress
        )
    _print_summary(summary, run.folder)
    return EXIT_INCOMPLETE if summary["errors"] else 0


def _leave_out(read: Any, skip: bool) -> dict[str, list[str]]:
    """The inconsistent questions (id: reasons); with ``skip``, taken out of ``read``."""
    found = dict(read.inconsistent)
    if not found:
        return found
    if skip:
        read.questions = [q for q in read.questions if q.id not in found]
        if not read.questions:
            raise InputError("--skip-inconsistent leaves no question: every one is inconsistent")
        note(f"{len(found)} inconsistent question(s) left out (--skip-inconsistent)")
    else:
        note(
            f"{len(found)} question(s) disagree with themselves (--dry-run lists them; "
            "--skip-inconsistent leaves them out); asked all the same"
        )
    return found


def _record_versions(run: Any) -> None:
    from surprise_memory.evaluation.qa.run import SETTINGS
    from surprise_memory.offline.run_record import versions, write_json

    run.settings["versions"] = versions()
    write_json(run.folder / SETTINGS, run.settings)


def _answerer(config: QaConfig, folder: Path) -> Any:
    if config.answerer == "retrieval":
        from surprise_memory.evaluation.qa.answerers import RetrievalAnswerer

        generic = config.qa_generic_threshold  # 1.0: not asked
        return RetrievalAnswerer(
            config.qa_yes_threshold,
            config.qa_max_results,
            generic_threshold=generic if generic < 1.0 else None,
            place_margin=config.qa_place_margin,
        )
    from surprise_memory.evaluation.qa.openai_answerer import OpenAIAnswerer

    return OpenAIAnswerer(config, images_folder=folder / "images")


def _open_memories(
    stack: contextlib.ExitStack, specs: Mapping[str, Mapping[str, str]], config: QaConfig
) -> dict[str, Any]:
    from surprise_memory.evaluation.qa.answerers import Memory

    memories: dict[str, Any] = {}
    embedders: dict[str, Any] = {}
    node = None
    for seq, spec in specs.items():
        if "service" in spec:
            from surprise_memory.agents.ros_client import EpisodicMemoryClient, RosEpisodeRetriever

            if node is None:
                node = stack.enter_context(_ros_node())
            client = EpisodicMemoryClient(
                node, spec["service"], timeout=config.qa_service_timeout_seconds
            )
            stack.callback(client.destroy)
            memories[seq] = Memory(RosEpisodeRetriever(client))
            continue
        memories[seq] = _store_memory(stack, spec["store"], config, embedders)
    return memories


def _store_memory(
    stack: contextlib.ExitStack, location: str, config: QaConfig, embedders: dict[str, Any]
) -> Any:
    from surprise_memory.evaluation.qa.answerers import Memory
    from surprise_memory.memory.query_embedder import store_query_embedder
    from surprise_memory.memory.store import open_store

    store = stack.enter_context(open_store(location, read_only=True))
    name = str(store.embedder_model)  # None (an empty store) is refused just below
    try:
        if name not in embedders:
            embedders[name] = store_query_embedder(store, config.qa_device, text=True)
    except InputError as exc:
        if config.answerer == "retrieval":
            raise InputError(f"store {location}: {exc}") from None
        note(f"store {location}: no text search ({exc}); the agent searches by time and place")
        return Memory(store)
    return Memory.searched_by(store, embedders[name])


@contextlib.contextmanager
def _ros_node() -> Iterator[Any]:
    # goto's node: a context of its own, spun in a thread, so service waits have deadlines
    from surprise_memory.cli.goto import _ros_node as goto_node

    with goto_node() as node:
        yield node


def _print_summary(summary: Mapping[str, Any], folder: Path) -> None:
    row = summary["all"]
    counts = row["counts"]

    def figure(key: str, digits: int) -> str:
        value = row[key]["mean"]
        return "-" if value is None else f"{value:.{digits}f}"

    print(
        f"question accuracy {figure('question_accuracy', 3)}, positional error "
        f"{figure('positional_error_m', 2)} m, temporal error {figure('temporal_error_min', 2)} "
        f"min; {counts['questions']} answers: {counts['scored']} scored, "
        f"{counts['unanswered']} unanswered, {counts['unscored']} unscored, "
        f"{counts['errors']} failed"
    )
    left = summary.get("inconsistent", {})
    if left.get("count"):
        verb = "left out" if left["left_out"] else "asked and scored"
        print(f"{left['count']} inconsistent question(s) {verb} (settings.json lists them)")
    if summary["errors"]:
        print(f"{len(summary['errors'])} failed: resume with --resume {folder}")
    print(f"summary: {folder / 'summary.md'}")
