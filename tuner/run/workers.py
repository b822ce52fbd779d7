"""``--workers N``: N copies of the tuning loop on this machine, all on one study.

There is no scheduler. Each worker is the same loop a single-process run executes, in its own
process, pointed at the same storage; the study keeps them apart (claims, constant liar,
heartbeats: see ``tuner.study``). This process starts them, shows their lines and the progress,
and writes the outputs once they are done.

One device per worker: on CUDA each worker sees one GPU (``CUDA_VISIBLE_DEVICES``, round-robin
over the visible ones). On a CPU the workers share the cores, so per-trial timings get noisier.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time

from ..core.errors import StudyError
from ..study import scoring_from_study
from ..system.interrupts import interruptible
from ..system.lanes import LanePlan, lane_env, plan_lanes
from ..system.launch import PARENT_ENV, python_command


def device_plan(n: int, device: str) -> tuple[list[dict[str, str]], str]:
    """Environment overrides per worker, and a line saying who measures on what."""
    if device == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            gpus = [g.strip() for g in visible.split(",") if g.strip()]
        else:
            import torch

            gpus = [str(i) for i in range(torch.cuda.device_count())]
        envs = [{"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} for i in range(n)]
        shared = " (more workers than GPUs: those sharing a GPU get noisier timings)" if n > len(gpus) else ""
        where = ", ".join(f"w{i}: GPU {env['CUDA_VISIBLE_DEVICES']}" for i, env in enumerate(envs))
        return envs, f"  {n} workers, one GPU each: {where}{shared}"
    if device.startswith("cuda"):
        return [{} for _ in range(n)], f"  {n} workers share {device}: per-trial timings get noisier"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [{} for _ in range(n)], (
        f"  {n} workers share this machine's {cpus} CPU core(s): they compile side by side and take turns "
        f"timing (one timing slot), so a compile may still disturb another worker's timing; --parallel "
        f"keeps compiles off the timing cores")


def lane_plan(opts, device: str) -> LanePlan:
    """How many measuring processes this run starts: ``--workers`` when asked for, else the lanes
    of ``--parallel`` (tuner/system/lanes.py); 1 in a worker process itself."""
    if opts.worker_index is not None:
        return LanePlan(1)
    if opts.workers > 1:
        return LanePlan(opts.workers)
    return plan_lanes(opts.parallel, device, opts.threads)


def run_workers(opts, device: str, tuner, run, progress, lanes: LanePlan | None = None) -> None:
    """Start ``opts.workers`` workers (or ``lanes``' processes), relay their lines, wait for them;
    fill ``run`` from the study.

    Workers on one machine's CPU, and lanes, share a timing slot: they compile side by side but
    time in turn, so no trial is timed while another one runs on the same device."""
    lanes = lanes or LanePlan(opts.workers)
    if opts.workers > 1:
        envs, plan = device_plan(opts.workers, device)
    else:  # lanes: one device, trials in flight on it
        envs, plan = [{} for _ in range(lanes.lanes)], f"  {lanes.why}"
        opts = dataclasses.replace(opts, workers=lanes.lanes)
    if opts.workers == lanes.lanes and (not device.startswith("cuda") or lanes.timing_cores):
        slot = lane_env(lanes, tuner.work_dir, device)
        envs = [{**env, **slot} for env in envs]
    progress.write(plan)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            progress.write(line)

    procs = [_start(opts, i, env) for i, env in enumerate(envs)]
    relays = [threading.Thread(target=_relay, args=(p, f"[w{i}] ", say), daemon=True) for i, p in enumerate(procs)]
    for relay in relays:
        relay.start()
    try:
        while any(p.poll() is None for p in procs):
            with interruptible():
                time.sleep(1.0)
            progress.advance_to(tuner.search_done())
    except KeyboardInterrupt:
        _stop(procs)
        raise
    finally:
        for relay in relays:
            relay.join(timeout=5)
        _collect(opts, procs, tuner, run)
    if run.scoring is None and 2 in [p.returncode for p in procs]:
        raise StudyError("the workers stopped with an error before the eager baseline was measured",
                         "see the [wN] error lines above; fix what they say and run the same command again")


def _start(opts, index: int, env_extra: dict[str, str]) -> subprocess.Popen:
    options = dataclasses.asdict(opts)
    options.update(workers=1, worker_index=index, progress=False)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{PARENT_ENV: str(os.getpid())}, **env_extra)
    # The options (and so the storage URL, which may hold a password) go through a pipe, not
    # the command line that `ps` shows to every user of the machine.
    proc = subprocess.Popen(python_command("tuner._worker"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True, cwd=os.getcwd())
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(options))
    proc.stdin.close()
    return proc


def _relay(proc: subprocess.Popen, prefix: str, say) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        say(prefix + line.rstrip("\n"))


def _stop(procs: list[subprocess.Popen]) -> None:
    """Ctrl-C: workers in this terminal got SIGINT too. Give them a moment to record it, then
    repeat it (Python drops one that lands in a garbage-collector callback), then SIGKILL."""
    start = time.time()
    next_interrupt = start + 2
    while any(p.poll() is None for p in procs) and time.time() - start < 60:
        if time.time() >= next_interrupt:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
            next_interrupt += 5
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def _collect(opts, procs: list[subprocess.Popen], tuner, run) -> None:

    for i, p in enumerate(procs):
        code = p.poll()
        if code == 130:
            run.interrupted = True
        elif code not in (0, None):
            run.notes.append(f"worker w{i} exited with code {code}; the other workers carried on")
    run.scoring = scoring_from_study(tuner.study)
    done = tuner.search_done()
    measured = set(tuner.measured_by_key())
    if done < opts.trials and not {c.key() for c in tuner.space.configs()} - measured:
        run.exhausted = True
