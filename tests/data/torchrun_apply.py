"""A user's training script under torchrun that applies a tuned multi-rank config with one call;
it prints what it runs, for tests/test_ranks.py: the wrapper, its DDP settings and the graphs."""
import json
import os
import sys

import torch
import torch.distributed as dist

import tuner
from tuner.user.workload import load_workload

config_path, workload_path = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
workload = load_workload(workload_path)
model = tuner.apply_config(workload.make_model(), config_path)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
inputs = workload.make_inputs()
for _ in range(3):
    optimizer.zero_grad()
    workload.loss_fn(model(*inputs), inputs).backward()
    optimizer.step()
from torch._dynamo.utils import counters  # noqa: E402

line = json.dumps({"rank": dist.get_rank(), "wrapper": type(model).__name__,
                   "bucket_bytes_cap": getattr(model, "bucket_bytes_cap", None),
                   "optimize_ddp": torch._dynamo.config.optimize_ddp,
                   "graphs": int(counters["stats"].get("unique_graphs", 0)),
                   "backend_graphs": int(counters["aot_autograd"].get("total", 0))})
# One write of the whole line: both ranks share torchrun's stdout pipe, and print() writes the text
# and its newline apart, so the two ranks' lines could run into one ("Extra data", seen in the suite).
# A write under PIPE_BUF bytes to a pipe is atomic.
os.write(sys.stdout.fileno(), (line + "\n").encode())
dist.destroy_process_group()
