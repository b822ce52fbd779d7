"""A tiny model whose rank 1 (or the rank ``RANK_FAULT_RANK`` names) misbehaves while the model is
compiled, as ``RANK_FAULT`` says; eager runs untouched (but for ``unsynced``). For
tests/test_ranks.py:

- ``kill``: rank 1 is killed with SIGKILL (as the out-of-memory killer does);
- ``drift``: rank 1 nudges a weight outside autograd every step, so the ranks' models drift apart
  although DDP all-reduces every gradient;
- ``hang``: rank 1 stalls for a minute, so rank 0 waits in its first compiled step's all-reduce
  for a rank that does not come;
- ``oom_first``: rank 1 runs out of memory (raises ``torch.OutOfMemoryError``) a few seconds into
  its second compiled step, while rank 0, which the first step's all-reduce kept in step with it,
  waits for it in that step's all-reduce: rank 0 then fails too, later, having lost its peer
  ("Connection closed by peer");
- ``kill_in_allreduce``: as ``oom_first``, but rank 1 is killed with SIGKILL instead: rank 0, waiting
  in the all-reduce, loses its peer within milliseconds, and the launcher finds both failed in
  one poll;
- ``autotune_timeout``: rank 1 raises the ``TimeoutError`` inductor's autotuning raises when a
  benchmark runs too long (no collective timed out: rank 0 then loses its peer);
- ``unsynced``: rank 1's DDP keeps its own gradients instead of the average (a comm hook that still
  joins the all-reduce, so no rank waits, but throws its result away), eager and compiled alike:
  the ranks' models part as soon as their data differ.

Dynamo breaks the graph at each of these calls and runs it.
"""
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn

FAULT = os.environ.get("RANK_FAULT")
FAULTY = os.environ.get("RANK_FAULT_RANK", "1")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if torch.compiler.is_compiling() and os.environ.get("RANK") == FAULTY:
            if FAULT == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif FAULT == "drift":
                with torch.no_grad():
                    self.lin.bias.add_(1e-3)
            elif FAULT == "hang":
                time.sleep(60)
            elif FAULT in ("oom_first", "kill_in_allreduce", "autotune_timeout"):
                _fail_at_run_time()
        return self.lin(x)


_compiled_calls = []


@torch.compiler.disable  # runs at every compiled call, past the graph break
def _fail_at_run_time():
    _compiled_calls.append(1)
    if FAULT == "autotune_timeout":  # as torch/_inductor/autotune_process.py raises it
        raise TimeoutError(f"Timeout in autotune subprocess {os.getpid()} (tests/workloads/rank_faults.py)")
    if len(_compiled_calls) < 2:
        return  # the first step: both ranks compile, and meet in its all-reduce
    time.sleep(3)  # rank 0 is in the second step's all-reduce by now
    if FAULT == "kill_in_allreduce":
        os.kill(os.getpid(), signal.SIGKILL)
    raise torch.OutOfMemoryError("rank 1 tried to allocate 64.00 GiB: out of memory (tests/workloads/rank_faults.py)")


def _keep_local_gradients(state, bucket):
    """DDP's all-reduce joined (the other ranks wait for it), its average thrown away."""
    local = bucket.buffer().clone()
    reduced = dist.all_reduce(bucket.buffer().div_(dist.get_world_size()), async_op=True).get_future()
    return reduced.then(lambda _: local)


def _unsynced(init):
    def unsynced_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.register_comm_hook(None, _keep_local_gradients)

    unsynced_init.unsynced = True
    return unsynced_init


_DDP = torch.nn.parallel.DistributedDataParallel
if FAULT == "unsynced" and os.environ.get("RANK") == FAULTY and not hasattr(_DDP.__init__, "unsynced"):
    _DDP.__init__ = _unsynced(_DDP.__init__)  # this file may be loaded more than once


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
