"""How a failure on many ranks is read (tuner/ranks/group.py, rank.py), without starting ranks: the
elastic launcher's summary (every rank's block, not only its Root Cause), which failure came first
and which are its consequences, hangs told by the exception a collective raises and by NCCL's
watchdog line anywhere in a log, and the rank that was behind. tests/test_ranks.py runs real ranks."""
from __future__ import annotations

from tuner.core.spec import TrialSpec


def test_the_launchers_summary_names_the_rank_that_died_first():
    from tuner.ranks.group import died_first, merge

    log = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 12)
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_11:21:41
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 13)
"""
    assert died_first(log) == (1, -9)
    merged = merge([{"status": "running", "stage": "timing"}, {"status": "running", "stage": "compile"}], 1, log)
    assert merged["status"] == "failed" and merged["failed_rank"] == 1
    assert merged["failure"]["raw"].startswith("rank 1 was killed by SIGKILL")
    assert "rank 0 at stage timing, rank 1 at stage compile" in merged["failure"]["raw"]


def test_the_earliest_failure_is_the_cause_and_the_others_its_consequences():
    from tuner.ranks.group import merge

    lost_peer = {"category": "unknown", "explanation": "", "hint": "",
                 "raw": "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242"}
    oom = {"category": "out_of_memory", "explanation": "", "hint": "", "raw": "OutOfMemoryError: out of memory"}
    ranks = [{"status": "failed", "stage": "compile", "failure": lost_peer, "failed_at": 1_000_005.0},
             {"status": "failed", "stage": "compile", "failure": oom, "failed_at": 1_000_000.0}]
    merged = merge(ranks, 1, "")
    assert merged["failed_rank"] == 1 and merged["failure"]["category"] == "out_of_memory"
    assert merged["failure"]["raw"].startswith("rank 1: OutOfMemoryError: out of memory; then, as a consequence: "
                                               "rank 0: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection "
                                               "closed by peer"), merged["failure"]["raw"]
    assert merged["consequences"] == [{"rank": 0, "category": "unknown", "raw": "rank 0: " + lost_peer["raw"]}]


def test_a_rank_the_launcher_saw_killed_is_the_cause_unless_another_failed_clearly_before():
    """The launcher dates a death in whole seconds, a little after it: a rank's own failure in the
    same second is its consequence; one recorded seconds before is the cause."""
    import datetime

    from tuner.ranks.group import merge

    when = datetime.datetime(2026, 12, 2, 11, 21, 41)
    log = f"Root Cause (first observed failure):\n[0]:\n  time      : {when.isoformat(sep='_')}\n" \
          "  host      : localhost\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 13)\n"
    lost_peer = {"category": "unknown", "explanation": "", "hint": "", "raw": "Connection closed by peer"}
    for recorded_at, cause in [(when.timestamp() + 0.4, 1), (when.timestamp() - 0.6, 1), (when.timestamp() - 3, 0)]:
        ranks = [{"status": "failed", "stage": "timing", "failure": lost_peer, "failed_at": recorded_at},
                 {"status": "running", "stage": "timing"}]
        merged = merge(ranks, 1, log)
        assert merged["failed_rank"] == cause, (recorded_at - when.timestamp(), merged["failure"])
    assert merged["failure"]["raw"].startswith("rank 0: Connection closed by peer; then, as a consequence: rank 1 "
                                               "was killed by SIGKILL")


#: NCCL's watchdog and the launcher's summary, as torch 2.11's ProcessGroupNCCL and elastic launcher
#: printed them on an H200 (a collective queued behind a long kernel, a 5 s timeout; the C++ stack
#: traces left out, the rank made rank 1 of 2).
NCCL_TIMEOUT_LOG = """\
[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=5000) ran for 5037 milliseconds before timing \
out.
[rank1]:[E1204 16:36:57.192160067 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected \
by watchdog at work sequence id: 2 PG status: last enqueued work: 2, last completed work: 1
[rank1]:[E1204 16:38:02.213359007 ProcessGroupNCCL.cpp:764] [Rank 1] To avoid data inconsistency, we are taking the \
entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
E1204 16:38:02.481000 526 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -6) local_rank: 1 \
(pid: 553) of binary: /opt/torch/.venv/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
====================================================
tuner.ranks.main FAILED
----------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
----------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_16:38:02
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 553)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 553
====================================================
"""


def test_nccls_watchdog_aborting_a_waiting_rank_reads_as_a_hang_not_a_crash():
    from tuner.ranks.group import merge, nccl_watchdog

    assert nccl_watchdog(NCCL_TIMEOUT_LOG, 1).startswith("[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689]")
    assert nccl_watchdog(NCCL_TIMEOUT_LOG, 0) is None, "rank 1's watchdog, not rank 0's"
    assert nccl_watchdog("[E ProcessGroupNCCL.cpp:1575] ProcessGroupNCCL's watchdog got stuck for 480 seconds", 0)
    assert nccl_watchdog("RuntimeError: NCCL timeout in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121", 3)
    assert nccl_watchdog("[rank0]: RuntimeError: NCCL error: unhandled system error", 0) is None
    merged = merge([{"status": "running", "stage": "timing"}, {"status": "running", "stage": "timing"}], 1,
                   NCCL_TIMEOUT_LOG)
    fail = merged["failure"]
    assert merged["failed_rank"] == 1 and fail["category"] == "rank_hang", fail
    assert fail["raw"].startswith("rank 1 waited in a collective during stage timing for rank 0 (at stage timing), "
                                  "which never joined it: NCCL's watchdog timed it out and aborted the rank with "
                                  "SIGABRT"), fail["raw"]
    assert "Watchdog caught collective operation timeout" in fail["raw"]
    crashed = merge([{"status": "running", "stage": "timing"}] * 2, 1,
                    NCCL_TIMEOUT_LOG.replace("Watchdog caught collective operation timeout", "illegal memory access"))
    assert crashed["failure"]["category"] == "crashed", "SIGABRT without the watchdog's words stays a crash"


def test_a_rank_that_records_nccls_timeout_itself_records_a_hang():
    import torch.distributed as dist

    from tuner.ranks.rank import hang_failure

    spec = TrialSpec(workload="model.py", config={}, collective_timeout_s=60)
    nccl = dist.DistBackendError("[PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective operation "
                                 "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                                 "Timeout(ms)=60000) ran for 60012 milliseconds before timing out.")
    gloo = RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                        "60000ms for recv operation to complete")
    for timed_out in (nccl, gloo):
        hang = hang_failure(timed_out, spec, "timing")
        assert hang is not None and hang.category == "rank_hang", timed_out
    try:  # as Dynamo re-raises an error of the code it ran: the collective's timeout is the cause
        raise RuntimeError("backend='inductor' raised an error") from gloo
    except RuntimeError as wrapped:
        assert hang_failure(wrapped, spec, "compile") is not None
    not_hangs = [TimeoutError("Timeout in autotune subprocess 4242"),  # inductor's autotuning
                 dist.DistBackendError("NCCL communicator was aborted on rank 0."),
                 RuntimeError("DistBackendError: watchdog thread exited, timeout unknown"),
                 RuntimeError("mat1 and mat2 shapes cannot be multiplied")]
    for other in not_hangs:
        assert hang_failure(other, spec, "timing") is None, other


def test_a_hang_names_the_rank_whose_last_collective_is_the_earliest():
    """Ranks 0 and 2 timed out in the collective they had started (their 41st); rank 1 timed out in
    none, busy elsewhere: it is the one they waited for, not rank 2 beside them."""
    from tuner.ranks.group import merge

    def hung(r: int) -> dict:
        return {"status": "failed", "stage": "timing", "collectives": 41, "failed_at": 100.0 + r,
                "failure": {"category": "rank_hang", "explanation": "", "hint": "",
                            "raw": f"rank {r} waited 5 s in a collective during stage timing for a rank that never "
                                   "joined it: RuntimeError: Timed out waiting 5000ms for recv operation to complete"}}

    merged = merge([hung(0), {"status": "running", "stage": "compile"}, hung(2)], 1, "")
    assert merged["failed_rank"] == 0
    assert merged["failure"]["raw"].startswith("rank 0 waited 5 s in a collective during stage timing for rank 1 (at "
                                               "stage compile), which never joined it"), merged["failure"]["raw"]
    behind = [hung(0), {**hung(1), "collectives": 40}, hung(2)]
    assert "for rank 1 (at stage timing), which" in merge(behind, 1, "")["failure"]["raw"], "a collective behind"


def test_a_killed_rank_listed_only_under_failures_is_the_cause():
    """The launcher's summary as torch 2.13 writes it when rank 1 was killed and rank 0 lost it in
    the same 0.1 s poll: both dated one second, rank 0 its Root Cause."""
    from tuner.ranks.group import launcher_failures, merge

    log = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
tuner.ranks.main FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-06_23:58:11
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4170)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4170
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_23:58:11
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4169)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
    assert [(r, code) for r, code, _ in launcher_failures(log)] == [(0, 1), (1, -9)], "Root Cause first"
    when = launcher_failures(log)[1][2]
    lost_peer = {"category": "unknown", "explanation": "", "hint": "",
                 "raw": "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:62615"}
    for recorded_at in (when + 0.3, when - 0.05):  # the launcher's second started just after, or before
        ranks = [{"status": "failed", "stage": "timing", "failure": lost_peer, "failed_at": recorded_at},
                 {"status": "running", "stage": "timing"}]
        merged = merge(ranks, 1, log)
        assert merged["failed_rank"] == 1, merged["failure"]
        assert merged["failure"]["raw"].startswith("rank 1 was killed by SIGKILL, likely by the out-of-memory killer; "
                                                   "then, as a consequence: rank 0: RuntimeError: [gloo/transport/tcp/"
                                                   "pair.cc:553] Connection closed"), merged["failure"]


def test_nccls_watchdog_far_before_the_logs_tail_still_reads_as_a_hang(tmp_path):
    """NCCL dumps its debug information for a minute before it aborts the rank: the watchdog's line
    is megabytes before the launcher's summary."""
    from tuner.isolation.isolated import log_tail
    from tuner.ranks.group import hang_lines, merge

    head, _, summary = NCCL_TIMEOUT_LOG.partition("terminate called")
    path = tmp_path / "trial.log"
    with open(path, "w") as log:
        log.write(head)
        for i in range(60_000):  # 6 MB of NCCL's dump
            log.write(f"[rank1]:[I1204 16:37:{i % 60:02d}] NCCL INFO comm 0x5f3c rank 1 nRanks 2 dump line {i}\n")
        log.write("terminate called" + summary)
    tail = log_tail(path, 20000)
    assert "Root Cause" in tail and "Watchdog caught" not in tail, "the watchdog's line scrolled out of the tail"
    lines = hang_lines(path)
    assert lines.startswith("[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught")
    assert hang_lines(tmp_path / "missing.log") == ""
    merged = merge([{"status": "running", "stage": "timing"}] * 2, 1, lines + tail)
    assert merged["failure"]["category"] == "rank_hang", merged["failure"]
    assert merge([{"status": "running", "stage": "timing"}] * 2, 1, tail)["failure"]["category"] == "crashed"
