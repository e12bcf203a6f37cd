"""The paper's question-answering experiment: questions, answerers, scores, runs.

The robotics result of the paper is a question-answering one (OC-NaVQA: question
accuracy, positional error, temporal error). This package asks a memory questions and
scores the answers the way ReMEmbR's and DAAAM's evaluation code does:

* :mod:`.questions`: a question and its true answer (:class:`~.questions.Question`), and
  our JSON Lines question format;
* :mod:`.oc_navqa`: OC-NaVQA's CSV as DAAAM ships it (``data/oc-navqa_data.csv``), with
  DAAAM's per-sequence start times as the time base;
* :mod:`.question_files`: :func:`~.question_files.read_questions` (either format, by the
  suffix) and :func:`~.question_files.write_questions`;
* :mod:`.scoring`: the per-question measures (ReMEmbR's ``eval.py``: binary correct or
  not, position L2 error in metres, time and duration absolute error in minutes) and the
  summary with the paper's three columns, per type, category and sequence, and its mean
  and spread over runs;
* :mod:`.answerers`: what an answerer is, and ``retrieval`` (no LLM, deterministic: the
  question's words go to the store's text search);
* :mod:`.openai_answerer` (with :mod:`.chat`, the HTTP client): an LLM agent on any
  OpenAI-compatible chat-completions endpoint, using the package's own agent tool;
* :mod:`.run`: a run folder (every answer, score and transcript; the summary; the
  settings), resumable;
* :mod:`.consistency`: the questions of a file that disagree with themselves (an answer
  seen outside the question's window or after its asking, units that disagree);
* :mod:`.world_questions`: questions generated from the ground truth of our long-horizon
  synthetic world (:mod:`surprise_memory.offline.synthetic.qa_world`);
* :mod:`.place_questions`: its second round (landmarks, a second pass:
  :mod:`surprise_memory.offline.synthetic.qa_places`), in OC-NaVQA's mix of types, with
  still-there and lure questions.

``surprise-memory eval-qa`` (:mod:`surprise_memory.cli.qa`) drives it. Nothing here
imports rclpy (a memory node's service is reached through the retriever the caller passes).
"""
